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
  ``"sample"`` or ``"greedy"`` from the first step;
- ``"sample_above_median"``: sample at ``eval.temperature`` among the
  actions whose logit is above its row's median (all of them where the
  median is the largest, a tie at the top): the RA-DT reference's rule
  (``sample_from_logits(top_p=0.5)`` in ml-jku/RA-DT, after Multi-Game DT),
  a quantile filter, not nucleus sampling; with 5 actions it samples among
  the two most likely (:func:`above_median`).

Continuous actions (a ``Box`` space) follow the same rules on the model's
Gaussian: ``"sample"`` (and ``"sample_above_median"``, whose filter is of
logits) draws ``mean + temperature * std * N(0, 1)``,
``"greedy"`` takes the mean, each clipped to the space's bounds
(:func:`~agentrl.agents.model_agents.select_action`). A model without a
std (the ``"mse"`` head) samples its mean: every rule then acts alike.
Transformer PPO's policy is its ``"mse"`` model with the learned
state-independent std attached
(:class:`agentrl.online.transformer.GaussianPolicy`), so it samples.

:func:`acting_agent` builds the batched agent of a rule from a factory of
the model's agent, ``make(greedy: bool)``. ``sample_then_greedy`` wraps the
sampling agent and takes both actions from one set of scores (the model
agents' ``scores``/``select``, :class:`~agentrl.agents.model_agents.ScoredAgent`),
so the rule costs one model call per step, like the others, plus a per-task
flag.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agentrl.agents.agent import Step, start_agent

#: the acting rules, by name (``EvalConfig.acting``)
ACTING_RULES = ("sample", "greedy", "sample_then_greedy", "sample_above_median")


def above_median(scores: jax.Array, space: Any) -> jax.Array:
    """``"sample_above_median"``'s scores: logits ``[B, A]`` with every action
    at or below its row's median (linear interpolation, as
    ``torch.quantile``) set to ``-inf``, unless the median is the row's
    largest logit (then all kept, as the reference); a continuous action's
    scores (mean, log std) unchanged."""
    if not hasattr(space, "n"):
        return scores
    logits = scores.astype(jnp.float32)
    median = jnp.quantile(logits, 0.5, axis=-1, keepdims=True)
    keep = (logits > median) | (median >= logits.max(axis=-1, keepdims=True))
    return jnp.where(keep, logits, -jnp.inf)


def _check_scored(agent: Any, rule: str) -> None:
    """``ValueError`` unless ``agent`` has ``scores`` and ``select``."""
    for method in ("scores", "select"):
        if not callable(getattr(agent, method, None)):
            raise ValueError(
                f"{rule} needs an agent with `scores` and `select`; "
                f"{type(agent).__name__} has no `{method}`"
            )


class RuleState(NamedTuple):
    """The model agent's state and ``rewarded [B]``: a positive reward seen."""

    inner: Any
    rewarded: jax.Array


class SampleThenGreedy:
    """Sample until a task's first positive reward, then act greedily (batched).

    ``agent`` is a batched model agent with ``scores(state, obs, env_state,
    params)`` and ``select(key, scores, greedy)``: both actions come from
    one call of ``scores``, i.e. one model call.
    """

    batched = True

    def __init__(self, agent: Any):
        _check_scored(agent, "sample_then_greedy")
        self.agent = agent

    def init(self, key: jax.Array, params: Any) -> RuleState:
        rewarded = jnp.zeros((key.shape[0],), bool)
        return RuleState(self.agent.init(key, params), rewarded)

    def start(self, state: RuleState, obs: Any) -> RuleState:
        return state._replace(inner=start_agent(self.agent, state.inner, obs))

    def act(self, key, state: RuleState, obs, env_state, params) -> jax.Array:
        scores = self.agent.scores(state.inner, obs, env_state, params)
        sampled = self.agent.select(key, scores, False)
        greedy = self.agent.select(key, scores, True)
        pick = state.rewarded.reshape(state.rewarded.shape + (1,) * (sampled.ndim - 1))
        return jnp.where(pick, greedy, sampled)

    def around(self, wrap: Callable[[Any], Any]) -> SampleThenGreedy:
        """The same rule around ``wrap(model agent)`` (e.g. under a control:
        the rule keeps reading the rewards the task pays)."""
        return SampleThenGreedy(wrap(self.agent))

    def update(self, state: RuleState, step: Step) -> RuleState:
        reward = jnp.asarray(step.reward).reshape(state.rewarded.shape)
        return RuleState(
            self.agent.update(state.inner, step), state.rewarded | (reward > 0)
        )


class SampleAboveMedian:
    """Sample among the actions above the median logit (batched,
    :func:`above_median`); ``agent`` as :class:`SampleThenGreedy`'s."""

    batched = True

    def __init__(self, agent: Any):
        _check_scored(agent, "sample_above_median")
        self.agent = agent

    def init(self, key: jax.Array, params: Any) -> Any:
        return self.agent.init(key, params)

    def start(self, state: Any, obs: Any) -> Any:
        return start_agent(self.agent, state, obs)

    def act(self, key, state, obs, env_state, params) -> jax.Array:
        scores = self.agent.scores(state, obs, env_state, params)
        return self.agent.select(key, above_median(scores, self.agent.space), False)

    def update(self, state: Any, step: Step) -> Any:
        return self.agent.update(state, step)

    def around(self, wrap: Callable[[Any], Any]) -> SampleAboveMedian:
        """The same rule around ``wrap(model agent)`` (e.g. under a control)."""
        return SampleAboveMedian(wrap(self.agent))


def acting_agent(make: Callable[[bool], Any], rule: str) -> Any:
    """The batched agent acting by ``rule``; ``make(greedy)`` builds the model's."""
    if rule not in ACTING_RULES:
        raise ValueError(f"eval.acting must be one of {ACTING_RULES}, got {rule!r}")
    if rule == "sample_then_greedy":
        return SampleThenGreedy(make(False))
    if rule == "sample_above_median":
        return SampleAboveMedian(make(False))
    return make(rule == "greedy")
