"""Cached DPT decoding on bandits equals the uncached agent, and where it applies."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from model_factory import make_model
from test_evaluate_fakes import EmpiricalMeanDPT

from agentrl import envs
from agentrl.algos import DPT
from agentrl.evaluate import run_model_online
from agentrl.evaluate.driver import dpt_cache_applies, make_model_agent
from agentrl.evaluate.model_agents import DPTCachedModelAgent, DPTModelAgent
from agentrl.models import ModelConfig
from agentrl.train.config import complete_model_config

HORIZON = 24


def _bandit_and_model():
    env = envs.make("gaussian_bandit", num_arms=4, horizon=HORIZON)
    cfg = ModelConfig(
        num_layers=2,
        num_heads=2,
        d_model=16,
        d_ff=32,
        max_steps=HORIZON + 1,
        token_layout="transition",
    )
    return env, make_model(
        complete_model_config(cfg, env, DPT(context_size=HORIZON)), seed=3
    )


@pytest.mark.parametrize("greedy", [False, True])
def test_cached_dpt_bandit_equals_recomputing_the_context(greedy):
    env, model = _bandit_and_model()
    key = jax.random.key(4)
    params = jax.vmap(env.sample_params)(jax.random.split(key, 8))
    runs = [
        run_model_online(env, model, params, key, 1, greedy=greedy, dpt_cache=c)
        for c in (False, True)
    ]
    (plain, plain_state), (cached, cached_state) = runs
    assert isinstance(cached_state.logits, jax.Array)  # the cached agent ran
    assert not hasattr(plain_state, "logits")
    np.testing.assert_array_equal(cached.action, plain.action)
    np.testing.assert_array_equal(cached.reward, plain.reward)
    # sampled pulls vary, so the cache sees a context of different arms
    assert greedy or len(np.unique(np.asarray(plain.action))) > 1


def test_cache_is_chosen_only_where_it_equals_the_uncached_agent():
    env, model = _bandit_and_model()
    room = envs.make("darkroom", size=5, horizon=6)
    assert dpt_cache_applies(model, env, HORIZON, HORIZON, "step")
    assert not dpt_cache_applies(model, env, HORIZON + 1, HORIZON, "step")  # overflow
    assert not dpt_cache_applies(model, room, 6, 12, "step")  # the query moves
    assert not dpt_cache_applies(EmpiricalMeanDPT(4), env, HORIZON, HORIZON, "step")
    agent = make_model_agent(model, env, HORIZON, protocol="query")
    assert isinstance(agent, DPTCachedModelAgent)
    agent = make_model_agent(model, env, HORIZON, protocol="query", dpt_cache=False)
    assert isinstance(agent, DPTModelAgent)
    with pytest.raises(ValueError, match="num_steps"):
        make_model_agent(model, env, 2 * HORIZON, protocol="query", dpt_cache=True)
