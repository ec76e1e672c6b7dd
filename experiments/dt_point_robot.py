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
- ``cpu``: ``agentrl reproduce dt_point_robot --preset cpu --seeds 5``
  (about 8 minutes a seed with one core to itself), then ``python
  benchmarks/paired_repro.py repro_meta_dt_point_robot_cpu:meta_dt
  repro_dt_point_robot_cpu:dt``. Measured (session 40, 5 seeds x 3 test
  goals, 50 episodes, ``repro_dt_point_robot_cpu``): **DT -18.1 -> -20.8,
  score -0.17 [-0.50, 0.23]** (random 0.02, PPO online 0.33): it does not
  improve in context and ends below random; Meta-DT minus DT **+9.36
  [2.93, 15.1]** (paired, ``paired_meta_dt_vs_dt_ad_point_robot``; 3
  seeds in session 39: +9.06 [2.82, 17.9]). DT's seeds 0-2 differ a little
  from session 39's (-13.7 / -31.9 / -22.0 against -13.1 / -32.0 / -20.4):
  no code they run changed, but the CPU did (Intel Xeon now, AMD EPYC
  then, as for the Meta-DT runs paired here), and its floating point is
  the likely cause. Conditioning
  every goal on the data's best return (a goal next to the start) tells
  it nothing about where this goal is.
- ``gpu``, ``full``: ``ad_point_robot``'s with DT; for a GPU. Their model
  is T2MIR-AD's, its leaky ReLU and NormFormer block included (session
  69), as AD's it is compared
  with; DT's reference (kzl/decision-transformer ``gym/experiment.py``)
  uses ReLU.

The acting rule is chosen per seed on validation goals by ``agentrl
reproduce``: since session 48 on 32 goals drawn from the goal
distribution (``ad_point_robot``'s presets), whose record is
``repro_dt_point_robot_cpu_validation_tasks32`` (the same weights with
``--set eval.validation_tasks=32``, session 46: seed 4 switches from
greedy to sampling, DT -0.13 [-0.47, 0.27]); ``repro_dt_point_robot_cpu``
above chose on the split's 2. Deviations from the DT paper: the
return-to-go enters as a feature of the observation token, not as a token
of its own, and every token also reads the previous reward
(``agentrl.algos.dt``); the action head is a Gaussian trained by its
likelihood, acting by sampling or its mean as validation chooses, where the
reference's continuous DT has a tanh head trained by MSE and acts on it.
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
