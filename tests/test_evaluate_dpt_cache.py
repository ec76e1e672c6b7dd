"""Cached DPT decoding on bandits equals the uncached agent, and where it applies."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest
from model_factory import make_model
from test_evaluate_fakes import EmpiricalMeanDPT

from agentrl import envs
from agentrl.agents.context_set import DPTCachedModelAgent, DPTModelAgent
from agentrl.agents.driver import dpt_cache_applies, make_model_agent
from agentrl.algos import DPT
from agentrl.evaluate import run_model_online
from agentrl.models import ModelConfig
from agentrl.models.config import complete_model_config

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


@pytest.mark.long
@pytest.mark.parametrize("greedy", [pytest.param(False, marks=pytest.mark.long), True])
def test_cached_dpt_bandit_equals_recomputing_the_context(greedy):
    env, model = _bandit_and_model()
    key = jax.random.key(4)
    params = jax.vmap(env.sample_params)(jax.random.split(key, 8))
    runs = [
        run_model_online(
            env, model, params, jax.random.clone(key), 1, greedy=greedy, dpt_cache=c
        )
        for c in (False, True)
    ]
    (plain, plain_state), (cached, cached_state) = runs
    assert isinstance(cached_state.scores, jax.Array)  # the cached agent ran
    assert not hasattr(plain_state, "scores")
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


@pytest.mark.long
def test_cached_dpt_agent_in_the_driver_copies_no_cache():
    """Zero whole-cache copies per pull in the compiled evaluation loop."""
    from flax import nnx
    from hlo_tools import (
        cache_shapes,
        count_copies,
        count_copies_per_iteration,
    )

    from agentrl.agents.driver import run_batched_agent, run_batched_in_blocks
    from agentrl.agents.model_agents import ModelHandle

    env, model = _bandit_and_model()
    graphdef, weights = nnx.split(model)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 4))
    cache = model.init_cache(4, HORIZON + 1)

    def run(weights, params, key, blocks=False):
        agent = DPTCachedModelAgent(ModelHandle(graphdef, weights), env, HORIZON)
        if blocks:
            return run_batched_in_blocks(env, agent, params, key, HORIZON, 2)[0]
        return run_batched_agent(env, agent, params, key, HORIZON)[0].action

    key = jax.random.key(1)
    hlo = jax.jit(run).lower(weights, params, key).compile().as_text()
    shapes = cache_shapes(cache)
    assert count_copies(hlo, shapes) == 0
    assert count_copies_per_iteration(hlo, shapes, cache.keys[0].shape) == 0
    # the counter sees cache-shaped copies where they exist (the initial zero
    # caches are materialised outside the loop)
    assert count_copies(hlo, shapes, loops_only=False) > 0
    # in blocks of 2 tasks: none per pull (each block's zero cache is
    # materialised once, in the loop over blocks)
    blocked = jax.jit(functools.partial(run, blocks=True))
    hlo = blocked.lower(weights, params, key).compile().as_text()
    shapes = cache_shapes(model.init_cache(2, HORIZON + 1))
    carried = model.init_cache(2, HORIZON + 1).keys[0].shape
    assert count_copies_per_iteration(hlo, shapes, carried) == 0


@pytest.mark.long
def test_task_blocks_give_the_same_history():
    from agentrl.agents.driver import ModelPolicy, run_policy

    env, model = _bandit_and_model()
    key = jax.random.key(5)
    params = jax.vmap(env.sample_params)(jax.random.split(key, 8))
    whole, _ = run_model_online(env, model, params, jax.random.clone(key), 1)
    for block in (2, 4):
        blocked, state = run_model_online(
            env, model, params, jax.random.clone(key), 1, block_size=block
        )
        assert state.scores.shape[:2] == (8 // block, block)  # per-block states
        for a, b in zip(jax.tree.leaves(whole), jax.tree.leaves(blocked), strict=True):
            np.testing.assert_array_equal(a, b)
    policy = ModelPolicy(model, lambda h, n: make_model_agent(h, env, n, "query"))
    with pytest.raises(ValueError, match="block_size must be a positive divisor"):
        run_policy(env, policy, params, jax.random.clone(key), HORIZON, block_size=3)
