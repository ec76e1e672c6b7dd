"""RL² on the 5-arm Gaussian bandit (H=500, DPT's bandit family), held out.

A GRU policy (64 units) is trained by PPO over trials of one 500-pull
episode, each on a fresh bandit (means uniform in [0, 1]); evaluation runs
it for one trial on 200 held-out bandits (an evaluation-only key) next to
Thompson sampling, UCB and random on the same bandits and keys.

Noise: the task asks for the DPT noise with standard deviation 0.3; the
env's option is ``noise_variance``, so ``noise_variance=0.09`` gives std
0.3. (``dpt_bandit`` uses ``noise_variance=0.3``, std 0.55.)

Deviations from RL² (Duan et al., 2016, TRPO, 256 GRU units, bandits up to
n=500): PPO (as XLand-MiniGrid's RL² baseline), 64 GRU units, discount
0.995 (Duan et al. use 0.99 on n=500 bandits... their Table 1 reports RL²
falling behind Gittins at n=500, a hint of the horizon's difficulty), and
``reward_scale=0.1`` so the value loss of a 500-step trial does not swamp
the policy's gradient (see :mod:`agentrl.online.ppo`).

- ``smoke``: seconds; H=50, a few updates; plumbing only.
- ``cpu``: ``agentrl bench reproduce rl2_bandit --preset cpu`` — 256 envs x
  50-step rollouts, 600 updates (7.7M env steps; ~8 min a seed on the
  shared 2-core CPU). Target: regret at H within 1.5x Thompson sampling's.
  Measured (3 seeds x 200 held-out bandits): regret 128.3 vs Thompson 9.3
  (13.8x: not met), UCB 49.3, random 174.2. Training curves rise to a
  trial return of ~310-330 (oracle ~417) by update 170 and then plateau
  with the policy's entropy collapsed to ~0.3-0.6: the budget (and no
  tuning) leaves RL² a greedy-ish learner far from Thompson sampling.
- ``full`` / ``gpu``: 2048 envs, 3,000 updates (307M env steps), 256 units.
"""

from agentrl.algos import RL2
from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig, TrainConfig
from agentrl.train.experiments import make_presets, steps_fields


def _env_args(horizon: int) -> tuple:
    return (("num_arms", 5), ("horizon", horizon), ("noise_variance", 0.09))


BASE = ExperimentConfig(
    name="rl2_bandit",
    algo=RL2(
        trial_episodes=1,
        num_envs=256,
        rollout_steps=50,
        num_epochs=4,
        num_minibatches=4,
        hidden=64,
        embed=64,
        gamma=0.995,
        gae_lambda=0.95,
        ent_coef=0.01,
        reward_scale=0.1,
    ),
    data=DataConfig(env="gaussian_bandit", env_args=_env_args(500), source="random"),
    train=TrainConfig(
        steps=600,
        lr=1e-3,
        weight_decay=0.0,
        schedule="constant",
        warmup_steps=0,
        grad_clip=0.5,
        log_every=10,
        checkpoint_every=150,
    ),
    eval=EvalConfig(num_tasks=200, num_episodes=1),
)
CHANGES = dict(
    smoke={
        "data.env_args": _env_args(50),
        "algo.num_envs": 16,
        "algo.rollout_steps": 25,
        "algo.hidden": 16,
        "algo.embed": 16,
        **steps_fields(8, logs=4, checkpoints=2),
        "eval.num_tasks": 16,
    },
    cpu={},
    full={
        "algo.num_envs": 2048,
        "algo.hidden": 256,
        **steps_fields(3000),
    },
)
CHANGES["gpu"] = CHANGES["full"]
PRESETS = make_presets(BASE, **CHANGES)
