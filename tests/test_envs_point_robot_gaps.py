"""Point-Robot's action clipping, goal layouts and random starts, by hand."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs


def _numpy_oracle_return(goal, start, horizon, max_action=0.1):
    """The per-axis clipped greedy walk from ``start``, stepped in NumPy."""
    pos, total = np.array(start, np.float64), 0.0
    for _ in range(horizon):
        pos = pos + np.clip(goal - pos, -max_action, max_action)
        total -= np.linalg.norm(pos - goal)
    return total


def test_actions_are_clipped_to_the_box_on_both_sides():
    env = envs.make("point_robot")
    params = env.default_params  # goal (0, 1)
    _, state = env.reset(jax.random.key(0), params)
    obs, _, reward, *_ = env.step(
        jax.random.key(1), state, jnp.array([-5.0, -3.0]), params
    )
    np.testing.assert_allclose(obs, [-0.1, -0.1], rtol=1e-6)
    np.testing.assert_allclose(reward, -np.hypot(0.1, 1.1), rtol=1e-6)


def test_half_circle_goals_lie_on_the_circle_of_the_given_radius():
    env = envs.make("point_robot", radius=2.0, num_goals=4)
    goals = np.asarray(jax.vmap(env.params_for_task)(jnp.arange(4)).goal)
    angles = np.pi * (np.arange(4) + 0.5) / 4
    np.testing.assert_allclose(
        goals, 2.0 * np.stack([np.cos(angles), np.sin(angles)], 1), atol=1e-6
    )
    free = envs.make("point_robot", radius=2.0)
    drawn = jax.vmap(free.sample_params)(jax.random.split(jax.random.key(41), 64))
    np.testing.assert_allclose(np.linalg.norm(drawn.goal, axis=1), 2.0, rtol=1e-5)


def test_half_circle_task_parameter_is_the_goal_angle():
    env = envs.make("point_robot", num_goals=8)
    params = jax.vmap(env.params_for_task)(jnp.arange(8))
    got = jax.vmap(env.task_parameter)(params)
    np.testing.assert_allclose(got, np.pi * (np.arange(8) + 0.5) / 8, atol=1e-5)


@pytest.mark.parametrize("num_goals", [0, 200])
def test_uniform_goals_fill_the_whole_square(num_goals):
    env = envs.make("point_robot", goals="uniform", radius=1.5, num_goals=num_goals)
    if num_goals:
        goals = jax.vmap(env.params_for_task)(jnp.arange(num_goals)).goal
    else:
        goals = jax.vmap(env.sample_params)(
            jax.random.split(jax.random.key(42), 200)
        ).goal
    goals = np.asarray(goals)
    assert np.abs(goals).max() <= 1.5
    # each quadrant holds a quarter of the goals (50 of 200, sd ~6)
    quadrant = (goals[:, 0] > 0).astype(int) * 2 + (goals[:, 1] > 0)
    assert np.bincount(quadrant, minlength=4).min() > 25
    assert goals.min() < -1.3 and goals.max() > 1.3


def test_random_starts_are_uniform_in_the_start_box():
    env = envs.make("point_robot", start_range=0.1)
    keys = jax.random.split(jax.random.key(43), 2000)
    obs, _ = jax.vmap(env.reset, (0, None))(keys, env.default_params)
    obs = np.asarray(obs)
    assert np.abs(obs).max() <= 0.1
    assert obs.min() < -0.09 and obs.max() > 0.09
    np.testing.assert_allclose(obs.mean(0), 0.0, atol=0.005)  # sd of the mean ~0.0013


@pytest.mark.parametrize("goal", [(0.3, -0.2), (-0.05, 0.12)])
def test_optimal_return_with_random_starts_is_the_mean_over_the_start_box(goal):
    """The module doc: the mean over uniform starts to within ~1e-3."""
    env = envs.make("point_robot", horizon=5, start_range=0.1, goals="uniform")
    params = env._goal_params(jnp.array(goal))
    mid = (np.arange(60) + 0.5) / 60 * 0.2 - 0.1  # a fine grid of starts
    want = np.mean(
        [_numpy_oracle_return(np.array(goal), (x, y), 5) for x in mid for y in mid]
    )
    assert float(env.optimal_return(params)) == pytest.approx(want, abs=2e-3)
    fixed = envs.make("point_robot", horizon=5, goals="uniform")
    at_origin = _numpy_oracle_return(np.array(goal), (0.0, 0.0), 5)
    assert float(fixed.optimal_return(params)) == pytest.approx(at_origin, rel=1e-5)
    assert abs(want - at_origin) > 5e-3  # the random start matters here


def test_optimal_return_counts_the_last_step_of_an_episode_too_short_to_arrive():
    env = envs.make("point_robot", horizon=5)
    params = env.default_params  # goal (0, 1): 0.9, 0.8, ..., 0.5 away
    assert float(env.optimal_return(params)) == pytest.approx(-3.5, rel=1e-5)
    walked = _numpy_oracle_return(np.array([0.0, 1.0]), (0.0, 0.0), 5)
    assert walked == pytest.approx(-3.5)
