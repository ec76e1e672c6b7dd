"""Online evaluation of agents and AD-contract models with the shared driver."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from test_evaluate_fakes import RepeatRewardedAD

from agentrl import envs
from agentrl.evaluate import (
    ADModelAgent,
    OracleAgent,
    RandomAgent,
    evaluate_methods,
    evaluate_online,
    per_task,
    run_batched_agent,
)
from agentrl.sources import run_agent_on_tasks

TASKS, EPISODES, HORIZON = 48, 2, 50


@pytest.fixture(scope="module")
def bandit_results():
    env = envs.make("bernoulli_bandit", num_arms=5, horizon=HORIZON)
    key = jax.random.key(0)
    params = jax.vmap(env.sample_params)(jax.random.split(key, TASKS))
    methods = {
        "repeat": RepeatRewardedAD(5),
        "random": RandomAgent(env),
        "oracle": OracleAgent(env),
    }
    return evaluate_methods(env, methods, params, key, EPISODES)


@pytest.mark.long
def test_shapes_and_metadata(bandit_results):
    for name, res in bandit_results.items():
        assert res.name == name
        assert res.returns.shape == (TASKS, EPISODES)
        assert res.normalized.shape == (TASKS, EPISODES)
        assert res.regret.shape == (TASKS, EPISODES * HORIZON)
        assert res.random_return.shape == res.oracle_return.shape == (TASKS,)
        assert res.metadata["incomplete_tasks"] == 0
    assert bandit_results["random"].metadata["kind"] == "agent"
    assert bandit_results["repeat"].metadata["kind"] == "decode"
    # Same tasks and references for every method.
    np.testing.assert_array_equal(
        bandit_results["repeat"].oracle_return, bandit_results["random"].oracle_return
    )


@pytest.mark.long
def test_random_scores_zero_oracle_one_and_oracle_has_no_regret(bandit_results):
    oracle, random = bandit_results["oracle"], bandit_results["random"]
    np.testing.assert_array_equal(oracle.regret, 0.0)
    assert abs(np.mean(oracle.normalized) - 1.0) < 0.1
    assert abs(np.mean(random.normalized)) < 0.1
    # Random's expected regret grows linearly: half the steps, half the regret.
    curve = random.regret.mean(0)
    assert curve[HORIZON - 1] == pytest.approx(curve[-1] / 2, rel=0.1)


def test_repeat_rewarded_model_beats_random(bandit_results):
    model, random = bandit_results["repeat"], bandit_results["random"]
    assert model.returns.mean() > random.returns.mean() + 3.0
    assert model.regret[:, -1].mean() < 0.8 * random.regret[:, -1].mean()
    assert np.mean(model.normalized) > 0.2


@pytest.mark.long
def test_batched_driver_equals_per_task_driver_on_darkroom():
    env = envs.make("darkroom", size=5, horizon=10)
    params = jax.vmap(env.params_for_task)(np.arange(0, 25, 4))
    key = jax.random.key(3)
    steps = 3 * env.horizon
    agent = ADModelAgent(RepeatRewardedAD(env.num_actions), env, cache_steps=steps)
    batched = jax.jit(lambda p, k: run_batched_agent(env, agent, p, k, steps))
    wrapped = per_task(agent)
    single = jax.jit(lambda p, k: run_agent_on_tasks(env, wrapped, p, k, steps))
    h1, s1 = batched(params, jax.random.clone(key))
    h2, s2 = single(params, jax.random.clone(key))
    for field in ("obs", "action", "reward", "terminated", "truncated", "episode"):
        np.testing.assert_array_equal(getattr(h1, field), getattr(h2, field))
    np.testing.assert_array_equal(h1.optimal_action, h2.optimal_action)
    # One decode per step plus the first token; per-task caches have batch 1.
    np.testing.assert_array_equal(s1.cache["length"], steps + 1)
    assert s2.cache["length"].shape == (len(params.goal), 1)
    np.testing.assert_array_equal(s2.cache["length"], steps + 1)
    # prev action/reward carry across episode boundaries (last step's values).
    np.testing.assert_array_equal(s1.prev_action, h1.action[:, -1])
    np.testing.assert_array_equal(s1.prev_reward, h1.reward[:, -1])
    assert h1.episode[0, -1] == 2


def test_bad_inputs_fail_before_compiling():
    env = envs.make("bernoulli_bandit")
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 2))
    with pytest.raises(ValueError, match="neither an agent"):
        evaluate_online(env, object(), params, jax.random.key(0), 1)
    with pytest.raises(ValueError, match="num_episodes"):
        evaluate_online(env, RandomAgent(env), params, jax.random.key(0), 0)
    with pytest.raises(ValueError, match="batched agent"):
        run_batched_agent(env, RandomAgent(env), params, jax.random.key(0), 3)
    with pytest.raises(ValueError, match="batched agent"):
        per_task(RandomAgent(env))
    with pytest.raises(ValueError, match="has no oracle"):
        OracleAgent(object())
