"""Trained decision models as batched agents: the pieces every model agent shares.

A model agent is a :class:`~agentrl.agents.agent.Agent` with ``batched =
True``: one model call per step serves every task (the batch axis is the
task axis). Use :func:`agentrl.evaluate.agents.per_task` to get a per-task
``Agent`` for ``run_agent_on_tasks`` (batch of one; same history for the
same key). A model is a duck-typed object or a Flax NNX module, held as a
:class:`ModelHandle` (split once, merged per step). Each learner's agent is
its own module: AD's rolling KV cache (:mod:`agentrl.agents.rolling`, also
AD-ε's, T2MIR-AD's, DT's and transformer PPO's), DPT's context set
(:mod:`agentrl.agents.context_set`); RL²'s GRU agent is
:mod:`agentrl.online.agent`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


class ModelHandle(NamedTuple):
    """A model as ``(graphdef, weights)``; ``weights is None`` for plain objects."""

    graphdef: Any
    weights: Any

    def get(self) -> Any:
        if self.weights is None:
            return self.graphdef
        from flax import nnx

        return nnx.merge(self.graphdef, self.weights)


def split_model(model: Any) -> ModelHandle:
    """``nnx.split`` an NNX module; wrap any other object as is."""
    if isinstance(model, ModelHandle):
        return model
    from flax import nnx

    if isinstance(model, nnx.Module):
        return ModelHandle(*nnx.split(model))
    return ModelHandle(model, None)


def select_action(
    key: jax.Array, out: jax.Array, space: Any, greedy: bool, temperature: float
) -> jax.Array:
    """Action ``[B, ...]`` from logits ``[B, A]`` (discrete) or means (continuous)."""
    if hasattr(space, "n"):
        if greedy:
            return jnp.argmax(out, axis=-1).astype(jnp.int32)
        logits = out.astype(jnp.float32) / temperature
        return jax.vmap(jax.random.categorical)(key, logits).astype(jnp.int32)
    action = out.astype(space.dtype)
    return jnp.clip(action, space.low, space.high)


class ScoredAgent:
    """A model agent that acts from action scores: one model call per step.

    ``scores(state, obs, env_state, params) -> [B, A]`` (logits; means for
    continuous actions) and ``select(key, scores, greedy) -> [B, ...]`` split
    ``act``, so an acting rule that needs both the sampled and the greedy
    action (:mod:`agentrl.agents.acting`) computes the scores once.
    Subclasses set ``space``, ``greedy`` and ``temperature``.
    """

    batched = True

    def select(self, key: jax.Array, scores: jax.Array, greedy: bool) -> jax.Array:
        return select_action(key, scores, self.space, greedy, self.temperature)

    def act(self, key, state, obs, env_state, params) -> jax.Array:
        return self.select(key, self.scores(state, obs, env_state, params), self.greedy)


def out_shape(space: Any) -> tuple[int, ...]:
    return (space.n,) if hasattr(space, "n") else tuple(space.shape)
