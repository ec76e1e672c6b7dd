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
