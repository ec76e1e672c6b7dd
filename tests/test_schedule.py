"""The learning-rate shape (:func:`agentrl.schedule.schedule_shape`) by hand.

Linear warm-up from 0, then a cosine from 1 down to ``train.cosine_end``
over the rest of the schedule's length (the warm-up counts in it), flat at
the end beyond it; a warm-up as long as the run (the longest the config
allows) is cut by one update, so that the run's last update has the full
rate.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from agentrl.schedule import schedule_shape
from agentrl.train.config import TrainConfig


def shape_at(train: TrainConfig, steps) -> np.ndarray:
    fn = schedule_shape(train)
    return np.array([float(fn(s)) for s in steps])


def test_the_cosine_starts_at_zero_peaks_after_the_warm_up_and_ends_at_its_end():
    train = TrainConfig(steps=100, warmup_steps=20, cosine_end=0.25)
    half = 0.25 + (1 - 0.25) * 0.5 * (1 + math.cos(math.pi * 0.5))
    np.testing.assert_allclose(
        shape_at(train, [0, 10, 20, 60, 100, 150]),
        [0.0, 0.5, 1.0, half, 0.25, 0.25],
        atol=1e-6,
    )


def test_a_resumed_run_keeps_the_length_it_started_with():
    # schedule_steps (written on a resume for more steps) lays the cosine
    # over the first run's 100 steps: the rate is at its end from 100 on.
    train = TrainConfig(steps=300, schedule_steps=100, warmup_steps=0)
    np.testing.assert_allclose(
        shape_at(train, [0, 100, 250]), [1.0, 0.1, 0.1], atol=1e-6
    )


@pytest.mark.parametrize("schedule", ["cosine", "constant"])
def test_a_warm_up_as_long_as_the_run_ends_one_update_early(schedule):
    train = TrainConfig(steps=10, warmup_steps=10, schedule=schedule)
    # warm-up over 9 of the 10 updates: the last one at the full rate
    np.testing.assert_allclose(shape_at(train, range(10)), np.arange(10) / 9, atol=1e-6)
