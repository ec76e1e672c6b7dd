"""Decision Transformer on Point-Robot (50 goals, 45/5 split, H=20), as a baseline.

Trained on the same PPO learning histories as ``ad_point_robot`` and
``meta_dt_point_robot`` (same presets: data, model, updates), windows of 4
whole episodes, conditioned on the return-to-go inside each episode (scaled
by the horizon, 20). It acts like AD (one token per step on a rolling KV
cache across episodes) with every episode conditioned on the best episode
return of its training data (``algo.target_return``, as the DT and
in-context RL literature set it). It is the "DT at equal data" of the
Meta-DT claim (Meta-DT: a DT plus a world-model task representation and a
world-model prompt); DT has no mechanism that asks it to use earlier
episodes.

- ``smoke``: ``agentrl train dt_point_robot --preset smoke``; plumbing.
- ``cpu``: ``agentrl reproduce meta_dt_point_robot --preset cpu --seeds 3
  --compare dt_point_robot`` (Meta-DT's runs are reused; ~15 min of
  training a DT seed beside two other jobs). Measured (session 39, 3 seeds
  x 3 test goals, 50 episodes): **DT -20.3 -> -21.8, score -0.14** (random
  0.02, PPO online 0.43): it does not improve in context and ends below
  random; Meta-DT minus DT +9.06 [2.82, 17.9] (paired;
  ``repro_meta_dt_point_robot_vs_dt_point_robot_cpu``). Conditioning
  every goal on the data's best return (a goal next to the start) tells
  it nothing about where this goal is.
- ``gpu``, ``full``: ``ad_point_robot``'s with DT; for a GPU.

The acting rule is chosen per seed on validation goals by ``agentrl
reproduce``. Deviation from the DT paper: the return-to-go enters as a
feature of the observation token, not as a token of its own
(``agentrl.algos.dt``).
"""

import dataclasses

import ad_point_robot

from agentrl.algos import DT
from agentrl.train.experiments import make_presets

BASE = dataclasses.replace(
    ad_point_robot.BASE,
    name="dt_point_robot",
    algo=DT(context_episodes=ad_point_robot.BASE.algo.context_episodes),
)
PRESETS = make_presets(BASE, **ad_point_robot.CHANGES)
