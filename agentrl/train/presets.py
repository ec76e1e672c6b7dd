"""Shared builders for experiment presets (the pieces every DPT preset repeats).

A DPT run always uses the ``transition`` layout with a window of one query
plus ``context`` transitions, AdamW with weight decay 1e-4, a warm-up of a
tenth of the steps (at most 500), about 50 log lines and 4 checkpoints.
Experiments in ``experiments/`` call :func:`dpt_experiment` with what differs.
"""

from __future__ import annotations

from agentrl.models import ModelConfig
from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig, TrainConfig


def dpt_experiment(
    name: str,
    data: DataConfig,
    *,
    layers: int,
    width: int,
    heads: int,
    context: int,
    steps: int,
    batch: int,
    lr: float,
    eval_tasks: int,
    eval_episodes: int,
    obs_encoding: str = "table",
) -> ExperimentConfig:
    """A DPT :class:`ExperimentConfig` on ``data`` with ``context`` transitions."""
    return ExperimentConfig(
        name=name,
        algo="dpt",
        data=data,
        model=ModelConfig(
            num_layers=layers,
            num_heads=heads,
            d_model=width,
            d_ff=4 * width,
            max_steps=context + 1,
            token_layout="transition",
            obs_encoding=obs_encoding,
        ),
        train=TrainConfig(
            steps=steps,
            batch_size=batch,
            lr=lr,
            weight_decay=1e-4,
            warmup_steps=min(500, steps // 10),
            context_size=context,
            log_every=max(steps // 50, 1),
            checkpoint_every=max(steps // 4, 1),
        ),
        eval=EvalConfig(num_tasks=eval_tasks, num_episodes=eval_episodes),
    )
