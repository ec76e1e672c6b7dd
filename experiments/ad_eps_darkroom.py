"""AD-ε on Dark Room 9x9 from the noise curriculum (noise distillation).

The histories are made by the oracle acting ε-greedily with ε annealed from
1.0 down to a floor across each history's episodes (``noisy_oracle``
source): no RL training. Same model and loss as AD (``ad_darkroom``). The
AD-ε paper's claim: the in-context learner beats the best policy in its own
data.

- ``smoke``: ``agentrl train ad_eps_darkroom --preset smoke``; seconds.
- ``cpu``: as ``ad_darkroom``'s cpu preset on noise-curriculum data;
  expected: held-out return rises across episodes and ends above the mean
  return of the data's best (least noisy) episodes.
- ``full``: the AD-ε paper's Dark Room (65 train goals, context 4 episodes,
  4 layers width 512, batch 512, lr 3e-4, 300k updates); for a GPU.
"""

import dataclasses

from agentrl.train.config import ExperimentConfig
from agentrl.train.experiments import load_experiment


def _preset(preset: str) -> ExperimentConfig:
    config = load_experiment("ad_darkroom", preset)
    data = dataclasses.replace(config.data, source="noisy_oracle")
    return dataclasses.replace(config, name="ad_eps_darkroom", algo="ad_eps", data=data)


PRESETS = {p: (lambda p=p: _preset(p)) for p in ("smoke", "cpu", "full")}
