"""Transformer PPO over trials on Dark Room 9x9 (H=20), ReLIC's partial updates.

The causal transformer (3 layers, width 64, the AD Dark Room model's shape)
is trained by PPO over trials of 8 episodes (160 steps, its whole context)
on the 64 training goals, updating every 40 steps inside a trial (ReLIC's
partial updates: 4 updates a trial, the context carried on with the new
weights); evaluated like AD (rolling KV cache over its own history) on the
held-out goals for one trial.

Deviations from ReLIC (Elawady et al., 2024): trials of 8 episodes (the
``cpu_long`` preset: 50) rather than thousands of steps; Sink-KV only in
``cpu_long`` (``model.attention_sink``); PPO without their value
normalisation; a partial update trains against the fixed cache of the
earlier steps (see :mod:`agentrl.online.transformer`).

- ``smoke``: 5x5 room, trials of 2 episodes of 6 steps, 2 trials; plumbing.
- ``cpu``: 64 envs, 150 trials (1.54M env steps). Measured (1 seed, 63 min
  on the shared 2-core CPU, 16 held-out goals, one 8-episode trial):
  normalized score 0.074 in episode 1 rising to 0.449 in episode 8 (mean
  of the 8: 0.351); target 0.8 not met at this budget.
  ``benchmarks/results/repro_transformer_ppo_darkroom_cpu.md``.
- ``cpu_long``: the long trial: 50 episodes (1,000 steps, the whole trial
  in context), partial updates every 100 steps, Sink-KV, 16 envs x 10
  trials (160k env steps: a trial's update is ~2-3 min on the shared CPU),
  evaluated over 50 episodes to see whether return keeps rising with more
  in-context episodes. Measured (1 seed, 23 min): no, not at this budget:
  held-out score 0.112 in episode 1, 0.057 over the last 10, flat and
  barely above random (``repro_transformer_ppo_darkroom_cpu_long.md``).
  The trial's update has since got cheaper (re-encoding causal and
  prefix-only, no whole-cache copies: 2.6x faster at 500-step trials in a
  same-run A/B, ``agentrl bench online_long_context``), but a longer run
  was not made: the shared 2-core machine was at load 13-20 with the
  nice'd run getting ~5% of a core, so the question stays open.
- ``full`` / ``gpu``: 1024 envs, trials of 50 episodes (1,000 steps), 2,000
  trials.
"""

from agentrl.algos import TransformerPPO
from agentrl.models import ModelConfig
from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig, TrainConfig
from agentrl.train.experiments import make_presets, steps_fields

BASE = ExperimentConfig(
    name="transformer_ppo_darkroom",
    algo=TransformerPPO(
        trial_episodes=8,
        num_envs=64,
        update_every=40,
        num_epochs=2,
        num_minibatches=4,
        gamma=0.99,
        gae_lambda=0.95,
        ent_coef=0.01,
        reward_scale=0.1,
    ),
    data=DataConfig(
        env="darkroom", env_args=(("size", 9), ("horizon", 20)), source="random"
    ),
    model=ModelConfig(
        num_layers=3,
        num_heads=4,
        d_model=64,
        d_ff=256,
        dropout=0.0,
        obs_encoding="grid",
    ),
    train=TrainConfig(
        steps=300,
        lr=3e-4,
        weight_decay=0.0,
        schedule="constant",
        warmup_steps=0,
        grad_clip=0.5,
        log_every=10,
        checkpoint_every=50,
    ),
    eval=EvalConfig(num_tasks=16, num_episodes=8),
)
CHANGES = dict(
    smoke={
        "data.env_args": (("size", 5), ("horizon", 6)),
        "algo.trial_episodes": 2,
        "algo.update_every": 6,
        "algo.num_envs": 4,
        "algo.num_minibatches": 2,
        "model.num_layers": 1,
        "model.num_heads": 2,
        "model.d_model": 16,
        "model.d_ff": 32,
        **steps_fields(2, logs=2, checkpoints=1),
        "eval.num_tasks": 4,
        "eval.num_episodes": 2,
    },
    cpu=steps_fields(150, logs=30, checkpoints=3),
    cpu_long={
        "algo.trial_episodes": 50,
        "algo.update_every": 100,
        "algo.num_envs": 16,
        "model.attention_sink": True,
        **steps_fields(10, logs=10, checkpoints=2),
        "eval.num_episodes": 50,
    },
    full={
        "algo.num_envs": 1024,
        "algo.trial_episodes": 50,
        "algo.update_every": 250,
        **steps_fields(2000),
        "eval.num_episodes": 50,
    },
)
CHANGES["gpu"] = CHANGES["full"]
PRESETS = make_presets(BASE, **CHANGES)
