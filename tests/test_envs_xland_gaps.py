"""XLand-MiniGrid's generated rulesets, task draws and episode ends (pass 10
of the mutation passes; the end-to-end checks against xminigrid are the
long tests of ``test_envs_breadth_xland.py``)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("xminigrid")

from agentrl.envs import make  # noqa: E402
from agentrl.envs.xland import (  # noqa: E402
    GOAL_AGENT_HOLD,
    GOAL_AGENT_NEAR,
    OBJECT_COLORS,
    OBJECT_TILES,
    generate_rulesets,
)


@pytest.fixture(scope="module")
def table():
    generate = jax.jit(generate_rulesets, static_argnums=(1, 2))
    arrays = generate(jax.random.key(7), 1024, 3)
    return {k: np.asarray(v) for k, v in arrays.items()}


def test_the_goal_is_the_first_object_and_no_distractor_is_its_copy(table):
    goals, tiles = table["goals"], table["init_tiles"]  # [n, 5], [n, 4, 2]
    np.testing.assert_array_equal(goals[:, 1:3], tiles[:, 0])
    assert not (tiles[:, 1:] == tiles[:, :1]).all(-1).any()
    np.testing.assert_array_equal(goals[:, 3:], 0)
    np.testing.assert_array_equal(table["num_rules"], 0)


def test_every_kind_tile_and_colour_is_drawn(table):
    # "pick up X" and "stand next to X", over all six tiles and nine colours
    # (1024 rulesets x 4 objects: each misses with probability ~0)
    goals, tiles = table["goals"], table["init_tiles"]
    assert set(goals[:, 0]) == {GOAL_AGENT_HOLD, GOAL_AGENT_NEAR}
    assert abs(np.mean(goals[:, 0] == GOAL_AGENT_HOLD) - 0.5) < 0.1
    assert set(tiles[..., 0].ravel()) == set(OBJECT_TILES)
    assert set(tiles[..., 1].ravel()) == set(OBJECT_COLORS)
    # tile and colour are drawn independently: the 1024 goal objects take
    # all 6 x 9 pairs (one key for both would tie them, ~18 pairs)
    assert len({tuple(t) for t in tiles[:, 0]}) == len(OBJECT_TILES) * 9


@pytest.fixture(scope="module")
def env():
    return make("xland", num_rulesets=4, horizon=3)


def test_sample_params_draws_every_ruleset(env):
    keys = jax.random.split(jax.random.key(0), 64)
    goals = np.asarray(
        jax.jit(jax.vmap(lambda k: env.sample_params(k).ruleset.goal))(keys)
    )
    table = np.asarray(env.benchmark.goals)
    assert len({tuple(g) for g in table}) == 4  # the goals tell them apart
    drawn = {int(np.flatnonzero((table == g).all(-1))[0]) for g in goals}
    assert drawn == {0, 1, 2, 3}


def test_a_table_of_no_ruleset_is_refused():
    from xminigrid.benchmarks import Benchmark

    empty = Benchmark(
        goals=jnp.zeros((0, 5), jnp.uint8),
        rules=jnp.zeros((0, 1, 7), jnp.uint8),
        init_tiles=jnp.zeros((0, 3, 2), jnp.uint8),
        num_rules=jnp.zeros((0,), jnp.int32),
    )
    with pytest.raises(ValueError, match="n >= 1 rulesets"):
        make("xland", rulesets=empty)


def test_the_task_is_the_rulesets_goal_and_the_horizon_truncates(env):
    params = env.params_for_task(jnp.int32(2))  # not the default ruleset 0

    @jax.jit
    def run(params):
        _, state = env.reset(jax.random.key(0), params)
        goal = state.inner.goal_encoding

        def body(state, k):  # turning left never reaches a goal
            _, state, reward, term, trunc, _ = env.step(k, state, 1, params)
            return state, (reward, term, trunc)

        _, out = jax.lax.scan(body, state, jax.random.split(jax.random.key(1), 3))
        return goal, out

    goal, (reward, term, trunc) = run(params)
    np.testing.assert_array_equal(goal, params.ruleset.goal)
    np.testing.assert_array_equal(reward, 0.0)
    np.testing.assert_array_equal(term, False)  # a time limit is no goal
    np.testing.assert_array_equal(trunc, [False, False, True])


def test_the_onehot_observation_is_tile_then_colour_per_cell_then_direction(env):
    # the xland-minigrid baseline's input: per cell one-hot tile (13) then
    # one-hot colour (12), row-major over the view, then the direction (4)
    import copy
    import types

    onehot = copy.copy(env)
    onehot.observation = "onehot"
    v = env.view_size
    rng = np.random.default_rng(0)
    view = np.stack([rng.integers(0, 13, (v, v)), rng.integers(0, 12, (v, v))], -1)
    inner = types.SimpleNamespace(agent=types.SimpleNamespace(direction=jnp.int32(2)))
    got = np.asarray(onehot._observe(jnp.asarray(view, jnp.uint8), inner))
    cells = np.concatenate([np.eye(13)[view[..., 0]], np.eye(12)[view[..., 1]]], -1)
    want = np.concatenate([cells.reshape(-1), np.eye(4)[2]])
    np.testing.assert_array_equal(got, want)
    assert onehot.observation_space(None).shape == (v * v * 25 + 4,)
