"""RL² on HalfCheetah-Vel (50 target velocities, 45/5): trials of 4 episodes.

A GRU policy with a Gaussian head (state-independent log std) is trained by
PPO over trials of 4 episodes on one target velocity (the 45 training
velocities of the split, one drawn per trial; the reward ``-|v - v_target|
- 0.05 |a|^2`` with the target hidden), its hidden state kept across the
trial's episodes and reset between trials; its input is the observation,
the previous action and reward and a new-episode flag. What pays over a
trial is to find the target speed early (one step's reward and observed
velocity nearly give it) and hold it in the later episodes. Evaluation
runs one trial on the held-out velocities next to random play and SAC
learning from scratch on the same velocities (SAC's converged return is
the normalized score's oracle, as for ``ad_halfcheetah_vel``: the
``data`` block, ``experiments/_locomotion.py``'s SAC settings, only
configures that baseline; RL² trains on no dataset). The in-context
improvement is episode 1 against episodes 2-4. Needs ``agentrl[mujoco]``.

Settings: garage's RL² example on HalfCheetahVel (``rl2_ppo_halfcheetah``,
the RL² baseline of TrMRL's comparison: a 64-unit GRU, 100-step episodes,
4 episodes a trial, gamma 0.99, GAE lambda 0.95, clip 0.2, 10 epochs) and
TrMRL's torch RL² example (lr 2.5e-4). Deviations: PPO with a loss-side
entropy bonus 0.01 (garage: 0.02 added to the rewards, "max" entropy),
minibatches of whole env streams with the GRU replayed from the rollout's
first hidden state (truncated backpropagation at each 100-step rollout),
``reward_scale=0.1`` (as every RL² experiment here: a trial's value loss
would otherwise swamp the policy's gradient), no observation normalisation,
target velocities in [0, 3] (T2MIR's family; garage's ``HalfCheetahVelEnv``
draws them in [0, 2]), MJX physics (docs/references.md). RL² itself (Duan
et al., 2016) has no HalfCheetah-Vel experiment.

Presets (2-core CPU of the development machine; ``gpu`` for one H100):

- ``smoke``: ``agentrl train rl2_halfcheetah_vel --preset smoke`` —
  20-step episodes, trials of 2, 4 envs, 4 updates; minutes of compiling
  MJX (trainer, evaluation, SAC baseline). Plumbing only.
- ``cpu``: ``agentrl reproduce rl2_halfcheetah_vel --preset cpu --seeds 1
  --controls`` — 100-step episodes, 32 envs x 100-step rollouts (a quarter
  trial each), 200 updates (640k env steps, 1,600 trials), one evaluation
  trial on the held-out velocities. Measured on the shared 2-core CPU (8
  updates, then one evaluation): compile and first update 56 s, then 6.5 s
  an update (3,200 MJX steps and 10 epochs of GRU replay); one evaluation
  on the 3 test velocities 4.9 min, nearly all of it SAC learning beside
  for 120 episodes (the data block's length before session 42; SAC now
  learns beside for 600, the data's 8 x 600 that AD's ``cpu`` preset
  shares). Measured (session 43, ``reproduce --seeds 1 --controls`` for
  seeds 0 and 1, ~50 min each with one to four other jobs on the cores,
  training 26; record ``repro_rl2_halfcheetah_vel_cpu``), 2 seeds x 3
  test velocities, one trial of 4 episodes, validation chose ``sample``
  and ``greedy``: return -128.5 -> -127.2, score 0.46 [0.22, 0.84] (SAC's
  converged level after 600 episodes 1, random -0.06); minus rewards
  zeroed -1.5 [-2.8, 0.3], shuffled -0.3 [-1.7, 2.0], an empty context
  +2.8 [-4.3, 8.9] (seed 0 alone: +8.2 [6.4, 9.7]). Before session 42,
  with SAC's baseline over 120 episodes (``--set data.num_tasks=16 --set
  data.num_episodes=120``, record
  ``repro_rl2_halfcheetah_vel_cpu_num_tasks16_num_episodes120``, 1 seed):
  -135.3 -> -128.8, score 0.66 against that shorter SAC run's level, an
  empty context -2.6 [-3.6, -1.2]). It runs better than random, with no
  in-context adaptation, as expected below. What is
  feasible at that budget: the policy learns to move at speeds that pay
  on average (return above random's, towards SAC's converged level);
  adapting its speed to the target within a trial is not expected at
  under 1M env steps (meta-RL papers train RL² on HalfCheetah-Vel for
  tens of millions of steps and more). After 8 updates (26k env steps)
  the training trials' return was still at its initial level (about -200
  an episode) and one test trial scored at random's (-155 in episode 1,
  -152 over the 4; random -159, -151).
- ``gpu``: the references' 200-step episodes (800-step trials), 1,024
  envs x 200-step rollouts, 40 updates (8.2M env steps), 256 GRU units;
  sized for about 3 min on one H100 (estimated, not measured: no GPU was
  lent; MJX's batched step is the unknown).
- ``full``: 1,024 envs, 500 updates (102M env steps), 256 units.
"""

from _locomotion import HALFCHEETAH_DATA_CHANGES, sac_histories

from agentrl.algos import RL2
from agentrl.train.config import EvalConfig, ExperimentConfig
from agentrl.train.experiments import make_presets, online_train_config, steps_fields

TRIAL_EPISODES = 4  # garage's / TrMRL's RL² on HalfCheetahVel

BASE = ExperimentConfig(
    name="rl2_halfcheetah_vel",
    algo=RL2(
        trial_episodes=TRIAL_EPISODES,
        num_envs=32,
        rollout_steps=100,
        num_epochs=10,
        num_minibatches=4,
        hidden=64,
        embed=64,
        gamma=0.99,
        gae_lambda=0.95,
        ent_coef=0.01,
        reward_scale=0.1,
    ),
    # the evaluation's SAC baseline (and oracle); RL² trains on no dataset
    data=sac_histories("halfcheetah_vel"),
    train=online_train_config(
        steps=200,
        lr=2.5e-4,
        schedule="constant",
        log_every=10,
        checkpoint_every=50,
    ),
    eval=EvalConfig(num_tasks=5, num_episodes=TRIAL_EPISODES),
)
CHANGES = dict(
    smoke={
        **HALFCHEETAH_DATA_CHANGES["smoke"],
        "algo.trial_episodes": 2,
        "algo.num_envs": 4,
        "algo.rollout_steps": 20,
        "algo.num_epochs": 2,
        "algo.num_minibatches": 2,
        "algo.hidden": 16,
        "algo.embed": 16,
        **steps_fields(4, logs=4, checkpoints=2),
        "eval.num_tasks": 2,
        "eval.num_episodes": 2,
    },
    cpu=HALFCHEETAH_DATA_CHANGES["cpu"],
    gpu={
        **HALFCHEETAH_DATA_CHANGES["gpu"],
        "algo.num_envs": 1024,
        "algo.rollout_steps": 200,
        "algo.hidden": 256,
        **steps_fields(40, logs=20, checkpoints=2),
    },
    full={
        **HALFCHEETAH_DATA_CHANGES["full"],
        "algo.num_envs": 1024,
        "algo.rollout_steps": 200,
        "algo.hidden": 256,
        **steps_fields(500),
    },
)
PRESETS = make_presets(BASE, **CHANGES)
