"""AD on HalfCheetah-Vel (50 target velocities, 45/5) from SAC learning histories.

Algorithm Distillation on MuJoCo locomotion (T2MIR's HalfCheetahVel-v0,
docs/references.md): the cheetah is paid ``-|v - v_target| - 0.05 |a|^2``
each step for a hidden target velocity in ``[0, 3]``; SAC learns each
training velocity from scratch (``source="sac"``) and a causal transformer
with a Gaussian action head imitates those across-episode histories. On the
5 held-out velocities the model should hold the target better episode after
episode, with frozen weights. Evaluation runs SAC learning online on the
same velocities beside it (its converged return is the oracle of the
normalized score: HalfCheetah has none), random play, and writes
``return_vs_task.png`` (final-episode return against the target velocity).
Needs the extra ``agentrl[mujoco]``. Shared settings, presets and the
deviations from T2MIR's AD: ``experiments/_locomotion.py``.

Presets (2-core CPU of the development machine):

- ``smoke``: ``agentrl train ad_halfcheetah_vel --preset smoke`` — 4 SAC
  histories of 4 episodes of 20 steps, 40 updates; about 3-4 min, nearly
  all compiling MJX and SAC. Plumbing only.
- ``cpu``: ``agentrl train ad_halfcheetah_vel --preset cpu`` then
  ``agentrl eval runs/ad_halfcheetah_vel-cpu --control zero_rewards
  --control shuffle_rewards --control empty_context`` — 100-step episodes,
  16 SAC histories of 120 episodes, 1,500 updates, 30 evaluation episodes
  on the held-out velocities (2 validation, 3 test). Measured, 1 seed, with
  another job on the cores: data 18 min, training 7 min, ``agentrl
  reproduce ... --controls`` 22 min more. Result: AD is flat at SAC's
  converged level from episode 1 (score 0.69 [0.50, 0.88], random 0, SAC
  converged 1) and does not beat the empty-context control (−3.8 [−5.2,
  −2.3]): **no in-context learning at this size**; docs/mujoco.md says
  why, ``benchmarks/results/repro_ad_halfcheetah_vel_cpu.md`` has the
  record. With T2MIR's loader and sorted-episode evaluation (session 34,
  ``experiments/_locomotion.py`` names the settings): -138.2 -> -125.3,
  no better than an empty context (-0.95 [-8.44, 7.52]): no in-context
  learning either. Histories that hold learning change that (session 41,
  ``--set data.num_tasks=8 --set data.num_episodes=600`` with T2MIR's
  loader, about 80 min a seed; docs/mujoco.md): SAC's histories rise
  -147 -> -56 per tenth, and AD (-120.3 -> -108.7) beats rewards zeroed,
  rewards shuffled and an empty context (CIs above 0); its rise is not
  resolved over 3 test velocities and expert distillation is better; 1
  seed. Deviation kept: the preset's 16 x 120 histories, for its time.
- ``gpu``: 200-step episodes, 45 histories of 100 SAC episodes, T2MIR's
  width, 3,000 updates; sized for about 3 min on one H100 (estimated, not
  measured: no GPU was lent when it was written). Expect histories that
  rise only partly: a probe on this CPU (session 41, 3 velocities, SAC
  as here at 200-step episodes) had SAC's mean return per tenth of its
  run go from -526 to -403 at 2.5 m/s over 100 episodes (20,000 steps),
  and from -504 to -172 over 300 (60,000 steps, Meta-DT's "medium"
  checkpoint step); most of the gain comes after 30,000 steps.
- ``full``: T2MIR's AD settings on 45 histories of 1,000 SAC episodes.
"""

from _locomotion import HALFCHEETAH_DATA_CHANGES, T2MIR_LOADER, ad_base, ad_changes

from agentrl.train.experiments import make_presets

EVAL_EPISODES = 30  # T2MIR's HalfCheetah-Vel evaluation

BASE = ad_base("ad_halfcheetah_vel", "halfcheetah_vel", EVAL_EPISODES)
CHANGES = ad_changes(EVAL_EPISODES, HALFCHEETAH_DATA_CHANGES, cpu=T2MIR_LOADER)
PRESETS = make_presets(BASE, **CHANGES)
