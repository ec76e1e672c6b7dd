"""A trained recurrent learner acting in context, as a batched agent.

The evaluation harness runs the plain environment (no trial wrapper) for
``num_episodes`` episodes of one task: that is one trial. The agent builds
the core's input exactly as training did (observation, previous action and
reward, new-episode flag; zeros before the first step, carried over episode
boundaries) and keeps the hidden state over the whole run.

As :class:`~agentrl.agents.rolling.ADModelAgent`, ``start`` (the
agent protocol's hook, called once by the driver before its scan) advances
the core over the first observation, and ``update`` advances it over the
*next* observation (``reset_obs``) and stores its action output: each step
is one core step, the same computation at every step, with no first-step
branch in the compiled loop.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agentrl.agents.agent import Step
from agentrl.rl.cores import ActionHead, GRUCore, step_features


class RL2State(NamedTuple):
    """Hidden ``[B, H]`` and the next action output ``[B, A]``."""

    hidden: jax.Array
    out: jax.Array


class RL2Agent:
    """A GRU core acting online (batched: every argument has a ``[B]`` axis).

    Args:
      weights: the core's weights (a pytree, as trained).
      core: the :class:`GRUCore` they belong to.
      env: the environment (its spaces build the input features).
      greedy / temperature: how actions are drawn from the policy.
      grid_size: the observation encoding training used (``None``: one-hot).

    ``start`` must run before the first ``act`` (the driver calls it): it
    advances the core over the first observation, whose output ``act`` uses.
    """

    batched = True

    def __init__(
        self,
        weights: Any,
        core: GRUCore,
        env: Any,
        greedy: bool = False,
        temperature: float = 1.0,
        grid_size: int | None = None,
    ):
        self.weights, self.core, self.env = weights, core, env
        self.grid_size = grid_size
        self.obs_space = env.observation_space(env.default_params)
        self.head = ActionHead(env.action_space(env.default_params))
        self.space = self.head.space  # a scored agent's (acting rules read it)
        self.greedy, self.temperature = greedy, temperature

    def _advance(self, hidden, obs, prev_action, prev_reward, first):
        x = jax.vmap(
            lambda o, a, r, f: step_features(
                self.obs_space, self.head, o, a, r, f, self.grid_size
            )
        )(obs, prev_action, prev_reward, first)
        hidden, out, _ = self.core.step(self.weights, hidden, x)
        return hidden, out

    def _first(self, hidden, obs):
        b = hidden.shape[0]
        space = self.head.space
        zeros = jnp.zeros((b, *space.shape), space.dtype)
        return self._advance(
            hidden, obs, zeros, jnp.zeros((b,), jnp.float32), jnp.ones((b,), bool)
        )

    def init(self, key: jax.Array, params: Any) -> RL2State:
        b = key.shape[0]
        return RL2State(
            hidden=self.core.init_hidden((b,)),
            out=jnp.zeros((b, self.head.out), jnp.float32),
        )

    def start(self, state: RL2State, obs: Any) -> RL2State:
        """One core step on ``obs [B, ...]`` with zero action/reward, new episode."""
        return RL2State(*self._first(state.hidden, obs))

    def scores(self, state: RL2State, obs, env_state, params) -> jax.Array:
        """The policy head's output ``[B, ...]`` for ``obs`` (acting rules)."""
        return state.out

    def select(self, key: jax.Array, scores: jax.Array, greedy: bool) -> jax.Array:
        raw = jax.vmap(
            lambda k, o: self.head.sample(
                k, o, self.weights.get("log_std"), greedy, self.temperature
            )
        )(key, scores)
        return self.head.to_env(raw)

    def act(self, key, state: RL2State, obs, env_state, params) -> jax.Array:
        return self.select(key, self.scores(state, obs, env_state, params), self.greedy)

    def update(self, state: RL2State, step: Step) -> RL2State:
        # one core step, the same at every step (the first is ``start``'s)
        return RL2State(
            *self._advance(
                state.hidden, step.reset_obs, step.action, step.reward, step.done
            )
        )
