"""Meta-DT's acting bookkeeping: return-to-go, the kept episode, z's window, resets."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from test_algos_meta_dt import TARGET, _config

from agentrl.agents.agent import Step

H = 6  # the test config's horizon
EPISODE_1 = [0.0, 1.0, 0.0, 1.0, 0.0, 0.0]  # return 2
EPISODE_2 = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]  # return 2 again: a tie


@functools.cache
def _agent():
    """The greedy Meta-DT agent of the test config (built once) and its update."""
    env, config = _config(**{"eval.acting": "greedy"})
    model = config.algo.build_model(config.model, nnx.Rngs(5))
    agent = config.algo.make_agent(model, env, 2 * H, config)
    return env, agent, jax.jit(agent.update)


def _feed(rewards, first_action=None):
    """The agent's states after start and after each step of 2 episodes."""
    env, agent, update = _agent()
    params = jax.vmap(env.params_for_task)(jnp.array([3, 12]))
    obs0 = jnp.array([12, 12], jnp.int32)  # a fresh episode's first observation
    state = agent.start(
        agent.init(jax.random.split(jax.random.key(40), 2), params), obs0
    )
    states = [state]
    for s, r in enumerate(rewards):
        action = s % 5 if s or first_action is None else first_action
        end = jnp.full((2,), s % H == H - 1)
        here = jnp.full((2,), 5 + s % H, jnp.int32)  # never obs0
        seen = jnp.where(end, obs0, here + 1)  # the next episode starts at obs0
        step = Step(
            here,
            jnp.full((2,), action, jnp.int32),
            jnp.full((2,), r, jnp.float32),
            here + 1,  # the true successor, also at the episode's end
            end & False,
            end,
            seen,
        )
        state = update(state, step)
        states.append(state)
    return states


@pytest.mark.long
def test_meta_dt_keeps_its_return_to_go_return_and_best_episode():
    states = _feed(EPISODE_1 + EPISODE_2)
    for k in range(H - 1):  # after step k of episode 1: at step k + 1
        paid = sum(EPISODE_1[: k + 1])
        s = states[k + 1]
        np.testing.assert_array_equal(s.t, k + 1)
        np.testing.assert_allclose(s.ret, paid)
        np.testing.assert_allclose(s.rtg[:, k + 1], TARGET - paid)
    first, last = states[H], states[2 * H]
    np.testing.assert_allclose(first.rtg[:, 0], TARGET)  # a new episode's
    np.testing.assert_array_equal(first.t, 0)
    # a new episode reads its own first observation, not the last one's successor
    np.testing.assert_array_equal(first.obs[:, 0], states[0].obs[:, 0])
    # the best episode: episode 1 (return 2, all H steps); the tie keeps it
    for s in (first, last):
        np.testing.assert_allclose(s.best_ret, 2.0)
        np.testing.assert_array_equal(s.best_len, H)
        np.testing.assert_allclose(s.best_reward, np.tile(EPISODE_1, (2, 1)))


def test_z_reads_the_transitions_just_before_its_step():
    a = _feed(EPISODE_1[:3])
    b = _feed(EPISODE_1[:3], first_action=3)  # only step 0's action differs
    # context horizon 2: z at step 2 reads steps 0 and 1, z at step 1 step 0
    assert not np.allclose(a[2].z[:, 2], b[2].z[:, 2])
    assert not np.allclose(a[1].z[:, 1], b[1].z[:, 1])
    np.testing.assert_array_equal(a[3].z[:, 3], b[3].z[:, 3])  # steps 1, 2 only


def test_scores_read_the_current_step_and_nothing_after_it():
    """Step t's scores read step t's observation and return-to-go (the slot
    the agent just wrote), never a later slot (stale: an earlier episode's)."""
    env, agent, _ = _agent()
    state = _feed(EPISODE_1[:3])[3]  # at step 3 of episode 1
    np.testing.assert_array_equal(state.t, 3)
    scores = jax.jit(agent.scores)

    def with_obs(slot, cell):
        other = agent._obs_f(jnp.full((2,), cell, jnp.int32))
        return state._replace(obs=state.obs.at[:, slot].set(other))

    base = np.asarray(scores(state, None, None, None))
    for slot, cell, counts in [(3, 0, True), (3, 24, True), (4, 0, False)]:
        moved = np.asarray(scores(with_obs(slot, cell), None, None, None))
        assert (np.abs(moved - base).max() > 1e-6) == counts, (slot, cell)
    target = state._replace(rtg=state.rtg.at[:, 3].add(5.0))
    assert np.abs(np.asarray(scores(target, None, None, None)) - base).max() > 1e-6
