"""DPT's uniform roll-in, small and fast: each transition against the grid's rules."""

import jax
import jax.numpy as jnp
import numpy as np

from agentrl import envs
from agentrl.envs import grid
from agentrl.sources import generate
from agentrl.sources.rollin import uniform_rollin

SIZE, HORIZON = 3, 4
ROOM = envs.make("darkroom", size=SIZE, horizon=HORIZON)


def test_each_transition_is_a_step_from_its_own_state():
    """``next_obs`` is where ``action`` leads from ``obs``, the reward is 1
    there on the goal, the label the oracle's at ``obs``; episodes of
    ``horizon`` steps are cut (never terminated) and numbered."""
    ids = jnp.array([0, 5])
    params = jax.vmap(ROOM.params_for_task)(ids)
    h = uniform_rollin(ROOM, params, jax.random.key(0), 3 * HORIZON, ids)
    obs, nxt = np.asarray(h.obs), np.asarray(h.next_obs)
    action = np.asarray(h.action)
    for task in range(2):
        goal = grid.cell_pos(ids[task], SIZE)
        for t in range(3 * HORIZON):
            pos = grid.cell_pos(obs[task, t], SIZE)
            moved = grid.move(pos, action[task, t], SIZE)
            assert int(grid.cell_id(moved, SIZE)) == nxt[task, t]
            assert float(h.reward[task, t]) == float((moved == goal).all())
            assert int(h.optimal_action[task, t]) == int(grid.steer(pos, goal))
    step = np.arange(3 * HORIZON)
    np.testing.assert_array_equal(h.truncated, np.tile(step % HORIZON == 3, (2, 1)))
    np.testing.assert_array_equal(h.episode, np.tile(step // HORIZON, (2, 1)))
    assert not np.asarray(h.terminated).any()
    np.testing.assert_array_equal(h.task_id, ids)
    # every task draws its own transitions
    assert (obs[0] != obs[1]).any() or (action[0] != action[1]).any()


def test_the_registry_runs_the_rollin_with_its_key():
    ids = jnp.array([1, 2])
    params = jax.vmap(ROOM.params_for_task)(ids)
    key, other = jax.random.split(jax.random.key(1))
    same = jax.random.clone(key)  # the same key, for the same computation
    got = generate("dpt_rollin", ROOM, params, key, 2, ids, rollin="uniform")
    want = uniform_rollin(ROOM, params, same, 2 * HORIZON, ids)
    for field in ("obs", "action", "next_obs"):
        np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
    moved = generate("dpt_rollin", ROOM, params, other, 2, ids, rollin="uniform")
    assert (np.asarray(moved.obs) != np.asarray(got.obs)).any()


def test_no_key_is_used_twice():
    """Each draw (state, action, step) has its own key: JAX's key-reuse
    checker passes the whole roll-in."""
    ids = jnp.array([3, 4])
    params = jax.vmap(ROOM.params_for_task)(ids)
    with jax.debug_key_reuse(True):
        h = uniform_rollin(ROOM, params, jax.random.key(2), HORIZON + 1, ids)
    assert h.obs.shape == (2, HORIZON + 1)
