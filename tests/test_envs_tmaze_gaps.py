"""The T-Maze's task draw: either side with probability 1/2."""

from __future__ import annotations

import jax
import numpy as np

from agentrl import envs


def test_sample_params_draws_each_side_half_the_time():
    env = envs.make("tmaze", corridor_length=3)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(81), 4000))
    goals = np.asarray(params.goal)
    assert set(np.unique(goals)) == {-1, 1}
    assert abs((goals == 1).mean() - 0.5) < 0.03  # sd 0.008
