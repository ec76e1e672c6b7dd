"""Dark Room's grid, start cells, goal regions and task draws, against hand counts."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs
from agentrl.envs.darkroom import DarkRoomState
from agentrl.envs.grid import DOWN, LEFT, NOOP, RIGHT, UP, steer


def _at(pos):
    """A Dark Room state at ``pos [x, y]``, time 0."""
    return DarkRoomState(time=jnp.int32(0), pos=jnp.array(pos, jnp.int32))


def walk(env, params, state, actions):
    """``[(obs, reward, terminated)]`` of ``step_env`` from ``state`` (a
    grid family's; Key-to-Door's tests use it too)."""
    step = jax.jit(env.step_env)
    out = []
    for a in actions:
        obs, state, reward, term, _ = step(None, state, jnp.int32(a), params)
        out.append((int(obs), float(reward), bool(term)))
    return out


def test_moves_into_a_wall_stay_put_on_every_edge():
    env = envs.make("darkroom", size=4, horizon=20)
    params = env.params_for_task(jnp.int32(0))  # goal (0, 0)
    # from (0, 0): up and left are walls; then right to the wall x = 3
    out = walk(env, params, _at([0, 0]), [UP, LEFT, RIGHT, RIGHT, RIGHT, RIGHT, RIGHT])
    assert [o for o, _, _ in out] == [0, 0, 1, 2, 3, 3, 3]
    # down the east wall to y = 3, then further down and right stay at (3, 3)
    out = walk(env, params, _at([3, 0]), [DOWN, DOWN, DOWN, DOWN, RIGHT, NOOP])
    assert [o for o, _, _ in out] == [7, 11, 15, 15, 15, 15]


def test_observation_is_y_times_size_plus_x():
    env = envs.make("darkroom", size=5, horizon=20, start="corner")
    params = env.params_for_task(jnp.int32(24))
    out = walk(env, params, _at([0, 0]), [RIGHT, RIGHT, DOWN])  # (1, 0) (2, 0) (2, 1)
    assert [o for o, _, _ in out] == [1, 2, 7]
    assert env.observation_space().n == 25
    corner, _, _ = walk(env, params, _at([4, 4]), [NOOP])[0]
    assert corner == 24 and bool(env.observation_space().contains(corner))


@pytest.mark.parametrize("size,want", [(9, 4 * 9 + 4), (10, 5 * 10 + 5), (2, 3)])
def test_centre_start_is_size_over_two_on_both_axes(size, want):
    """The module doc: size 10 starts at (5, 5); (size // 2, size // 2)."""
    env = envs.make("darkroom", size=size, horizon=5)
    obs, state = env.reset(jax.random.key(0), env.default_params)
    assert int(obs) == want
    assert np.asarray(state.pos).tolist() == [size // 2, size // 2]


def test_dense_reward_is_paid_after_the_move_and_never_ends_the_episode():
    env = envs.make("darkroom", size=5, horizon=20)
    params = env.params_for_task(jnp.int32(2 * 5 + 3))  # goal (3, 2), start (2, 2)
    out = walk(env, params, _at([2, 2]), [RIGHT, NOOP, NOOP, LEFT, RIGHT])
    assert [r for _, r, _ in out] == [1.0, 1.0, 1.0, 0.0, 1.0]
    assert not any(t for _, _, t in out)


def test_hard_defaults_are_17_by_17_with_horizon_20():
    env = envs.make("darkroom_hard")
    assert (env.size, env.horizon, env.num_tasks) == (17, 20, 17 * 17)
    assert env.observation_space().n == 17 * 17


def _band(size, lo, hi):
    """Row-major cells at Manhattan distance in ``[lo, hi]`` of the centre."""
    c = size // 2
    return [
        (x, y)
        for y, x in itertools.product(range(size), repeat=2)
        if lo <= abs(x - c) + abs(y - c) <= hi
    ]


@pytest.mark.parametrize("lo,hi", [(0, 4), (5, None), (3, 3), (8, 8)])
def test_goal_region_holds_exactly_the_band_both_ends_included(lo, hi):
    kw = {"min_goal_distance": lo}
    if hi is not None:
        kw["max_goal_distance"] = hi
    env = envs.make("darkroom", **kw)
    want = _band(9, lo, 16 if hi is None else hi)
    assert env.num_tasks == len(want)
    goals = jax.vmap(env.params_for_task)(jnp.arange(env.num_tasks)).goal
    assert [tuple(g) for g in np.asarray(goals).tolist()] == want


def test_a_band_without_cells_is_refused():
    with pytest.raises(ValueError, match="no goal cell"):
        envs.make("darkroom", size=5, min_goal_distance=5)


@pytest.mark.parametrize("kw,tasks", [({}, 9), ({"max_goal_distance": 1}, 5)])
def test_sample_params_draws_every_task_uniformly(kw, tasks):
    env = envs.make("darkroom", size=3, horizon=4, **kw)
    assert env.num_tasks == tasks
    goals = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(11), 1800)).goal
    cells = np.asarray(goals[:, 1] * 3 + goals[:, 0])
    counts = np.unique(cells, return_counts=True)[1]
    assert len(counts) == tasks  # every goal of the region, the last included
    assert counts.min() > 1800 / tasks * 0.7


def test_uniform_state_covers_every_cell():
    env = envs.make("darkroom", size=3, horizon=4)
    keys = jax.random.split(jax.random.key(12), 900)
    obs, state = jax.vmap(env.uniform_state, (0, None))(keys, env.default_params)
    counts = np.bincount(np.asarray(obs), minlength=9)
    assert counts.min() > 60  # 100 expected in each of the 9 cells
    np.testing.assert_array_equal(obs, state.pos[:, 1] * 3 + state.pos[:, 0])
    assert (np.asarray(state.time) == 0).all()


def test_hard_optimal_return_counts_a_goal_exactly_horizon_steps_away():
    """Optimal return 1 iff ``max(d, 1) <= horizon`` (the module doc)."""
    env = envs.make("darkroom_hard", size=5, horizon=4, start="corner")
    # goals (4, 0) and (2, 2) at distance 4 = horizon, (3, 2) at 5, (0, 0) at 0
    cells = jnp.array([4, 2 * 5 + 2, 2 * 5 + 3, 0])
    params = jax.vmap(env.params_for_task)(cells)
    np.testing.assert_array_equal(jax.vmap(env.optimal_return)(params), [1, 1, 0, 1])
    # the oracle gets there on the last step: reward 1, terminated
    out = walk(env, env.params_for_task(jnp.int32(4)), _at([0, 0]), [RIGHT] * 4)
    assert out[-1] == (4, 1.0, True) and [r for _, r, _ in out[:-1]] == [0, 0, 0]


def test_the_oracle_closes_the_first_coordinate_first():
    # DPT's reference oracle (envs/darkroom_env.py opt_action) moves along
    # state[0] until it matches the goal's, then along state[1]: both are
    # shortest paths, but the labels DPT trains on are that one's.
    def action(pos, goal):
        return int(steer(jnp.array(pos), jnp.array(goal)))

    assert action([0, 0], [2, 3]) == RIGHT
    assert action([3, 3], [1, 0]) == LEFT
    assert action([2, 0], [2, 3]) == DOWN
    assert action([2, 3], [2, 0]) == UP
    assert action([2, 2], [2, 2]) == NOOP
