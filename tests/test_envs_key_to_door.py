"""Dark Key-to-Door's layouts: the default's tasks and starts, and AD-ε's.

``layout="off_axis"`` is corl-team/ad-eps's distribution
(``key_to_door/utils/misc.py`` keeps the (key, door) pairs that differ in
both coordinates; ``key_to_door/envs/dark_key_to_door.py`` redraws a start
on the key). The default ``"any"`` must stay bit-identical to the code every
committed result was made on; its expected values are computed here from
the old formulas.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs
from agentrl.envs.key_to_door import KeyToDoorState


def _all_params(env):
    return jax.vmap(env.params_for_task)(jnp.arange(env.num_tasks))


def _pairs(params):
    """``{(kx, ky, dx, dy)}`` and the list they came from."""
    rows = np.concatenate([np.asarray(params.key), np.asarray(params.door)], 1)
    return {tuple(r) for r in rows.tolist()}, rows


def _brute_return(env, params, start):
    """The oracle's return from ``start [2]``, stepped out to the horizon."""
    state = KeyToDoorState(time=jnp.int32(0), pos=start, has_key=jnp.bool_(False))

    def body(carry, _):
        state, ret, over = carry
        action = env.optimal_action(state, params)
        _, state, reward, done, _ = env.step_env(None, state, action, params)
        ret = ret + jnp.where(over, 0.0, reward)
        return (state, ret, over | done), None

    init = (state, jnp.float32(0), jnp.bool_(False))
    (_, ret, _), _ = jax.lax.scan(body, init, None, length=env.horizon)
    return ret


@pytest.mark.parametrize("size,want", [(9, 5184), (5, 400), (2, 4)])
def test_off_axis_layout_counts_the_off_axis_pairs(size, want):
    env = envs.make("dark_key_to_door", size=size, layout="off_axis")
    assert env.num_tasks == want == size**2 * (size - 1) ** 2


@pytest.mark.parametrize("size", [9, 4])
def test_off_axis_task_ids_are_a_bijection_onto_the_off_axis_pairs(size):
    env = envs.make("dark_key_to_door", size=size, layout="off_axis")
    got, rows = _pairs(_all_params(env))
    cells = list(itertools.product(range(size), repeat=2))
    want = {
        (*k, *d)
        for k, d in itertools.product(cells, cells)
        if k[0] != d[0] and k[1] != d[1]
    }
    assert len(rows) == len(got) == env.num_tasks  # no duplicates
    assert got == want
    # ids run by key cell, then door cell (as the default's)
    key_id = rows[:, 1] * size + rows[:, 0]
    door_id = rows[:, 3] * size + rows[:, 2]
    order = key_id * size**2 + door_id
    assert np.all(np.diff(order) > 0)


def test_off_axis_starts_are_never_the_key_and_cover_every_other_cell():
    env = envs.make("dark_key_to_door", size=5, horizon=6, layout="off_axis")
    # keys on cells 0 (a corner), 7, 12 (the centre) and 24 (a corner)
    ids = jnp.array([0, 7 * 16 + 3, 12 * 16 + 5, 24 * 16 + 15])
    params = jax.vmap(env.params_for_task)(ids)
    keys = jax.random.split(jax.random.key(0), (len(ids), 12_000))
    reset = jax.jit(jax.vmap(jax.vmap(env.reset, (0, None))))
    obs, state = reset(keys, params)
    np.testing.assert_array_equal(obs, state.pos[..., 1] * 5 + state.pos[..., 0])
    for key, cells in zip(np.asarray(params.key), np.asarray(obs), strict=True):
        key_cell = key[1] * 5 + key[0]
        counts = np.bincount(cells, minlength=25)
        assert counts[key_cell] == 0
        others = np.delete(counts, key_cell)
        # uniform over the 24 others: 500 each, sd ~22
        assert others.min() > 400 and others.max() < 600, counts


def test_off_axis_resets_inside_step_avoid_the_key_too():
    env = envs.make("dark_key_to_door", size=3, horizon=2, layout="off_axis")
    params = env.params_for_task(jnp.int32(4 * 4 + 0))  # key at the centre
    assert np.asarray(params.key).tolist() == [1, 1]

    def body(state, key):
        obs, state, *_ = env.step(key, state, jnp.int32(4), params)  # no-op
        return state, obs

    _, state = env.reset(jax.random.key(1), params)
    _, obs = jax.lax.scan(body, state, jax.random.split(jax.random.key(2), 4000))
    counts = np.bincount(np.asarray(obs), minlength=9)
    assert counts[4] == 0 and np.all(np.delete(counts, 4) > 0)


@pytest.mark.parametrize(
    "size,horizon,layout", [(5, 6, "off_axis"), (4, 40, "off_axis"), (4, 5, "any")]
)
def test_optimal_return_is_the_oracles_mean_over_the_allowed_starts(
    size, horizon, layout
):
    env = envs.make("dark_key_to_door", size=size, horizon=horizon, layout=layout)
    params = _all_params(env)
    cells = jnp.arange(size * size)
    starts = jax.vmap(lambda c: jnp.stack([c % size, c // size]))(cells)
    per_start = jax.jit(
        jax.vmap(jax.vmap(lambda p, s: _brute_return(env, p, s), (None, 0)), (0, None))
    )(params, starts)  # [tasks, cells]
    key_cell = np.asarray(params.key[:, 1] * size + params.key[:, 0])
    allowed = np.ones(per_start.shape, bool)
    if layout == "off_axis":
        allowed[np.arange(env.num_tasks), key_cell] = False
    want = (np.asarray(per_start) * allowed).sum(1) / allowed.sum(1)
    got = np.asarray(jax.vmap(env.optimal_return)(params))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    if horizon < 2 * size:  # some starts run out of time: the exclusion matters
        assert len(np.unique(got)) > 2


def test_any_layout_keeps_the_old_task_ids_starts_and_oracle():
    """The default against the formulas of the code before ``layout``."""
    env = envs.make("dark_key_to_door", size=9, horizon=12)
    assert env.layout == "any" and env.num_tasks == 81 * 80
    params = _all_params(env)
    tid = np.arange(81 * 80)
    key_cell, rank = tid // 80, tid % 80
    door_cell = rank + (rank >= key_cell)
    np.testing.assert_array_equal(
        params.key, np.stack([key_cell % 9, key_cell // 9], 1)
    )
    np.testing.assert_array_equal(
        params.door, np.stack([door_cell % 9, door_cell // 9], 1)
    )
    assert params.key.dtype == params.door.dtype == jnp.int32
    # the start: one randint of both coordinates over all 81 cells
    data = jax.random.key_data(jax.random.split(jax.random.key(5), 64))
    p = env.params_for_task(jnp.int32(1234))
    _, state = jax.vmap(env.reset, (0, None))(jax.random.wrap_key_data(data), p)
    randint = jax.vmap(lambda k: jax.random.randint(k, (2,), 0, 9, dtype=jnp.int32))
    want = randint(jax.random.wrap_key_data(data))  # the same keys, drawn again
    np.testing.assert_array_equal(state.pos, want)
    # the oracle's mean over all 81 starts, the key's included (max(d, 1))
    xy = np.stack(np.meshgrid(np.arange(9), np.arange(9)), -1).reshape(-1, 2)
    key, door = np.asarray(params.key), np.asarray(params.door)
    t1 = np.maximum(np.abs(xy[None] - key[:, None]).sum(-1), 1)
    t2 = np.abs(key - door).sum(-1)[:, None]
    want = ((t1 <= 12).astype(int) + (t1 + t2 <= 12)).mean(1)
    assert len(np.unique(want)) > 50  # a horizon some starts run out of
    np.testing.assert_allclose(jax.vmap(env.optimal_return)(params), want, rtol=1e-6)


def test_layout_is_checked():
    with pytest.raises(
        ValueError, match=r"`layout` must be one of \('any', 'off_axis'\)"
    ):
        envs.make("dark_key_to_door", layout="ad-eps")
    with pytest.raises(ValueError, match="`start` must be 'random'"):
        envs.make("dark_key_to_door", layout="off_axis", start="center")
