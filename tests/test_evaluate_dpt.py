"""DPT evaluation: the context buffer, online on a bandit, episode-wise context
on Dark Room, and offline from a fixed context (fake DPT-contract model)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_evaluate_fakes import EmpiricalMeanDPT

from agentrl import envs
from agentrl.agents.context_set import commit
from agentrl.evaluate import (
    Context,
    RandomAgent,
    collect_context,
    evaluate_offline_dpt,
    evaluate_online,
    reference_returns,
    run_model_online,
)


def _ctx(values, count, size):
    """A context with ``obs = reward = values`` padded to ``size``, one row."""
    v = jnp.zeros((1, size)).at[0, : len(values)].set(jnp.asarray(values, float))
    return Context(v, v.astype(jnp.int32), v, v, jnp.array([count], jnp.int32))


def test_commit_appends_then_rolls():
    ctx = _ctx([1, 2], 2, 4)
    out = commit(ctx, _ctx([3], 1, 1))
    np.testing.assert_array_equal(out.reward[0, :3], [1, 2, 3])
    assert int(out.count[0]) == 3
    out = commit(out, _ctx([4, 5, 6], 3, 3))  # overflow: keep the last 4
    np.testing.assert_array_equal(out.reward[0], [3, 4, 5, 6])
    np.testing.assert_array_equal(out.action[0], [3, 4, 5, 6])
    assert int(out.count[0]) == 4
    out = commit(out, _ctx([9], 0, 2))  # nothing new: unchanged
    np.testing.assert_array_equal(out.reward[0], [3, 4, 5, 6])


@pytest.mark.long
def test_dpt_online_on_bandit_beats_random():
    env = envs.make("bernoulli_bandit", num_arms=5, horizon=100)
    key = jax.random.key(1)
    params = jax.vmap(env.sample_params)(jax.random.split(key, 32))
    res = evaluate_online(
        env, EmpiricalMeanDPT(5), params, jax.random.clone(key), 1, name="dpt"
    )
    assert res.metadata["kind"] == "query"  # the DPT-style protocol
    random_regret = 100 * (params.means.max(-1) - params.means.mean(-1))
    assert res.regret[:, -1].mean() < 0.5 * float(random_regret.mean())
    assert np.nanmean(res.normalized) > 0.5


def test_dpt_episode_context_holds_previous_episodes_on_darkroom():
    env = envs.make("darkroom", size=5, horizon=6)
    params = jax.vmap(env.params_for_task)(jnp.array([0, 7, 24]))
    history, state = run_model_online(
        env,
        EmpiricalMeanDPT(env.num_actions),
        params,
        jax.random.key(0),
        num_episodes=3,
        context_size=2 * env.horizon,
        context_update="episode",
    )
    assert history.reward.shape == (3, 18)
    ctx = state.context
    # After 3 episodes the context is the last 2 whole episodes, in order.
    np.testing.assert_array_equal(ctx.count, 12)
    np.testing.assert_array_equal(ctx.obs, history.obs[:, 6:])
    np.testing.assert_array_equal(ctx.action, history.action[:, 6:])
    np.testing.assert_array_equal(ctx.reward, history.reward[:, 6:])
    # next_obs is the successor inside an episode and the final observation
    # (not the next episode's reset observation) at its end.
    inside = np.r_[0:5, 6:11]
    np.testing.assert_array_equal(
        ctx.next_obs[:, inside], history.obs[:, 7:][:, inside]
    )
    start = int(env.reset(jax.random.key(0), env.default_params)[0])
    assert np.all(history.obs[:, 12] == start)
    assert np.any(ctx.next_obs[:, 5] != start)
    np.testing.assert_array_equal(state.pending.count, 0)


@pytest.mark.long
def test_offline_dpt_from_random_context():
    env = envs.make("bernoulli_bandit", num_arms=5, horizon=20)
    key = jax.random.key(2)
    params = jax.vmap(env.sample_params)(jax.random.split(key, 32))
    context = collect_context(env, RandomAgent(env), params, jax.random.clone(key), 100)
    assert context.reward.shape == (32, 100) and context.action.shape == (32, 100)
    np.testing.assert_array_equal(context.count, 100)
    refs = reference_returns(env, params, jax.random.clone(key))
    res = evaluate_offline_dpt(
        env,
        EmpiricalMeanDPT(5),
        params,
        context,
        jax.random.clone(key),
        references=refs,
    )
    assert res.returns.shape == (32, 1)
    # Greedy on 20 pulls per arm: the chosen arm is near-best on most tasks.
    assert np.nanmean(res.normalized) > 0.6
    # Greedy from a fixed context pulls one arm for the whole episode.
    assert res.regret[:, -1] == pytest.approx(20 * res.regret[:, 0], rel=1e-5)
