"""The one agent driver: every entry point gives the same history for a key."""

import jax
import numpy as np
import pytest

from agentrl import envs, evaluate, sources
from agentrl.agents.agent import (
    RandomAgent,
    as_batched,
    run_agent,
    run_agent_on_tasks,
    run_batched_agent,
)
from agentrl.sources.registry import make_agent

ROOM = envs.make("darkroom", size=5, horizon=6)
IDS = np.arange(7)
PARAMS = jax.vmap(ROOM.params_for_task)(IDS)


def _equal(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.long
def test_one_task_is_a_row_of_many():
    agent = make_agent("q_learning", ROOM, 4)
    key = jax.random.key(0)
    replay = jax.random.clone(key)  # re-derives the per-task keys
    many, states = run_agent_on_tasks(ROOM, agent, PARAMS, key, 24, IDS)
    keys = jax.random.split(replay, len(IDS))
    for i in (0, 5):
        task = jax.tree.map(lambda x, i=i: x[i], PARAMS)
        one, state = run_agent(ROOM, agent, task, keys[i], 24, IDS[i])
        _equal(one, jax.tree.map(lambda x, i=i: x[i], many))
        _equal(state, jax.tree.map(lambda x, i=i: x[i], states))
    assert many.obs.shape == (7, 24) and one.obs.shape == (24,)


@pytest.mark.long
def test_blocks_and_batching_do_not_change_histories():
    agent = make_agent("noisy_oracle", ROOM, 4)
    key = jax.random.key(1)
    same = [jax.random.clone(key) for _ in range(2)]  # three runs of one key
    whole = run_agent_on_tasks(ROOM, agent, PARAMS, key, 24, IDS)
    blocked = run_agent_on_tasks(ROOM, agent, PARAMS, same[0], 24, IDS, block_size=3)
    batched = run_batched_agent(ROOM, as_batched(agent), PARAMS, same[1], 24, IDS)
    _equal(whole, blocked)  # histories and final agent states
    _equal(whole, batched)
    assert as_batched(as_batched(agent)) == as_batched(agent)


def test_one_random_agent():
    assert evaluate.RandomAgent is sources.RandomAgent is RandomAgent
    assert make_agent("random", ROOM, 1) == RandomAgent(ROOM)


def test_collect_context_takes_per_task_and_batched_agents():
    key = jax.random.key(2)
    same = [jax.random.clone(key) for _ in range(2)]  # three runs of one key
    ctx = evaluate.collect_context(ROOM, RandomAgent(ROOM), PARAMS, key, 12)
    again = evaluate.collect_context(
        ROOM, as_batched(RandomAgent(ROOM)), PARAMS, same[0], 12
    )
    _equal(ctx, again)
    history, _ = run_agent_on_tasks(ROOM, RandomAgent(ROOM), PARAMS, same[1], 12)
    np.testing.assert_array_equal(ctx.obs, history.obs)
    np.testing.assert_array_equal(ctx.action, history.action)
    np.testing.assert_array_equal(ctx.count, 12)


class _SharedCounter:
    """A batched agent whose state has a per-task leaf ``[task]`` (its actions
    summed) and a shared one ``[]`` (steps taken), as a KV cache's position."""

    batched = True

    def __init__(self, env):
        self.inner = as_batched(RandomAgent(env))

    def init(self, key, params):
        return (jax.numpy.zeros(key.shape[:1], jax.numpy.int32), jax.numpy.int32(0))

    def act(self, key, state, obs, env_state, params):
        return self.inner.act(key, (), obs, env_state, params)

    def update(self, state, step):
        return state[0] + step.action, state[1] + 1


@pytest.mark.long
def test_blocks_take_batched_agents_with_shared_state_leaves():
    agent = _SharedCounter(ROOM)
    key = jax.random.key(3)
    same = [jax.random.clone(key) for _ in range(3)]  # one run per block size
    whole, (total, count) = run_agent_on_tasks(ROOM, agent, PARAMS, key, 10, IDS)
    for size, again in zip((3, 7, 2), same, strict=True):
        # with a remainder block (7 = 3 + 3 + 1), none, one
        history, (b_total, b_count) = run_agent_on_tasks(
            ROOM, agent, PARAMS, again, 10, IDS, block_size=size
        )
        _equal(history, whole)
        np.testing.assert_array_equal(b_total, total)  # per task: [task]
        blocks = -(-len(IDS) // size)  # shared: one per block, [num_blocks]
        np.testing.assert_array_equal(b_count, np.full(blocks, 10))
    np.testing.assert_array_equal(total, whole.action.sum(1))
    assert int(count) == 10
