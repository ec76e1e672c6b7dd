"""Trials of episodes that end early, the auto-reset's info and key choice, spaces."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

import agentrl.envs.spaces as spaces
from agentrl import envs
from agentrl.envs.base import Environment, EnvParams, EnvState
from agentrl.envs.grid import RIGHT


def _hard_trial(num_episodes=3):
    """Dark Room Hard 3x3, goal one step right of the start: episodes of 1 step."""
    env = envs.make("darkroom_hard", size=3, horizon=10)
    params = env.params_for_task(jnp.int32(1 * 3 + 2))  # goal (2, 1), start (1, 1)
    return env, envs.MultiEpisodeTrial(env, num_episodes=num_episodes), params


def test_a_trial_counts_episodes_that_end_by_termination():
    env, trial, params = _hard_trial()
    assert trial.horizon == 3 * env.horizon
    tr = jax.jit(
        lambda k: envs.rollout(trial, envs.oracle_policy(trial), params, k, 6)
    )(jax.random.key(51))
    np.testing.assert_array_equal(tr.obs["episode"], [0, 1, 2, 0, 1, 2])
    assert np.asarray(tr.truncated).tolist() == [False, False, True] * 2
    assert not np.asarray(tr.terminated).any()  # a trial is never terminated
    np.testing.assert_array_equal(tr.reward, 1.0)
    returns = envs.episode_returns(tr.reward, tr.done, 2)
    np.testing.assert_array_equal(returns, [3.0, 3.0])


def test_a_trial_reports_the_inner_episodes_end_and_last_observation():
    _, trial, params = _hard_trial()
    obs, state = trial.reset(jax.random.key(52), params)
    assert int(obs["obs"]) == 4  # the centre
    step = jax.jit(trial.step)
    keys = jax.random.split(jax.random.key(53), 2)
    obs, state, reward, term, trunc, info = step(keys[0], state, RIGHT, params)
    assert bool(info["episode_terminated"]) and not bool(info["episode_truncated"])
    assert int(info["episode_final_observation"]) == 5  # the goal, before the reset
    assert int(obs["obs"]) == 4 and int(obs["episode"]) == 1
    assert int(state.time) == 1 and not bool(term | trunc)
    obs, state, *_ = step(keys[1], state, RIGHT, params)
    assert int(state.time) == 2  # the trial's clock runs over inner episodes


def test_a_trial_over_a_random_start_family_splits_its_keys():
    env = envs.make("dark_key_to_door", size=3, horizon=2)
    trial = envs.MultiEpisodeTrial(env, num_episodes=2)
    params = env.default_params
    with jax.debug_key_reuse(True):
        _, state = trial.reset(jax.random.key(54), params)
        for k in jax.random.split(jax.random.key(55), 5):  # across a trial's end
            _, state, *_ = trial.step(k, state, jnp.int32(4), params)


def test_info_separates_termination_from_truncation():
    dense = envs.make("darkroom", size=3, horizon=2)
    params = dense.params_for_task(jnp.int32(0))
    _, state = dense.reset(jax.random.key(56), params)
    keys = jax.random.split(jax.random.key(57), 2)
    _, state, _, term, trunc, info = dense.step(keys[0], state, 4, params)
    assert not bool(info["terminated"] | info["truncated"] | term | trunc)
    *_, term, trunc, info = dense.step(keys[1], state, 4, params)
    assert bool(trunc) and bool(info["truncated"])
    assert not bool(term) and not bool(info["terminated"])


@struct.dataclass
class _KeyState(EnvState):
    rng: jax.Array


class _KeyCarrier(Environment):
    """One-step episodes whose state carries a typed key (as xminigrid's)."""

    horizon = 1

    @property
    def default_params(self):
        return EnvParams(max_steps_in_episode=jnp.int32(1))

    def reset_env(self, key, params):
        return jnp.zeros(()), _KeyState(time=jnp.int32(0), rng=key)

    def step_env(self, key, state, action, params):
        rng = jax.random.split(state.rng)[0]
        return jnp.zeros(()), _KeyState(time=state.time + 1, rng=rng), 0.0, False, {}


def test_auto_reset_keeps_the_fresh_episodes_key_in_the_state():
    env = _KeyCarrier()
    params = env.default_params
    _, state = env.reset(jax.random.key(58), params)
    key = jax.random.key(59)
    _, state, *_ = env.step(key, state, 0, params)
    want = jax.random.split(jax.random.key(59))[1]  # the reset's key
    np.testing.assert_array_equal(
        jax.random.key_data(state.rng), jax.random.key_data(want)
    )


def test_space_bounds_are_inclusive_and_exclusive_as_documented():
    d = spaces.Discrete(3)
    assert [bool(d.contains(x)) for x in (-1, 0, 2, 3)] == [False, True, True, False]
    box = spaces.Box(-1.0, 1.0, (2,))
    assert bool(box.contains(jnp.array([1.0, -1.0])))
    assert not bool(box.contains(jnp.array([1.01, 0.0])))
    draws = np.asarray(jax.vmap(box.sample)(jax.random.split(jax.random.key(60), 500)))
    assert draws.min() < -0.95 and draws.max() > 0.95 and abs(draws.mean()) < 0.1
    with pytest.raises(ValueError, match="n must be >= 1"):
        spaces.Discrete(0)
