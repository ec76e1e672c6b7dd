"""The online-agent protocol and the one driver that runs any agent on tasks.

Every source algorithm (UCB, Thompson sampling, Q-learning, the noisy
oracle, ...), every evaluation baseline and every trained in-context model
acting online is an :class:`Agent`: three pure functions over an explicit
agent state, for ONE task (vmap over tasks outside). :func:`run_agent` steps
an agent through an environment for a fixed number of steps in one
``lax.scan`` and records a :class:`~agentrl.sources.history.History`, so
data generation and online evaluation share a single code path.

Protocol (all jittable, no Python side effects)::

    state  = agent.init(key, params)
    action = agent.act(key, state, obs, env_state, params)
    state  = agent.update(state, Step(obs, action, reward, next_obs, done, ...))

``env_state`` and ``params`` are passed to ``act`` so oracles can read them;
a learning agent must not (it sees only ``obs`` and its own history).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp

from agentrl.sources.history import History, episode_index


class Step(NamedTuple):
    """One transition as an agent's ``update`` sees it.

    ``next_obs`` is the true successor (``final_observation`` on episode end);
    ``reset_obs`` is what the agent observes next (a fresh episode's first
    observation when ``done``).
    """

    obs: Any
    action: jax.Array
    reward: jax.Array
    next_obs: Any
    terminated: jax.Array
    truncated: jax.Array
    reset_obs: Any

    @property
    def done(self) -> jax.Array:
        return jnp.logical_or(self.terminated, self.truncated)


class Agent(Protocol):
    """An online agent for one task (see the module docstring)."""

    def init(self, key: jax.Array, params: Any) -> Any: ...

    def act(
        self, key: jax.Array, state: Any, obs: Any, env_state: Any, params: Any
    ) -> jax.Array: ...

    def update(self, state: Any, step: Step) -> Any: ...


def run_agent(
    env: Any,
    agent: Agent,
    params: Any,
    key: jax.Array,
    num_steps: int,
    task_id: jax.Array | int = -1,
    record_optimal_action: bool | None = None,
) -> tuple[History, Any]:
    """Run ``agent`` on one task for ``num_steps`` steps (auto-resetting env).

    Args:
      env: an agentrl or gymnax environment.
      agent: an :class:`Agent`.
      params: one task's env params (vmap this function for many tasks).
      key: PRNG key.
      num_steps: length of the history.
      task_id: recorded in the history.
      record_optimal_action: record ``env.optimal_action`` at every step
        (defaults to whether the env has an oracle).

    Returns:
      ``(history, final_agent_state)``; history leaves ``[num_steps, ...]``
      without the task axis (``[task, num_steps, ...]`` under vmap).
    """
    if record_optimal_action is None:
        record_optimal_action = bool(getattr(env, "has_oracle", False))
    key_env, key_agent, key_steps = jax.random.split(key, 3)
    obs, env_state = env.reset(key_env, params)
    agent_state = agent.init(key_agent, params)

    def body(carry, step_key):
        key_act, key_step = jax.random.split(step_key)
        return agent_transition(
            agent,
            env.step,
            env.optimal_action if record_optimal_action else None,
            carry,
            key_act,
            key_step,
            params,
        )

    (_, _, agent_state), record = jax.lax.scan(
        body, (obs, env_state, agent_state), jax.random.split(key_steps, num_steps)
    )
    return history_from_record(record, task_id, params), agent_state


def agent_transition(agent, env_step, optimal_action, carry, key_act, key_step, params):
    """One step of ``agent`` in the environment: the body of the drivers' scans.

    ``carry`` is ``(obs, env_state, agent_state)``; ``env_step`` and
    ``optimal_action`` (``None`` to skip recording it) are the environment's,
    vmapped by a batched driver. Returns ``(next carry, record)`` with record
    ``(obs, action, reward, terminated, truncated, optimal_action)``.
    """
    obs, env_state, agent_state = carry
    action = agent.act(key_act, agent_state, obs, env_state, params)
    optimal = optimal_action(env_state, params) if optimal_action else None
    next_obs, next_env_state, reward, term, trunc, info = env_step(
        key_step, env_state, action, params
    )
    step = Step(obs, action, reward, info["final_observation"], term, trunc, next_obs)
    agent_state = agent.update(agent_state, step)
    record = (obs, action, reward, term, trunc, optimal)
    return (next_obs, next_env_state, agent_state), record


def history_from_record(record: tuple, task_id: Any, params: Any) -> History:
    """The :class:`History` of a driver's scan record (time on the leading axes)."""
    obs, action, reward, term, trunc, optimal = record
    return History(
        obs=obs,
        action=action,
        reward=reward.astype(jnp.float32),
        terminated=term,
        truncated=trunc,
        episode=episode_index(jnp.logical_or(term, trunc)),
        optimal_action=optimal,
        task_id=jnp.asarray(task_id, jnp.int32),
        params=params,
    )


def run_agent_on_tasks(
    env: Any,
    agent: Agent,
    params: Any,
    key: jax.Array,
    num_steps: int,
    task_id: jax.Array | None = None,
) -> tuple[History, Any]:
    """:func:`run_agent` vmapped over tasks: params leaves ``[task, ...]``."""
    num_tasks = jax.tree.leaves(params)[0].shape[0]
    if task_id is None:
        task_id = jnp.full((num_tasks,), -1, jnp.int32)
    keys = jax.random.split(key, num_tasks)
    return jax.vmap(lambda p, k, t: run_agent(env, agent, p, k, num_steps, t))(
        params, keys, task_id
    )
