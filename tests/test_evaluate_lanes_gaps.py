"""Lanes act as their rule and control do alone, on a fake model (no training)."""

import jax
import numpy as np
import pytest
from test_evaluate_fakes import RepeatRewardedAD

from agentrl import envs
from agentrl.agents.acting import acting_agent
from agentrl.agents.agent import run_batched_agent
from agentrl.agents.rolling import ADModelAgent
from agentrl.evaluate.controls import controlled_agent
from agentrl.evaluate.lanes import LaneAgent, lane

ARMS, STEPS, TASKS = 4, 24, 16


@pytest.mark.parametrize(
    ("rule", "control"),
    [
        ("greedy", None),
        ("sample_then_greedy", "zero_rewards"),
        ("sample", "shuffle_rewards"),
        ("sample", "empty_context"),
    ],
)
def test_a_lane_acts_as_its_rule_and_control_alone(rule, control):
    env = envs.make("bernoulli_bandit", num_arms=ARMS, horizon=STEPS)
    keys = jax.random.split(jax.random.key(20), TASKS)
    params = jax.vmap(env.sample_params)(keys)
    model = RepeatRewardedAD(ARMS, strength=4.0)

    def make(greedy):
        return ADModelAgent(model, env, STEPS, greedy=greedy)

    alone = acting_agent(make, rule)
    if control is not None:
        alone = controlled_agent(alone, control, STEPS)
    laned = LaneAgent(make(False), lane(rule, control), STEPS)
    key = jax.random.key(21)
    want = run_batched_agent(env, alone, params, jax.random.clone(key), STEPS)[0]
    got = run_batched_agent(env, laned, params, jax.random.clone(key), STEPS)[0]
    np.testing.assert_array_equal(got.action, want.action)
    np.testing.assert_array_equal(got.reward, want.reward)
