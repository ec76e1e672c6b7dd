"""Decision Transformer (return-conditioned) on Dark Room, as a baseline.

Trained on the same Q-learning histories as ``ad_darkroom`` but conditioned
on the return-to-go inside each episode; it does not learn across episodes,
which is the contrast with AD. ``smoke``/``cpu``/``full`` as in
``ad_darkroom``.
"""

import dataclasses

from agentrl.train.config import ExperimentConfig
from agentrl.train.experiments import load_experiment


def _preset(preset: str) -> ExperimentConfig:
    config = load_experiment("ad_darkroom", preset)
    return dataclasses.replace(config, name="dt_darkroom", algo="dt")


PRESETS = {p: (lambda p=p: _preset(p)) for p in ("smoke", "cpu", "full")}
