"""The bandit contract: regret comes from the family's ``arm_means(params, t)``.

A switching bandit defined here keeps its arms in a field called ``means``
(as a user's would): reading that field as stationary means gave the oracle
a positive, staircase regret. A bandit that cannot state its arms' expected
rewards gets no regret and a note, never a wrong number.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

import agentrl.envs.spaces as spaces
from agentrl.agents.agent import RandomAgent
from agentrl.envs.bandits import BanditState, BernoulliBandit
from agentrl.envs.base import Environment, EnvParams, EnvState
from agentrl.evaluate import metrics
from agentrl.evaluate.agents import OracleAgent
from agentrl.evaluate.evaluate import evaluate_online, reference_returns
from agentrl.evaluate.report import write_results
from agentrl.history import History, episode_index


class SwitchingBandit(BernoulliBandit):
    """Bernoulli arms, reversed from step ``switch`` of every episode on."""

    def __init__(self, num_arms: int = 3, horizon: int = 8, switch: int = 4):
        super().__init__(num_arms=num_arms, horizon=horizon)
        self.switch = switch

    def arm_means(self, params, t):
        return jnp.where(t < self.switch, params.means, params.means[::-1])

    def step_env(self, key, state, action, params):
        p = self.arm_means(params, state.time)[action]
        reward = jax.random.bernoulli(key, p).astype(jnp.float32)
        state = BanditState(time=state.time + 1)
        return self._obs(), state, reward, jnp.bool_(False), {}

    def optimal_action(self, state, params):
        return jnp.argmax(self.arm_means(params, state.time)).astype(jnp.int32)

    def optimal_return(self, params):
        best = jax.vmap(lambda t: self.arm_means(params, t).max())
        return best(jnp.arange(self.horizon)).sum()


@struct.dataclass
class ShiftState(EnvState):
    shift: jax.Array


@struct.dataclass
class ShiftParams(EnvParams):
    means: jax.Array


class HiddenShiftBandit(Environment):
    """A bandit whose arms are rotated by a hidden draw at every reset: its
    expected rewards depend on the state, so it defines no ``arm_means``."""

    kind = "bandit"
    reward_distribution = "bernoulli"
    num_arms = 3
    horizon = 5

    @property
    def default_params(self):
        return ShiftParams(jnp.int32(self.horizon), jnp.linspace(0.1, 0.9, 3))

    def sample_params(self, key):
        return ShiftParams(jnp.int32(self.horizon), jax.random.uniform(key, (3,)))

    def reset_env(self, key, params):
        shift = jax.random.randint(key, (), 0, self.num_arms)
        return jnp.zeros((1,)), ShiftState(time=jnp.int32(0), shift=shift)

    def step_env(self, key, state, action, params):
        p = params.means[(action + state.shift) % self.num_arms]
        reward = jax.random.bernoulli(key, p).astype(jnp.float32)
        state = state.replace(time=state.time + 1)
        return jnp.zeros((1,)), state, reward, jnp.bool_(False), {}

    def action_space(self, params=None):
        return spaces.Discrete(self.num_arms)

    def observation_space(self, params=None):
        return spaces.Box(0.0, 0.0, (1,))


def _tasks(env, n=4):
    return jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), n))


def test_time_in_episode_restarts_after_every_done():
    done = jnp.array([[False, False, True, False, True, False]])
    np.testing.assert_array_equal(metrics.time_in_episode(done), [[0, 1, 2, 0, 1, 0]])


def test_switching_bandit_oracle_has_zero_regret():
    env = SwitchingBandit()
    params = _tasks(env)
    result = evaluate_online(env, OracleAgent(env), params, jax.random.key(1), 2)
    assert result.regret.shape == (4, 2 * env.horizon)
    np.testing.assert_allclose(result.regret, 0.0, atol=1e-6)
    assert "regret" not in result.metadata  # nothing to explain


def test_stationary_bandits_state_their_means():
    env = BernoulliBandit(num_arms=4, horizon=5)
    params = env.default_params
    np.testing.assert_allclose(env.arm_means(params, jnp.int32(3)), params.means)
    exact = reference_returns(env, _tasks(env), jax.random.key(0))[0]
    means = np.asarray(_tasks(env).means)
    np.testing.assert_allclose(exact, 5 * means.mean(-1), rtol=1e-5)


@pytest.mark.long
def test_a_bandit_that_cannot_say_gets_no_regret_and_a_note(tmp_path):
    env = HiddenShiftBandit()
    params = _tasks(env)
    result = evaluate_online(env, RandomAgent(env), params, jax.random.key(2), 2)
    assert result.regret is None  # not a regret read off `params.means`
    assert "arm_means" in result.metadata["regret"]
    paths = write_results({"random": result}, tmp_path)
    text = paths["markdown"].read_text()
    assert "No regret: bandit HiddenShiftBandit" in text
    assert "final regret" in text and "regret.png" not in text


@pytest.mark.parametrize("expected", [True, False])
def test_regret_needs_the_family(expected):
    env = SwitchingBandit(num_arms=2, horizon=4, switch=2)
    params = jax.vmap(env._params)(jnp.array([[0.2, 0.8]]))
    action = jnp.array([[1, 1, 1, 1]])  # right before the switch, wrong after
    done = jnp.array([[False, False, False, True]])
    history = History(
        obs=jnp.zeros((1, 4, 1)),
        action=action,
        reward=jnp.array([[1.0, 1.0, 0.0, 0.0]]),
        terminated=jnp.zeros_like(done),
        truncated=done,
        episode=episode_index(done),
        optimal_action=None,
        task_id=jnp.array([-1]),
        params=params,
    )
    regret = metrics.regret_from_history(history, env, expected=expected)
    want = [0.0, 0.0, 0.6, 1.2] if expected else [-0.2, -0.4, 0.4, 1.2]
    np.testing.assert_allclose(regret, [want], atol=1e-6)
    assert metrics.regret_from_history(history) is None  # no family: no regret
