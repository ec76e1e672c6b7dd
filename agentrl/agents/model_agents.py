"""Trained decision models as batched agents: the pieces every model agent shares.

A model agent is a :class:`~agentrl.agents.agent.Agent` with ``batched =
True``: one model call per step serves every task (the batch axis is the
task axis). Use :func:`agentrl.evaluate.agents.per_task` to get a per-task
``Agent`` for ``run_agent_on_tasks`` (batch of one; same history for the
same key). A model is a duck-typed object or a Flax NNX module, held as a
:class:`ModelHandle` (split once, merged per step). Each learner's agent is
its own module: AD's rolling KV cache (:mod:`agentrl.agents.rolling`, also
AD-ε's, T2MIR-AD's, DT's and transformer PPO's), T2MIR-AD's MuJoCo context
of sorted episodes (:mod:`agentrl.agents.sorted_episodes`), DPT's context
set (:mod:`agentrl.agents.context_set`); RL²'s GRU agent is
:mod:`agentrl.online.agent`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agentrl.agents.acting import acting_agent
from agentrl.models.heads import ModelOutput, sample_action


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


def model_agent(agent: Any, model: Any, env: Any, config: Any, **settings: Any) -> Any:
    """The batched agent ``agent(handle, env, config.model.max_steps, greedy=,
    temperature=, **settings)`` of ``model`` (one handle shared by the acting
    rule's agents), acting by ``config.eval.acting`` at
    ``config.eval.temperature``: how every context-reading agent class
    (rolling cache, window, DT's) becomes the learner's agent."""
    handle = split_model(model)
    return acting_agent(
        lambda greedy: agent(
            handle,
            env,
            config.model.max_steps,
            greedy=greedy,
            temperature=config.eval.temperature,
            **settings,
        ),
        config.eval.acting,
    )


def action_scores(out: Any, space: Any) -> jax.Array:
    """The scores a model agent keeps of a model output, float32.

    ``out`` is a :class:`~agentrl.models.heads.ModelOutput` (or any object
    with ``action`` and, optionally, ``log_std``) whose ``action`` is
    ``[..., A]`` logits (discrete) or ``[..., *action_shape]`` means
    (continuous). Discrete: the logits ``[..., A]``. Continuous: the
    Gaussian, ``[..., 2, *action_shape]``, its mean at index 0 and its
    ``log_std`` at index 1 of the axis before the action's; without a std
    (the ``"mse"`` head: ``log_std is None``) the log std is ``-inf``, a std
    of zero, so that sampling is the mean.
    """
    action = jnp.asarray(out.action).astype(jnp.float32)
    if hasattr(space, "n"):
        return action
    log_std = getattr(out, "log_std", None)
    if log_std is None:
        log_std = jnp.full_like(action, -jnp.inf)
    axis = action.ndim - len(space.shape)
    return jnp.stack([action, jnp.asarray(log_std, jnp.float32)], axis=axis)


def scores_at(scores: jax.Array, pos: jax.Array) -> jax.Array:
    """Row ``b``'s scores at position ``pos[b]``: ``[B, T, ...] -> [B, ...]``
    (every trailing axis alike: a Gaussian's mean and log std of one step)."""
    idx = jnp.asarray(pos).reshape((-1,) + (1,) * (scores.ndim - 1))
    return jnp.take_along_axis(scores, idx, axis=1)[:, 0]


def select_action(
    key: jax.Array, scores: jax.Array, space: Any, greedy: bool, temperature: float
) -> jax.Array:
    """Action ``[B, ...]`` from :func:`action_scores` ``[B, ...]``, one key per row.

    Discrete: ``scores`` = logits ``[B, A]``; the argmax, or a categorical
    sample of ``logits / temperature``. Continuous: ``scores`` = ``[B, 2,
    *action_shape]`` (mean, log std); the mean, or ``mean + temperature *
    exp(log_std) * N(0, 1)`` (:func:`agentrl.models.heads.sample_action`;
    the mean itself for an ``"mse"`` head, whose std is zero), clipped to
    the space's bounds. ``key [B]`` is unused when ``greedy``.
    """
    if hasattr(space, "n"):
        if greedy:
            return jnp.argmax(scores, axis=-1).astype(jnp.int32)
        logits = scores.astype(jnp.float32) / temperature
        return jax.vmap(jax.random.categorical)(key, logits).astype(jnp.int32)
    mean, log_std = scores[:, 0], scores[:, 1]
    if greedy:
        action = mean
    else:
        action = jax.vmap(
            lambda k, m, s: sample_action(
                "gaussian", ModelOutput(m, s, {}), k, temperature
            )
        )(key, mean, log_std)
    return jnp.clip(action.astype(space.dtype), space.low, space.high)


class ScoredAgent:
    """A model agent that acts from action scores: one model call per step.

    ``scores(state, obs, env_state, params)`` (:func:`action_scores`:
    logits ``[B, A]``, or mean and log std ``[B, 2, *action_shape]`` for
    continuous actions) and ``select(key, scores, greedy) -> [B, ...]``
    (:func:`select_action`) split ``act``, so an acting rule that needs both
    the sampled and the greedy action (:mod:`agentrl.agents.acting`)
    computes the scores once.
    Subclasses call ``super().__init__(model, env, greedy, temperature)``,
    which keeps the model as a :class:`ModelHandle` and the action space.
    """

    batched = True

    def __init__(
        self, model: Any, env: Any, greedy: bool = False, temperature: float = 1.0
    ):
        self.model = split_model(model)
        self.env = env
        self.greedy = greedy
        self.temperature = temperature
        self.space = env.action_space(None)

    def select(self, key: jax.Array, scores: jax.Array, greedy: bool) -> jax.Array:
        return select_action(key, scores, self.space, greedy, self.temperature)

    def act(self, key, state, obs, env_state, params) -> jax.Array:
        return self.select(key, self.scores(state, obs, env_state, params), self.greedy)


def out_shape(space: Any) -> tuple[int, ...]:
    """The shape of one row's :func:`action_scores`: ``(A,)`` or ``(2, *shape)``."""
    return (space.n,) if hasattr(space, "n") else (2, *space.shape)
