"""Multi-episode trials: one task kept fixed over N consecutive episodes.

This is the RL² / Algorithm Distillation convention: an across-episode learner
sees one long stream in which episodes of the *same* task follow each other.
The wrapper is itself an environment (same API), whose episode is the whole
trial, so trial-level code needs no special casing:

- observation: ``{"obs": inner obs, "prev_action": last action,
  "prev_reward": last reward [], "episode": index of the current episode []}``;
  ``prev_action``/``prev_reward`` are zeros at the start of a trial and carry
  over episode boundaries inside it;
- the inner environment auto-resets between episodes; the trial is truncated
  (never terminated) when ``num_episodes`` episodes have ended;
- ``info`` carries the inner episode's ``episode_terminated``,
  ``episode_truncated`` and ``episode_final_observation``.

Params are the inner environment's params (the task), so ``sample_params``,
``params_for_task``, ``draw_params``, ``task_split`` and the oracle pass
through; the trial's optimal return is ``num_episodes`` times the inner one.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

import agentrl.envs.spaces as spaces
from agentrl.envs.base import Environment
from agentrl.envs.validate import check_int


@struct.dataclass
class TrialState:
    """Inner state plus the trial's bookkeeping."""

    env_state: Any
    time: jax.Array
    episode: jax.Array
    prev_action: jax.Array
    prev_reward: jax.Array


class MultiEpisodeTrial(Environment):
    """Wrap ``env`` (agentrl or gymnax) so one episode = ``num_episodes`` episodes."""

    def __init__(self, env: Any, num_episodes: int):
        self.env = env
        self.num_episodes = check_int(
            "MultiEpisodeTrial", "num_episodes", num_episodes, 1
        )
        inner_horizon = getattr(env, "horizon", None)
        self.horizon = None if inner_horizon is None else inner_horizon * num_episodes
        self.num_tasks = getattr(env, "num_tasks", None)
        # The trial's reset only resets the inner env: it needs a key iff that does.
        self.stochastic_reset = bool(getattr(env, "stochastic_reset", True))

    @property
    def name(self) -> str:
        return (
            f"MultiEpisodeTrial[{getattr(self.env, 'name', type(self.env).__name__)}]"
        )

    @property
    def default_params(self):
        return self.env.default_params

    def _zero_action(self, params) -> jax.Array:
        space = self.env.action_space(params)
        return jnp.zeros(space.shape, space.dtype)

    def _obs(self, inner_obs, state: TrialState) -> dict[str, jax.Array]:
        return {
            "obs": inner_obs,
            "prev_action": state.prev_action,
            "prev_reward": state.prev_reward,
            "episode": state.episode,
        }

    def reset_env(self, key: jax.Array, params):
        inner_obs, env_state = self.env.reset(key, params)
        state = TrialState(
            env_state=env_state,
            time=jnp.int32(0),
            episode=jnp.int32(0),
            prev_action=self._zero_action(params),
            prev_reward=jnp.float32(0.0),
        )
        return self._obs(inner_obs, state), state

    def step_env(self, key: jax.Array, state: TrialState, action: Any, params):
        obs, env_state, reward, term, trunc, info = self.env.step(
            key, state.env_state, action, params
        )
        space = self.env.action_space(params)
        state = TrialState(
            env_state=env_state,
            time=state.time + 1,
            episode=state.episode + jnp.logical_or(term, trunc).astype(jnp.int32),
            prev_action=jnp.asarray(action, space.dtype).reshape(space.shape),
            prev_reward=jnp.asarray(reward, jnp.float32),
        )
        info = {
            "episode_terminated": term,
            "episode_truncated": trunc,
            "episode_final_observation": info["final_observation"],
        }
        return self._obs(obs, state), state, reward, jnp.bool_(False), info

    def is_truncated(self, state: TrialState, params) -> jax.Array:
        return state.episode >= self.num_episodes

    def action_space(self, params=None):
        return self.env.action_space(params)

    def observation_space(self, params=None):
        inner_action = self.env.action_space(params)
        return spaces.Dict(
            {
                "obs": self.env.observation_space(params),
                "prev_action": inner_action,
                "prev_reward": spaces.Box(-jnp.inf, jnp.inf, ()),
                "episode": spaces.Discrete(self.num_episodes),
            }
        )

    def sample_params(self, key: jax.Array):
        return self.env.sample_params(key)

    def params_for_task(self, task_id: jax.Array):
        return self.env.params_for_task(task_id)

    @property
    def draw_params(self):
        """The inner family's fresh-task draw, ``None`` where it has none."""
        return getattr(self.env, "draw_params", None)

    def optimal_action(self, state: TrialState, params) -> jax.Array:
        return self.env.optimal_action(state.env_state, params)

    def optimal_return(self, params) -> jax.Array:
        return self.num_episodes * self.env.optimal_return(params)

    @property
    def has_oracle(self) -> bool:
        return bool(getattr(self.env, "has_oracle", False))
