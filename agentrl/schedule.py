"""The learning-rate shape every learner's optimizer follows (a pure optax schedule)."""

from __future__ import annotations

from typing import Any

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
