"""Decision Transformer (return-conditioned) on Dark Room, as a baseline.

Trained on the same Q-learning histories as ``ad_darkroom`` but conditioned
on the return-to-go inside each episode; it does not learn across episodes,
which is the contrast with AD. ``smoke``/``cpu``/``full`` as in
``ad_darkroom``. DT's observation is the one-hot cell with the return-to-go
appended (a vector), so it uses a linear embedding, not the grid encoding.
"""

import dataclasses

from agentrl.algos import DT
from agentrl.experiments import ad_darkroom
from agentrl.train.experiments import make_presets

BASE = dataclasses.replace(
    ad_darkroom.BASE,
    name="dt_darkroom",
    algo=DT(context_episodes=ad_darkroom.BASE.algo.context_episodes),
    model=dataclasses.replace(ad_darkroom.BASE.model, obs_encoding="table"),
)
PRESETS = make_presets(
    BASE, **{p: c for p, c in ad_darkroom.CHANGES.items() if p != "demo"}
)
