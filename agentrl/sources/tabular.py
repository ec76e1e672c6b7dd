"""Tabular Q-learning and the AD-ε noisy oracle: across-episode grid sources.

:class:`QLearning` is the learner whose histories Algorithm Distillation
distils: a ``[num_states, num_actions]`` Q table (states are the env's
``Discrete`` observations), one-step Q-learning with a constant learning
rate, and epsilon-greedy exploration whose epsilon decays linearly *per
episode* from ``epsilon_start`` to ``epsilon_end`` over ``decay_episodes``
episodes. Greedy ties are broken at random, so a fresh table acts uniformly.
Truncated episodes bootstrap from the true final observation; terminated
ones do not.

:class:`NoisyOracle` is the AD-ε demonstrator: the env's oracle action,
replaced by a uniform action with probability epsilon, annealed linearly
from 1.0 to ``epsilon_end`` over ``decay_episodes`` episodes (AD-ε anneals
over ~90% of a history's episodes), counted in episodes or, with
``per_step=True`` (the AD-ε reference code), in steps, so epsilon also
falls inside an episode. It reads ``env_state`` (it is an oracle).

Both are :class:`~agentrl.agents.agent.Agent` s for ONE task.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from agentrl.agents.agent import Step


def linear_epsilon(
    episode: jax.Array, start: float, end: float, decay_episodes: int
) -> jax.Array:
    """``start`` at episode 0, linearly to ``end`` at ``decay_episodes``, then flat."""
    frac = jnp.clip(episode / max(decay_episodes, 1), 0.0, 1.0)
    return jnp.float32(start) + (jnp.float32(end) - jnp.float32(start)) * frac


@struct.dataclass
class QState:
    """``q [state, action]`` float32 and ``episode []`` episodes finished."""

    q: jax.Array
    episode: jax.Array


@dataclasses.dataclass(frozen=True)
class QLearning:
    """Epsilon-greedy one-step Q-learning on a ``Discrete`` observation space.

    Defaults (optimistic ``initial_q = 1``, ``learning_rate = 0.8``) reach
    >= 90% of the oracle return on Dark Room 9x9 (mean of the last 10
    episodes over all 81 goals, ~0.94-0.97) within a history of 100 episodes
    with ``decay_episodes = 50`` (see ``tests/test_sources_tabular.py``).
    """

    num_states: int
    num_actions: int
    learning_rate: float = 0.8
    discount: float = 0.9
    epsilon_start: float = 1.0
    epsilon_end: float = 0.01
    decay_episodes: int = 50
    initial_q: float = 1.0

    def init(self, key: jax.Array, params: Any) -> QState:
        q = jnp.full((self.num_states, self.num_actions), self.initial_q, jnp.float32)
        return QState(q=q, episode=jnp.int32(0))

    def epsilon(self, state: QState) -> jax.Array:
        return linear_epsilon(
            state.episode, self.epsilon_start, self.epsilon_end, self.decay_episodes
        )

    def act(self, key, state: QState, obs, env_state, params) -> jax.Array:
        # one draw: [explore?, uniform action, tie-break noise per action]
        u = jax.random.uniform(key, (self.num_actions + 2,))
        values = state.q[jnp.asarray(obs, jnp.int32)]
        best = values >= jnp.max(values)
        greedy = jnp.argmax(jnp.where(best, u[2:], -1.0)).astype(jnp.int32)
        uniform = jnp.minimum(
            (u[1] * self.num_actions).astype(jnp.int32), self.num_actions - 1
        )
        return jnp.where(u[0] < self.epsilon(state), uniform, greedy)

    def update(self, state: QState, step: Step) -> QState:
        s = jnp.asarray(step.obs, jnp.int32)
        s_next = jnp.asarray(step.next_obs, jnp.int32)
        a = jnp.asarray(step.action, jnp.int32)
        bootstrap = 1.0 - step.terminated.astype(jnp.float32)
        target = step.reward + self.discount * bootstrap * jnp.max(state.q[s_next])
        # A masked update instead of a scatter: ~2x faster vmapped on CPU.
        hit = (jnp.arange(self.num_states)[:, None] == s) & (
            jnp.arange(self.num_actions)[None, :] == a
        )
        q = jnp.where(hit, state.q + self.learning_rate * (target - state.q), state.q)
        return QState(q=q, episode=state.episode + step.done.astype(jnp.int32))


@dataclasses.dataclass(frozen=True)
class NoisyOracle:
    """AD-ε: ``env.optimal_action`` w.p. ``1 - epsilon``, else a uniform action.

    State: ``[]`` int32, the number of finished episodes, or with
    ``per_step`` a step count in which every episode takes ``env.horizon``
    steps: it rises by one a step and jumps to the next multiple of the
    horizon when an episode ends early, so epsilon is linear in episodes
    and also falls within each one (its floor after ``decay_episodes``
    episodes). As the AD-ε reference: Dark Room's decrements every step;
    Key-to-Door's takes off the steps an episode did not use when it ends
    (``steps_diff``; its episodes so count ``horizon - 1`` each, here
    ``horizon``).
    """

    env: Any
    decay_episodes: int
    epsilon_start: float = 1.0
    epsilon_end: float = 0.0
    per_step: bool = False

    def init(self, key: jax.Array, params: Any) -> jax.Array:
        return jnp.int32(0)

    def epsilon(self, count: jax.Array) -> jax.Array:
        if self.per_step:
            count = count / jnp.float32(self.env.horizon)  # in episodes
        return linear_epsilon(
            count, self.epsilon_start, self.epsilon_end, self.decay_episodes
        )

    def act(self, key, state: jax.Array, obs, env_state, params) -> jax.Array:
        key_explore, key_action = jax.random.split(key)
        oracle = self.env.optimal_action(env_state, params)
        uniform = self.env.action_space(params).sample(key_action)
        explore = jax.random.uniform(key_explore) < self.epsilon(state)
        return jnp.where(explore, uniform, oracle)

    def update(self, state: jax.Array, step: Step) -> jax.Array:
        if self.per_step:
            horizon = self.env.horizon
            next_episode = (state // horizon + 1) * horizon
            return jnp.where(step.done, next_episode, state + 1).astype(jnp.int32)
        return state + step.done.astype(jnp.int32)
