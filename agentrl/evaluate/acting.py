"""Acting rules: how a trained model turns its action scores into actions.

The rule is an evaluation setting (``EvalConfig.acting``), chosen per
experiment on validation tasks, not a property of the algorithm:

- ``"sample"``: sample from the model's action distribution at
  ``eval.temperature`` (reproduces the data's noise, exploration included);
- ``"greedy"``: the most likely action (the AD-ε reference code's rule);
- ``"sample_then_greedy"``: sample until the first positive reward of the
  trial (a task's whole multi-episode evaluation), then act greedily: the
  noise explores until the task is found, and is dropped once the context
  holds what is needed to exploit it. Meant for sparse positive rewards
  (Dark Room, Key-to-Door); with dense or negative rewards it is
  ``"sample"`` or ``"greedy"`` from the first step.

Continuous actions are the model's mean under every rule.

:func:`acting_agent` builds the batched agent of a rule from a factory of
the model's agent, ``make(greedy: bool)``; the two agents of
``sample_then_greedy`` share one state (the model agents' state does not
depend on how they pick actions), so the rule adds only a per-task flag.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agentrl.sources.agent import Step
from agentrl.train.config import ACTING_RULES


class RuleState(NamedTuple):
    """The model agent's state and ``rewarded [B]``: a positive reward seen."""

    inner: Any
    rewarded: jax.Array


class SampleThenGreedy:
    """Sample until a task's first positive reward, then act greedily (batched).

    ``sampler`` and ``greedy`` are the same model's agent built with
    ``greedy=False`` and ``True``; their states must be interchangeable.
    """

    batched = True

    def __init__(self, sampler: Any, greedy: Any):
        self.sampler, self.greedy = sampler, greedy

    def init(self, key: jax.Array, params: Any) -> RuleState:
        rewarded = jnp.zeros((key.shape[0],), bool)
        return RuleState(self.sampler.init(key, params), rewarded)

    def act(self, key, state: RuleState, obs, env_state, params) -> jax.Array:
        sampled = self.sampler.act(key, state.inner, obs, env_state, params)
        greedy = self.greedy.act(key, state.inner, obs, env_state, params)
        pick = state.rewarded.reshape(state.rewarded.shape + (1,) * (sampled.ndim - 1))
        return jnp.where(pick, greedy, sampled)

    def update(self, state: RuleState, step: Step) -> RuleState:
        reward = jnp.asarray(step.reward).reshape(state.rewarded.shape)
        return RuleState(
            self.sampler.update(state.inner, step), state.rewarded | (reward > 0)
        )


def acting_agent(make: Callable[[bool], Any], rule: str) -> Any:
    """The batched agent acting by ``rule``; ``make(greedy)`` builds the model's."""
    if rule not in ACTING_RULES:
        raise ValueError(f"eval.acting must be one of {ACTING_RULES}, got {rule!r}")
    if rule == "sample_then_greedy":
        return SampleThenGreedy(make(False), make(True))
    return make(rule == "greedy")
