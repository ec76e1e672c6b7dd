"""Dark Key-to-Door's rewards and observations step by step, by hand."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from test_envs_darkroom_gaps import walk

from agentrl import envs
from agentrl.envs.grid import DOWN, LEFT, NOOP, RIGHT, UP
from agentrl.envs.key_to_door import KeyToDoorState


def _task(env, key_cell, door_cell):
    """Params of the ``layout="any"`` task with these key and door cells."""
    rank = door_cell - (door_cell > key_cell)
    return env.params_for_task(jnp.int32(key_cell * (env.size**2 - 1) + rank))


def _walk(env, params, pos, actions):
    """:func:`walk` from ``pos`` without the key."""
    state = KeyToDoorState(
        time=jnp.int32(0), pos=jnp.array(pos, jnp.int32), has_key=jnp.bool_(False)
    )
    return walk(env, params, state, actions)


def test_the_key_pays_once_even_when_the_agent_comes_back():
    env = envs.make("dark_key_to_door", size=4, horizon=20, start="center")
    params = _task(env, key_cell=1, door_cell=15)  # key (1, 0), door (3, 3)
    out = _walk(env, params, [0, 0], [RIGHT, LEFT, RIGHT, NOOP, LEFT, RIGHT])
    assert [r for _, r, _ in out] == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert not any(t for _, _, t in out)


def test_the_door_without_the_key_neither_pays_nor_ends_the_episode():
    env = envs.make("dark_key_to_door", size=4, horizon=20, start="center")
    params = _task(env, key_cell=15, door_cell=1)  # key (3, 3), door (1, 0)
    out = _walk(env, params, [0, 0], [RIGHT, NOOP, RIGHT])
    assert out == [(1, 0.0, False), (1, 0.0, False), (2, 0.0, False)]
    # with the key the same door pays 1 and ends the episode
    path = [RIGHT, RIGHT, RIGHT, DOWN, DOWN, DOWN, UP, UP, UP, LEFT, LEFT]
    out = _walk(env, params, [0, 0], path)
    assert [r for _, r, _ in out] == [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    assert [t for _, _, t in out] == [False] * 10 + [True]


def test_the_markov_form_adds_the_cell_count_once_the_key_is_held():
    env = envs.make(
        "dark_key_to_door", size=3, horizon=10, start="corner", observe_key=True
    )
    params = _task(env, key_cell=1, door_cell=8)  # key (1, 0), door (2, 2)
    out = _walk(env, params, [0, 0], [DOWN, UP, RIGHT, RIGHT, DOWN])
    # (0, 1) (0, 0) without the key; (1, 0) (2, 0) (2, 1) with it: + 9
    assert [o for o, _, _ in out] == [3, 0, 1 + 9, 2 + 9, 5 + 9]
    assert env.observation_space().n == 18
    hidden = envs.make("dark_key_to_door", size=3, horizon=10, start="corner")
    out = _walk(hidden, params, [0, 0], [RIGHT, RIGHT])
    assert [o for o, _, _ in out] == [1, 2]  # the reference form: the cell alone


def test_random_starts_cover_the_whole_grid():
    env = envs.make("dark_key_to_door", size=3, horizon=10)
    params = _task(env, key_cell=0, door_cell=8)
    keys = jax.random.split(jax.random.key(21), 900)
    obs, state = jax.vmap(env.reset, (0, None))(keys, params)
    counts = np.bincount(np.asarray(obs), minlength=9)
    assert counts.min() > 60  # every cell, the key's included: ~100 each
    assert not np.asarray(state.has_key).any()
