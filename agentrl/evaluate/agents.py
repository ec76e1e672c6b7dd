"""Baseline agents and the batched-agent protocol used by the evaluation driver.

Baselines follow :class:`agentrl.sources.Agent` (one task; vmap over tasks with
:func:`agentrl.sources.run_agent_on_tasks`):

- :class:`RandomAgent`: uniform over the action space;
- :class:`OracleAgent`: ``env.optimal_action`` (reads the env state/params, as
  oracles may).

A *batched* agent has the same three methods, but every argument and the
state carry a leading batch axis ``[B, ...]`` (one row per task), so a model
runs one forward pass for all tasks per step. Mark it with ``batched = True``;
:func:`per_task` turns it into an ordinary per-task :class:`Agent` (batch of
one) for code that expects one, and :func:`agentrl.evaluate.run_batched_agent`
drives it directly. Both give identical histories for the same key.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp

from agentrl.sources.agent import Step


class RandomAgent:
    """Uniformly random actions from ``env.action_space(params)``."""

    def __init__(self, env: Any):
        self.env = env

    def init(self, key: jax.Array, params: Any) -> Any:
        return ()

    def act(self, key, state, obs, env_state, params) -> jax.Array:
        return self.env.action_space(params).sample(key)

    def update(self, state: Any, step: Step) -> Any:
        return state


class OracleAgent:
    """The environment's optimal action (requires ``env.has_oracle``)."""

    def __init__(self, env: Any):
        if not getattr(env, "has_oracle", False):
            raise ValueError(f"{getattr(env, 'name', env)} has no oracle")
        self.env = env

    def init(self, key: jax.Array, params: Any) -> Any:
        return ()

    def act(self, key, state, obs, env_state, params) -> jax.Array:
        return self.env.optimal_action(env_state, params)

    def update(self, state: Any, step: Step) -> Any:
        return state


class BatchedAgent(Protocol):
    """An agent acting on ``B`` tasks at once; leaves carry a leading ``[B]``.

    ``init(keys [B], params [B, ...]) -> state``;
    ``act(keys [B], state, obs [B, ...], env_state [B, ...], params [B, ...])
    -> action [B, ...]``; ``update(state, Step [B, ...]) -> state``.
    """

    batched: bool

    def init(self, key: jax.Array, params: Any) -> Any: ...

    def act(
        self, key: jax.Array, state: Any, obs: Any, env_state: Any, params: Any
    ) -> jax.Array: ...

    def update(self, state: Any, step: Step) -> Any: ...


def is_agent(obj: Any) -> bool:
    """Whether ``obj`` has the ``init``/``act``/``update`` methods of an agent."""
    return all(callable(getattr(obj, m, None)) for m in ("init", "act", "update"))


def is_batched(obj: Any) -> bool:
    """Whether ``obj`` is a :class:`BatchedAgent` (``batched = True``)."""
    return is_agent(obj) and bool(getattr(obj, "batched", False))


def _expand(tree: Any) -> Any:
    return jax.tree.map(lambda x: jnp.asarray(x)[None], tree)


class per_task:  # noqa: N801 (used like a function)
    """Wrap a :class:`BatchedAgent` as a per-task :class:`Agent` (batch of one).

    The state keeps the batch axis of one; vmapping the wrapped agent over
    tasks (``run_agent_on_tasks``) gives ``[task, 1, ...]`` states.
    """

    batched = False

    def __init__(self, agent: BatchedAgent):
        if not is_batched(agent):
            raise ValueError("per_task expects a batched agent (batched = True)")
        self.agent = agent

    def init(self, key: jax.Array, params: Any) -> Any:
        return self.agent.init(key[None], _expand(params))

    def act(self, key, state, obs, env_state, params) -> jax.Array:
        action = self.agent.act(
            key[None], state, _expand(obs), _expand(env_state), _expand(params)
        )
        return action[0]

    def update(self, state: Any, step: Step) -> Any:
        return self.agent.update(state, _expand(step))


BASELINES: dict[str, Any] = {"random": RandomAgent, "oracle": OracleAgent}


def make_baseline(name: str, env: Any) -> Any:
    """Build baseline ``name`` for ``env`` from :data:`BASELINES`.

    Other agents (UCB, Thompson sampling, the data's source algorithm) are
    registered with :func:`register_baseline` or passed as agent objects.
    """
    if name not in BASELINES:
        raise ValueError(
            f"unknown baseline {name!r}; registered: {', '.join(sorted(BASELINES))} "
            "(register more with agentrl.evaluate.register_baseline)"
        )
    return BASELINES[name](env)


def register_baseline(name: str, factory: Any) -> None:
    """Add a baseline: ``factory(env) -> Agent``."""
    if name in BASELINES:
        raise ValueError(f"baseline {name!r} is already registered")
    BASELINES[name] = factory
