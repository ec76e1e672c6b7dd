"""gymnax interop (agentrl.envs.gymnax_adapter): mutants the tests before let
through.

Pass 11 of the hand-made mutation passes. A gymnax environment as a task
family resets and steps on the task it is given (not on its defaults);
its horizon defaults to ``max_steps_in_episode`` and must be >= 1; it says
that its episodes can end early (CartPole's do); and an agentrl
environment seen through gymnax keeps its observation space apart from
its action space.
"""

from __future__ import annotations

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from gymnax.environments import environment as genv
from gymnax.environments import spaces as gspaces

from agentrl import envs
from agentrl.envs import from_gymnax, to_gymnax


@struct.dataclass
class _EchoParams(genv.EnvParams):
    value: float = 0.0
    max_steps_in_episode: int = 4


class _Echo(genv.Environment):
    """Observes its task's ``value`` from reset on, plus the steps taken."""

    @property
    def default_params(self):
        return _EchoParams()

    def reset_env(self, key, params):
        state = genv.EnvState(time=0)
        return jnp.array([params.value], jnp.float32), state

    def step_env(self, key, state, action, params):
        state = genv.EnvState(time=state.time + 1)
        obs = jnp.array([params.value + state.time], jnp.float32)
        done = state.time >= params.max_steps_in_episode
        return obs, state, jnp.float32(0.0), done, {}

    def action_space(self, params=None):
        return gspaces.Discrete(2)

    def observation_space(self, params=None):
        return gspaces.Box(-10.0, 10.0, (1,), jnp.float32)


def test_reset_and_step_act_on_the_task_given_not_the_defaults():
    family = from_gymnax(_Echo(), horizon=4)
    task = _EchoParams(value=7.0)
    obs, state = family.reset(jax.random.key(0), task)
    assert float(obs[0]) == 7.0
    obs, *_ = family.step(jax.random.key(1), state, 0, task)
    assert float(obs[0]) == 8.0
    obs, _ = family.reset(jax.random.key(0))  # no task: the defaults
    assert float(obs[0]) == 0.0


def test_the_horizon_defaults_to_the_episode_limit_and_must_be_positive():
    assert from_gymnax(_Echo()).horizon == 4  # max_steps_in_episode
    with pytest.raises(ValueError, match="horizon must be an integer >= 1"):
        from_gymnax(_Echo(), horizon=0)


def test_a_gymnax_family_says_its_episodes_can_end_early():
    # CartPole under random actions falls long before its 500-step limit
    cartpole, params = gymnax.make("CartPole-v1")
    family = from_gymnax(cartpole)
    assert family.horizon == 500
    obs, state = family.reset(jax.random.key(0), params)
    for t in range(100):
        act_key, step_key = jax.random.split(jax.random.key(t + 1))
        action = family.action_space(params).sample(act_key)
        obs, state, _, terminated, _, _ = family.step(step_key, state, action, params)
        if bool(terminated):
            break
    assert bool(terminated) and t + 1 < family.horizon
    assert family.episodes_end_early


def test_through_gymnax_the_observation_space_is_not_the_action_space():
    env = envs.make("darkroom")
    view = to_gymnax(env)
    obs_space = view.observation_space(env.default_params)
    obs, _ = env.reset(jax.random.key(0), env.default_params)
    assert np.shape(obs_space.sample(jax.random.key(1))) == np.shape(obs)
    assert obs_space.contains(obs)
    assert isinstance(view.action_space(env.default_params), gspaces.Discrete)
