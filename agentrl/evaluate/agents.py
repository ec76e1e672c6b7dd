"""Baseline agents, and per-task views of batched agents, for evaluation.

Baselines follow the one :class:`agentrl.agents.agent.Agent` protocol and run
through its one driver (:func:`agentrl.agents.agent.run_agent_on_tasks`):

- :class:`~agentrl.agents.agent.RandomAgent`: uniform over the action space
  (the source ``random``'s agent, registered here as the ``random`` baseline);
- :class:`OracleAgent`: ``env.optimal_action`` (reads the env state/params, as
  oracles may).

A *batched* agent (``batched = True``) takes every argument and keeps its
state with a leading batch axis ``[B, ...]`` (one row per task), so a model
runs one forward pass for all tasks per step; the driver runs it directly.
:func:`per_task` turns it into an ordinary per-task agent (batch of one) for
code that expects one; both give identical histories for the same key.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from agentrl.agents.agent import (
    Agent,
    RandomAgent,
    Step,
    is_batched,
    start_agent,
)
from agentrl.registry import Registry, caller_module

#: A batched agent is an :class:`Agent` with ``batched = True`` (one protocol).
BatchedAgent = Agent


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


def _expand(tree: Any) -> Any:
    return jax.tree.map(lambda x: jnp.asarray(x)[None], tree)


class per_task:  # noqa: N801 (used like a function)
    """Wrap a batched agent as a per-task :class:`Agent` (batch of one).

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

    def start(self, state: Any, obs: Any) -> Any:
        return start_agent(self.agent, state, _expand(obs))

    def act(self, key, state, obs, env_state, params) -> jax.Array:
        action = self.agent.act(
            key[None], state, _expand(obs), _expand(env_state), _expand(params)
        )
        return action[0]

    def update(self, state: Any, step: Step) -> Any:
        return self.agent.update(state, _expand(step))


#: baselines by name: ``factory(env) -> Agent``
BASELINES = Registry(
    "baseline", note="register more with agentrl.evaluate.register_baseline"
)


def register_baseline(name: str, factory: Any = None) -> Any:
    """Add a baseline: ``factory(env) -> Agent``; returns ``factory``.

    Without ``factory``, a decorator (``@register_baseline("name")``). The
    same factory again is harmless, a class defined again (a notebook cell
    re-run) replaces itself, another under a taken name is a ``ValueError``
    naming both (:mod:`agentrl.registry`).
    """
    module = caller_module()
    if factory is None:
        return lambda target: BASELINES.register(name, target, module=module)
    return BASELINES.register(name, factory, module=module)


register_baseline("random", RandomAgent)
register_baseline("oracle", OracleAgent)


def make_baseline(name: str, env: Any) -> Any:
    """Build baseline ``name`` for ``env`` from :data:`BASELINES`.

    Other agents (UCB, Thompson sampling, the data's source algorithm) are
    registered with :func:`register_baseline` or passed as agent objects.
    """
    return BASELINES.get(name)(env)
