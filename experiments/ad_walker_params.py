"""AD on Walker-Params (50 randomised bodies, 45/5) from SAC learning histories.

Algorithm Distillation on the physics-parameter family (T2MIR's
WalkerRandParams-v0, docs/references.md): each task multiplies the walker's
body masses, inertias and frictions by ``1.5^U(-3, 3)`` and its joint
damping by ``1.3^U(-3, 3)``, entry by entry; the reward is forward speed
plus 1, minus 1 when fallen, minus ``1e-3 |a|^2``. SAC learns each training
body from scratch and a causal transformer imitates the histories; on the 5
held-out bodies the model should walk further episode after episode with
frozen weights. Evaluation runs SAC learning online on the same bodies
(its converged return is the normalized score's oracle) and random play,
and plots the final-episode return against the total body mass.
Needs the extra ``agentrl[mujoco]``. Shared settings, presets and the
deviations from T2MIR's AD: ``experiments/_locomotion.py``.

Presets (2-core CPU of the development machine):

- ``smoke``: ``agentrl train ad_walker_params --preset smoke`` — 4 SAC
  histories of 4 episodes of 20 steps, 40 updates; minutes of compiling.
  Plumbing only.
- ``cpu``: ``agentrl train ad_walker_params --preset cpu`` then
  ``agentrl eval runs/ad_walker_params-cpu`` — 100-step episodes, 16 SAC
  histories of 120 episodes, 1,500 updates, 40 evaluation episodes.
  Measured, 1 seed, with other jobs on the cores: data 23 min, training
  15 min, the protocol with controls 25 min more. SAC's histories
  learn (mean return 9.6 → 125.5 over their episodes), but AD declines in
  context (148.3 → 128.6 on 3 test bodies) and loses to the rewards-zeroed
  and empty-context controls (−25.0 [−38.6, −11.4], −24.4 [−41.9, −9.3]):
  **no in-context learning at this size** (docs/mujoco.md,
  ``benchmarks/results/repro_ad_walker_params_cpu.md``).
- ``gpu``: 200-step episodes, 45 histories of 100 SAC episodes, T2MIR's
  width and block, leaky ReLU and NormFormer's norms (``gpu`` and
  ``full``, session 69), 3,000 updates;
  sized for about 3 min on one H100 (estimated, not measured).
- ``full``: T2MIR's AD settings on 45 histories of 1,000 SAC episodes
  (T2MIR's collector: 1M steps per Walker task).

At ``gpu`` and ``full`` SAC keeps T2MIR's Walker replay buffer, 100,000
transitions (SAC's default is 10,000, HalfCheetah-Vel's; the ``cpu``
preset keeps it, as its records were made); neither preset has been run.
"""

from _locomotion import WALKER_DATA_CHANGES, ad_base, ad_changes

from agentrl.train.experiments import make_presets

EVAL_EPISODES = 40  # T2MIR's Walker-Params evaluation

BASE = ad_base("ad_walker_params", "walker_params", EVAL_EPISODES)
CHANGES = ad_changes(EVAL_EPISODES, WALKER_DATA_CHANGES, batch=32)
PRESETS = make_presets(BASE, **CHANGES)
