"""Decision Transformer (return-conditioned) on Dark Room, as a baseline.

Trained on the same Q-learning histories as ``ad_darkroom`` but conditioned
on the return-to-go inside each episode; it does not learn across episodes,
which is the contrast with AD. ``smoke``/``cpu``/``full`` as in
``ad_darkroom``. DT's observation is the one-hot cell with the return-to-go
appended (a vector), so it uses a linear embedding, not the grid encoding.
"""

import dataclasses

from agentrl.train.config import ExperimentConfig
from agentrl.train.experiments import load_experiment


def _preset(preset: str) -> ExperimentConfig:
    config = load_experiment("ad_darkroom", preset)
    model = dataclasses.replace(config.model, obs_encoding="table")
    return dataclasses.replace(config, name="dt_darkroom", algo="dt", model=model)


PRESETS = {p: (lambda p=p: _preset(p)) for p in ("smoke", "cpu", "full")}
