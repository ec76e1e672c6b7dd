"""Online evaluation held to its docstrings: shared keys, references, score, counts."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_evaluate_fakes import EmpiricalMeanDPT, arm_two_paid_once

from agentrl import envs
from agentrl.agents.context_set import empty_context
from agentrl.evaluate import (
    OracleAgent,
    RandomAgent,
    evaluate_methods,
    evaluate_offline_dpt,
    evaluate_online,
    reference_returns,
)
from agentrl.sources import run_agent_on_tasks

TASKS, HORIZON = 6, 5


def _bandit_tasks(seed):
    env = envs.make("bernoulli_bandit", num_arms=3, horizon=HORIZON)
    keys = jax.random.split(jax.random.key(seed), TASKS)
    return env, jax.vmap(env.sample_params)(keys)


def test_every_method_evaluated_together_gets_the_same_key():
    env, params = _bandit_tasks(0)
    key = jax.random.key(1)
    methods = {"a": RandomAgent(env), "b": RandomAgent(env)}
    results = evaluate_methods(env, methods, params, key, 3)
    alone = evaluate_online(env, RandomAgent(env), params, jax.random.key(1), 3)
    # common random numbers: the same agent on the same key acts the same
    np.testing.assert_array_equal(results["a"].returns, results["b"].returns)
    np.testing.assert_array_equal(results["a"].returns, alone.returns)


def test_bandit_normalized_score_is_random_zero_oracle_one():
    env, params = _bandit_tasks(2)
    results = evaluate_methods(
        env,
        {"oracle": OracleAgent(env), "random": RandomAgent(env)},
        params,
        jax.random.key(3),
        2,
    )
    means = np.asarray(params.means, np.float64)  # [task, arm]
    random = HORIZON * means.mean(-1)  # a uniform pull's expected reward
    oracle = HORIZON * means.max(-1)  # the best arm every pull
    for r in results.values():
        np.testing.assert_allclose(r.random_return, random, rtol=1e-5)
        np.testing.assert_allclose(r.oracle_return, oracle, rtol=1e-5)
        want = (r.returns - random[:, None]) / (oracle - random)[:, None]
        np.testing.assert_allclose(r.normalized, want, rtol=1e-4, atol=1e-5)


def test_a_fixed_horizon_trial_completes_every_episode():
    env = envs.make("darkroom", size=3, horizon=4)
    params = jax.vmap(env.params_for_task)(np.arange(3, dtype=np.int32))
    r = evaluate_online(env, RandomAgent(env), params, jax.random.key(4), 3)
    assert r.metadata["num_steps"] == 3 * 4
    assert r.metadata["incomplete_tasks"] == 0


def test_the_random_reference_is_the_mean_random_episode_return():
    env = envs.make("darkroom", size=3, horizon=4)
    params = jax.vmap(env.params_for_task)(np.arange(9, dtype=np.int32))
    random, oracle = reference_returns(env, params, jax.random.key(5), 64)
    # an independent estimate: many more random episodes on other keys
    many = 2000
    history, _ = run_agent_on_tasks(
        env, RandomAgent(env), params, jax.random.key(6), many * 4
    )
    mean = np.asarray(history.episode_returns(many)).mean(-1)
    # sd of a 64-episode mean of returns in [0, 4] is at most 0.25
    np.testing.assert_allclose(random, mean, atol=0.8)
    assert random.mean() == pytest.approx(mean.mean(), abs=0.3)
    assert (random <= oracle).all()


def test_a_method_alone_gets_the_references_it_gets_among_others():
    env = envs.make("darkroom", size=3, horizon=4)
    params = jax.vmap(env.params_for_task)(np.arange(4, dtype=np.int32))
    alone = evaluate_online(env, RandomAgent(env), params, jax.random.key(7), 32)
    together = evaluate_methods(
        env, {"random": RandomAgent(env)}, params, jax.random.key(7), 32
    )["random"]
    np.testing.assert_array_equal(alone.returns, together.returns)
    np.testing.assert_array_equal(alone.random_return, together.random_return)
    # the reference's random episodes are not the random method's own
    assert not np.allclose(alone.random_return, alone.returns.mean(-1))


def test_offline_dpt_acts_from_its_fixed_context_only():
    env, params = _bandit_tasks(8)
    params, context = arm_two_paid_once(env, params, jax.random.key(10), TASKS)
    r = evaluate_offline_dpt(
        env, EmpiricalMeanDPT(3), params, context, jax.random.key(9), 2
    )
    # greedy on the context's empirical means: arm 2 on every pull, paying 0
    np.testing.assert_array_equal(r.returns, 0.0)
    np.testing.assert_allclose(
        r.regret[:, -1], 2 * HORIZON * params.means.max(-1), rtol=1e-5
    )


def test_offline_dpt_samples_when_not_greedy():
    env, params = _bandit_tasks(12)
    params = params.replace(means=jnp.tile(jnp.array([1.0, 0.0, 0.0]), (TASKS, 1)))
    context = empty_context(env, jax.random.split(jax.random.key(13), TASKS), params, 2)
    flat = EmpiricalMeanDPT(3, strength=0.0)  # equal scores for every arm
    kw = dict(num_episodes=2, references=(np.zeros(TASKS), np.ones(TASKS)))
    greedy = evaluate_offline_dpt(env, flat, params, context, jax.random.key(14), **kw)
    sampled = evaluate_offline_dpt(
        env, flat, params, context, jax.random.key(15), greedy=False, **kw
    )
    # greedy breaks the tie to arm 0 (the paying one); uniform draws pay a third
    np.testing.assert_array_equal(greedy.returns, HORIZON)
    assert sampled.returns.mean() < 0.6 * HORIZON


def test_the_reference_key_is_no_tasks_key():
    # Task i of a method runs on split(key, n)[i], which is fold_in(key, i)
    # (the premise of reference_key's salt); the random baseline's key must
    # be none of them, or its episodes would replay a task's own draws.
    from agentrl.evaluate.evaluate import reference_key

    key = jax.random.key(7)
    data, clone = jax.random.key_data, jax.random.clone  # one key, read 3 ways
    tasks = np.asarray(data(jax.random.split(clone(key), 4096)))
    np.testing.assert_array_equal(tasks[3], data(jax.random.fold_in(clone(key), 3)))
    ref = np.asarray(data(reference_key(key)))
    assert not (tasks == ref).all(-1).any()
