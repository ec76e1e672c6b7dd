"""Acting rules (eval.acting): sample, greedy, sample until rewarded then greedy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl.evaluate.acting import SampleThenGreedy, acting_agent
from agentrl.sources.agent import Step
from agentrl.train.config import EvalConfig, upgrade_legacy_dict


class _Fake:
    """Greedy: action 1; sampling: action 0; state counts updates per row."""

    batched = True

    def __init__(self, greedy: bool):
        self.greedy = greedy

    def init(self, key, params):
        return jnp.zeros((key.shape[0],), jnp.int32)

    def act(self, key, state, obs, env_state, params):
        return jnp.full(state.shape, 1 if self.greedy else 0, jnp.int32)

    def update(self, state, step):
        return state + 1


def _step(reward):
    r = jnp.asarray(reward, jnp.float32)
    z = jnp.zeros(r.shape)
    return Step(z, z.astype(jnp.int32), r, z, z > 1, z > 1, z)


def test_sample_then_greedy_switches_per_task_on_first_positive_reward():
    agent = acting_agent(_Fake, "sample_then_greedy")
    assert isinstance(agent, SampleThenGreedy)
    keys = jax.random.split(jax.random.key(0), 3)
    state = agent.init(keys, None)
    act = lambda s: np.asarray(agent.act(keys[0], s, None, None, None))  # noqa: E731
    assert act(state).tolist() == [0, 0, 0]
    state = agent.update(state, _step([0.0, 1.0, -1.0]))
    assert act(state).tolist() == [0, 1, 0]  # a negative reward is no success
    state = agent.update(state, _step([0.0, 0.0, 0.5]))
    assert act(state).tolist() == [0, 1, 1]  # and it stays greedy once found
    state = agent.update(state, _step([0.0, 0.0, 0.0]))
    assert act(state).tolist() == [0, 1, 1]
    assert np.asarray(state.inner).tolist() == [3, 3, 3]  # one shared state
    assert acting_agent(_Fake, "greedy").greedy
    assert not acting_agent(_Fake, "sample").greedy
    with pytest.raises(ValueError, match="eval.acting must be one of"):
        acting_agent(_Fake, "argmax")


def test_eval_config_acting_field_and_legacy_greedy():
    assert EvalConfig(acting="greedy").greedy
    assert not EvalConfig(acting="sample_then_greedy").greedy
    with pytest.raises(ValueError, match="eval.acting must be one of"):
        EvalConfig(acting="argmax")
    old = {"name": "x", "eval": {"num_tasks": 4, "greedy": True}}
    assert upgrade_legacy_dict(old)["eval"] == {"num_tasks": 4, "acting": "greedy"}
    old["eval"]["greedy"] = False
    assert upgrade_legacy_dict(old)["eval"]["acting"] == "sample"
    assert old["eval"]["greedy"] is False  # the input is not modified


def test_ad_agent_samples_until_rewarded_then_repeats_the_argmax():
    """AD's make_agent with eval.acting on a model that favours the last
    rewarded arm (weakly: sampling often leaves it)."""
    import types

    from test_evaluate_fakes import RepeatRewardedAD

    from agentrl import envs
    from agentrl.algos import AD
    from agentrl.sources.agent import run_batched_agent

    env = envs.make("bernoulli_bandit", num_arms=5, horizon=40)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(1), 64))
    model = RepeatRewardedAD(5, strength=1.0)

    def actions(rule):
        config = types.SimpleNamespace(
            model=types.SimpleNamespace(max_steps=40), eval=EvalConfig(acting=rule)
        )
        agent = AD().make_agent(model, env, 40, config)
        run = jax.jit(lambda p, k: run_batched_agent(env, agent, p, k, 40)[0])
        h = run(params, jax.random.key(2))
        return np.asarray(h.action), np.asarray(h.reward)

    def repeats_after_first_reward(action, reward):
        """Share of steps after a row's first reward that repeat its last
        rewarded action (the model's argmax there)."""
        hits = total = 0
        for a, r in zip(action, reward, strict=True):
            best = None
            for t in range(len(a)):
                if best is not None:
                    hits, total = hits + (a[t] == best), total + 1
                if r[t] > 0:
                    best = a[t]
        return hits / total

    then_greedy = repeats_after_first_reward(*actions("sample_then_greedy"))
    sampled = repeats_after_first_reward(*actions("sample"))
    assert then_greedy == 1.0
    assert sampled < 0.6  # softmax(1 vs 0 over 5 arms) picks it ~40%
