"""The driver's key tree, task blocks, recorded contexts and offline defaults."""

import jax
import jax.numpy as jnp
import numpy as np
from test_evaluate_fakes import EmpiricalMeanDPT, arm_two_paid_once

from agentrl import envs
from agentrl.agents.agent import (
    RandomAgent,
    as_batched,
    run_agent,
    run_agent_on_tasks,
    run_batched_agent,
)
from agentrl.agents.driver import (
    collect_context,
    run_batched_in_blocks,
    run_model_online,
)

TASKS = 4


def _bandit(seed, arms=3, horizon=6):
    env = envs.make("bernoulli_bandit", num_arms=arms, horizon=horizon)
    keys = jax.random.split(jax.random.key(seed), TASKS)
    return env, jax.vmap(env.sample_params)(keys)


def test_task_i_runs_on_the_ith_split_key():
    env, params = _bandit(30)
    key = jax.random.key(31)
    history, _ = run_agent_on_tasks(env, RandomAgent(env), params, key, 8)
    for i, k in enumerate(jax.random.split(jax.random.key(31), TASKS)):
        one, _ = run_agent(
            env, RandomAgent(env), jax.tree.map(lambda x: x[i], params), k, 8
        )
        np.testing.assert_array_equal(history.action[i], one.action)


def test_blocks_of_tasks_give_the_history_of_all_tasks_at_once():
    env, params = _bandit(32)
    agent = as_batched(RandomAgent(env))
    key = jax.random.key(33)
    whole, _ = run_batched_agent(env, agent, params, jax.random.clone(key), 8)
    blocks, _ = run_batched_in_blocks(env, agent, params, jax.random.clone(key), 8, 2)
    np.testing.assert_array_equal(blocks.action, whole.action)
    np.testing.assert_array_equal(blocks.reward, whole.reward)


class _Right:
    """Moves right every step (Dark Room action 3)."""

    def init(self, key, params):
        return ()

    def act(self, key, state, obs, env_state, params):
        return jnp.int32(3)

    def update(self, state, step):
        return state


def test_a_recorded_context_holds_the_true_successor_at_an_episode_end():
    env = envs.make("darkroom", size=5, horizon=2)  # episodes end truncated
    params = jax.vmap(env.params_for_task)(jnp.arange(2))
    ctx = collect_context(env, _Right(), params, jax.random.key(34), 4)
    obs, next_obs = np.asarray(ctx.obs), np.asarray(ctx.next_obs)
    assert (obs[:, 0] % 5 <= 2).all()  # two moves right stay on the grid
    # every step moves one cell right, the last of an episode too (its true
    # final observation, not the next episode's start)
    np.testing.assert_array_equal(next_obs, obs + 1)
    np.testing.assert_array_equal(obs[:, 2], obs[:, 0])  # a new episode


def test_a_given_context_is_kept_fixed_by_default():
    env, params = _bandit(35, horizon=5)
    params, ctx = arm_two_paid_once(env, params, jax.random.key(36), TASKS)
    history, _ = run_model_online(
        env,
        EmpiricalMeanDPT(3),
        params,
        jax.random.key(37),
        2,
        greedy=True,
        context=ctx,
    )
    # the context's best arm every pull: never its own unpaid pulls
    np.testing.assert_array_equal(history.action, 2)
