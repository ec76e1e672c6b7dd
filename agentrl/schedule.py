"""The learning-rate shapes the learners' optimizers follow (pure optax schedules)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import optax


def schedule_shape(train: Any) -> optax.Schedule:
    """Learning-rate multiplier in [0, 1]: linear warm-up from 0 over
    ``train.warmup`` updates (none when it is 0: the first update at the
    full rate), then cosine to ``train.cosine_end`` over
    ``train.schedule_length`` steps (``schedule="cosine"``; its end value
    beyond) or flat (``"constant"``)."""
    length = train.schedule_length  # train.steps unless a resume kept it
    warmup = min(train.warmup, max(length - 1, 0))
    if train.schedule == "cosine":
        return optax.warmup_cosine_decay_schedule(
            0.0,
            1.0,
            warmup_steps=warmup,
            decay_steps=max(length, warmup + 1),
            end_value=train.cosine_end,
        )
    if warmup == 0:
        return optax.constant_schedule(1.0)
    return optax.join_schedules(
        [optax.linear_schedule(0.0, 1.0, warmup), optax.constant_schedule(1.0)],
        [warmup],
    )


def warmup_cosine_shape(
    warmup: int, start: float, length: int, schedule: str, end: float
) -> optax.Schedule:
    """Learning-rate multiplier of a count ``s`` (ReLIC's, PyTorch's
    ``LinearLR`` then ``CosineAnnealingLR`` stepped to ``s``): linear from
    ``start`` at 0 to 1 at ``warmup`` (none when 0), then cosine from 1 at
    ``warmup`` to ``end`` at ``warmup + length`` (``schedule="cosine"``;
    its end value beyond) or flat (``"constant"``)."""
    after = (
        optax.cosine_decay_schedule(1.0, max(length, 1), alpha=end)
        if schedule == "cosine"
        else optax.constant_schedule(1.0)
    )
    if warmup == 0:
        return after

    def rise(count):  # start + (1 - start) x the fraction: no cancellation at 0
        return start + (1.0 - start) * jnp.minimum(count, warmup) / warmup

    return optax.join_schedules([rise, after], [warmup])
