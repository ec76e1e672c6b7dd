"""T2MIR's sorted episode buffer beyond two kept episodes, held to its rule."""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from model_factory import make_model
from test_models_transformer import small

from agentrl import envs
from agentrl.agents.agent import Step
from agentrl.agents.sorted_episodes import SortedEpisodesAgent, sorted_episodes_agent

H, KEEP, TASKS = 2, 3, 2
# each episode's two rewards: returns 1, 0, 2, 1, 2, 0, 1 (ties among them)
REWARDS = [(1, 0), (0, 0), (1, 1), (0, 1), (1, 1), (0, 0), (1, 0)]


@pytest.mark.long
def test_the_buffer_drops_the_lowest_and_keeps_the_rest_sorted():
    env = envs.make("darkroom", size=3, horizon=H)
    model = make_model(small(obs_size=9, action_size=5, max_steps=(KEEP + 1) * H), 5)
    agent = SortedEpisodesAgent(model, env, KEEP + 1)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(7), TASKS))
    obs = jnp.zeros((TASKS,), jnp.int32)
    state = agent.start(
        agent.init(jax.random.split(jax.random.key(8), TASKS), params), obs
    )
    update = jax.jit(agent.update)
    kept = []  # T2MIR's evaluate_latest buffer: append, drop the first, sort
    for e, rewards in enumerate(REWARDS):
        for t, r in enumerate(rewards):
            end = jnp.full((TASKS,), t == H - 1)
            action = jnp.full((TASKS,), e % 5, jnp.int32)  # tells episodes apart
            reward = jnp.full((TASKS,), r, jnp.float32)
            state = update(state, Step(obs, action, reward, obs, end & False, end, obs))
        kept.append(e)
        if len(kept) > KEEP:
            kept.pop(0)
        kept.sort(key=lambda k: sum(REWARDS[k]))  # stable: ties in the order kept
        n = int(state.kept)
        assert n == len(kept), e
        want_return = [sum(REWARDS[k]) for k in kept]
        want_action = [k % 5 for k in kept]
        for row in range(TASKS):
            np.testing.assert_array_equal(state.kept_return[row, :n], want_return)
            np.testing.assert_array_equal(state.kept_action[row, :n, 0], want_action)
            np.testing.assert_array_equal(
                state.kept_reward[row, :n], [REWARDS[k] for k in kept]
            )


def test_the_factory_keeps_one_episode_fewer_than_the_context_holds():
    env = envs.make("darkroom", size=3, horizon=H)
    model = make_model(small(obs_size=9, action_size=5, max_steps=4 * H), 6)
    config = SimpleNamespace(eval=SimpleNamespace(acting="greedy", temperature=1.0))
    agent = sorted_episodes_agent(model, env, config, 4)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(9), TASKS))
    state = agent.init(jax.random.split(jax.random.key(10), TASKS), params)
    # the context: 3 best past episodes plus the current one, at most 4 * H steps
    assert agent.greedy and state.kept_obs.shape[:3] == (TASKS, 3, H)
    assert state.cache.slot_pos.shape[-1] == 4 * H
