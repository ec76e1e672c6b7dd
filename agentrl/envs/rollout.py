"""Jitted rollouts of a policy over many tasks, and per-episode returns.

A *policy* here is a function ``policy(key, obs, state, params) -> action``;
it may read the environment state (oracles do). :func:`random_policy` and
:func:`oracle_policy` build the two reference policies of every family.
:func:`rollout` runs one task for ``num_steps`` steps in a ``lax.scan``;
vmap it over params to run many tasks at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agentrl.prng import key_scan

Policy = Callable[[jax.Array, Any, Any, Any], jax.Array]


class Transitions(NamedTuple):
    """A rollout, each leaf ``[time, ...]`` (``[task, time, ...]`` under vmap).

    ``obs`` is the observation the action was taken in; ``done`` is
    ``terminated | truncated`` of that step.
    """

    obs: Any
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array

    @property
    def done(self) -> jax.Array:
        return jnp.logical_or(self.terminated, self.truncated)


def random_policy(env: Any) -> Policy:
    """Uniform over ``env.action_space``."""

    def policy(key, obs, state, params):
        return env.action_space(params).sample(key)

    return policy


def oracle_policy(env: Any) -> Policy:
    """``env.optimal_action`` (requires an oracle)."""

    def policy(key, obs, state, params):
        return env.optimal_action(state, params)

    return policy


def rollout(
    env: Any, policy: Policy, params: Any, key: jax.Array, num_steps: int
) -> Transitions:
    """Run ``policy`` on one task for ``num_steps`` steps (auto-resetting).

    Returns :class:`Transitions` with leaves ``[num_steps, ...]``.
    """
    key_reset, key_steps = jax.random.split(key)
    obs, state = env.reset(key_reset, params)

    def body(carry, step_key):
        obs, state = carry
        key_act, key_env = jax.random.split(step_key)
        action = policy(key_act, obs, state, params)
        next_obs, state, reward, term, trunc, _ = env.step(
            key_env, state, action, params
        )
        return (next_obs, state), Transitions(obs, action, reward, term, trunc)

    _, transitions = key_scan(
        body, (obs, state), jax.random.split(key_steps, num_steps)
    )
    return transitions


def episode_returns(reward: jax.Array, done: jax.Array, num_episodes: int) -> jax.Array:
    """Sum rewards per episode.

    Args:
      reward: ``[time]`` rewards; done: ``[time]`` episode-end flags.
      num_episodes: how many leading episodes to report.

    Returns:
      ``[num_episodes]`` returns; rewards after the ``num_episodes``-th
      episode end are dropped, and an episode still running at the end of the
      stream counts what it collected so far.
    """
    index = jnp.cumsum(done) - done  # episode index of each step
    index = jnp.minimum(index, num_episodes).astype(jnp.int32)
    sums = jax.ops.segment_sum(reward, index, num_segments=num_episodes + 1)
    return sums[:num_episodes]
