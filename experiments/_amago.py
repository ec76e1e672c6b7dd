"""What the AMAGO experiments share: AMAGO's settings at the CPU presets'
scale (``amago_darkroom``'s docstring names the deviations), the training
config, and the smoke and full presets' common changes."""

from typing import Any

from agentrl.algos import Amago
from agentrl.train.config import TrainConfig
from agentrl.train.experiments import steps_fields


def amago(**settings: Any) -> Amago:
    """AMAGO with 4 critics (min over 2 drawn for the target), critics of 128
    units, batches of 24 trials, 16 envs and the reward multiplier 10, the
    policy's probabilities unclipped (``algo.prob_clip``'s default: every
    cpu record was made so; ``FULL`` takes AMAGO's clip); ``settings`` add
    or replace fields (``trial_episodes``, ``capacity``, ``grad_steps``,
    ``explore_steps`` ...)."""
    shared = dict(
        num_envs=16,
        batch_size=24,
        num_critics=4,
        critics_in_target=2,
        critic_hidden=128,
        reward_scale=10.0,
    )
    return Amago(**{**shared, **settings})


def amago_train(steps: int = 600) -> TrainConfig:
    """AdamW at 3e-4 without warm-up, weight decay 1e-3, gradient clip 1.0."""
    return TrainConfig(
        steps=steps,
        lr=3e-4,
        weight_decay=1e-3,
        warmup_steps=0,
        schedule="constant",
        grad_clip=1.0,
        log_every=10,
        checkpoint_every=steps // 4,
    )


#: the smoke presets' sizes: 4 envs, 2 updates of 2 gradient steps, a
#: one-layer width-16 model (plumbing only)
SMOKE = {
    "algo.num_envs": 4,
    "algo.capacity": 16,
    "algo.batch_size": 4,
    "algo.grad_steps": 2,
    "algo.critic_hidden": 16,
    "model.num_layers": 1,
    "model.num_heads": 2,
    "model.d_model": 16,
    "model.d_ff": 32,
    **steps_fields(2, logs=2, checkpoints=1),
}

#: the full / gpu presets' common changes: 64 envs, AMAGO's 1e-4 learning
#: rate, 1M-step exploration anneal and probability clip (its ``Discrete``'s
#: [0.001, 0.99]), 2,000 updates (AMAGO's own runs take
#: 1,000 epochs of 1,000 gradient steps; its transformer also drops 5% of
#: the feed-forward and embedding activations, which the online trainers
#: here do not)
FULL = {
    # AMAGO's TformerTrajEncoder: activation "leaky_relu" (torch's slope
    # 0.01), normformer_norms and head_scaling on (its defaults)
    "model.ffn_activation": "leaky_relu",
    "model.normformer": True,
    "algo.num_envs": 64,
    "algo.capacity": 5000,
    "algo.explore_steps": 1_000_000,
    "algo.prob_clip": (0.001, 0.99),
    "train.lr": 1e-4,
    **steps_fields(2000),
}


def grid_changes(smoke_env_args: tuple, full_episodes: int) -> dict[str, dict]:
    """``CHANGES`` of a dark-grid AMAGO experiment (Dark Room, Key-to-Door):
    ``smoke`` on a small room with trials of 2 episodes; ``full`` / ``gpu``
    with trials (and evaluations) of ``full_episodes`` episodes and 64
    gradient steps an update."""
    full = {
        **FULL,
        "algo.trial_episodes": full_episodes,
        "algo.grad_steps": 64,
        "eval.num_episodes": full_episodes,
    }
    smoke = {
        **SMOKE,
        "data.env_args": smoke_env_args,
        "algo.trial_episodes": 2,
        "algo.explore_steps": 24,
        "eval.num_tasks": 4,
        "eval.num_episodes": 2,
    }
    return dict(smoke=smoke, cpu={}, full=full, gpu=full)
