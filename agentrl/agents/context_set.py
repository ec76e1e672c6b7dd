"""DPT's model agent: the query's action from a context set of its own transitions.

Model contract: ``model.predict_query(query_obs [B, ...], ctx_obs [B, N,
...], ctx_action [B, N, ...], ctx_reward [B, N], ctx_next_obs [B, N, ...])
-> out`` with ``out.action [B, N + 1, A]`` (and ``out.log_std`` of a
Gaussian head, the same shape), where position ``i`` depends
only on the query and the first ``i`` context transitions; the cached
variant (bandits) ``decode_query`` and ``decode_transition``.

Protocol: the agent keeps a context of its own past ``(s, a, r, s')`` (the
last ``N``) and predicts the query's action at position ``count``.
``context_update="episode"`` adds an episode's transitions when it ends
(the reference Dark Room protocol: the current episode is not in context),
``"step"`` after every step (the bandit protocol), ``"none"`` keeps a fixed
context (offline evaluation).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agentrl.agents.agent import Step
from agentrl.agents.model_agents import (
    ScoredAgent,
    action_scores,
    out_shape,
    scores_at,
)
from agentrl.envs.base import env_horizon

CONTEXT_UPDATES = ("step", "episode", "none")


class Context(NamedTuple):
    """DPT transitions ``[B, N, ...]`` (``reward [B, N]``) and ``count [B]``."""

    obs: Any
    action: jax.Array
    reward: jax.Array
    next_obs: Any
    count: jax.Array

    @property
    def size(self) -> int:
        return self.reward.shape[-1]


def empty_context(env: Any, key: jax.Array, params: Any, size: int) -> Context:
    """Zeros shaped for ``env``: ``[B, size, ...]`` with ``B = key.shape[0]``."""
    batch = key.shape[0]
    obs_spec, _ = jax.eval_shape(jax.vmap(env.reset), key, params)
    space = env.action_space(None)
    zeros = lambda s: jnp.zeros((batch, size, *s.shape[1:]), s.dtype)  # noqa: E731
    obs = jax.tree.map(zeros, obs_spec)
    return Context(
        obs=obs,
        action=jnp.zeros((batch, size, *space.shape), space.dtype),
        reward=jnp.zeros((batch, size), jnp.float32),
        next_obs=obs,
        count=jnp.zeros((batch,), jnp.int32),
    )


def successor(step: Step) -> Any:
    """The ``s'`` a context holds for ``step`` ``[B, ...]``: the true final
    observation, except at a terminated step, where it is the next episode's
    first (``reset_obs``) as in training, whose contexts read the next
    stored observation there (the XLand DPT baseline's rule,
    :func:`agentrl.data.device_sampler.valid_tables`; docs/fidelity.md item
    16). A step that is only truncated keeps its true final observation."""

    def pick(reset, final):
        ended = jnp.asarray(step.terminated, bool).reshape(-1)
        ended = ended.reshape(ended.shape + (1,) * (final.ndim - 1))
        return jnp.where(ended, reset, final)

    return jax.tree.map(pick, step.reset_obs, step.next_obs)


def append(ctx: Context, step: Step) -> Context:
    """Write one transition ``[B, ...]`` at position ``count`` (no overflow check)."""
    slot = jnp.arange(ctx.size)[None] == ctx.count[:, None]  # [B, N]

    def put(buf, x):
        x = jnp.asarray(x, buf.dtype).reshape(buf.shape[:1] + buf.shape[2:])
        mask = slot.reshape(slot.shape + (1,) * (buf.ndim - 2))
        return jnp.where(mask, x[:, None], buf)

    return Context(
        obs=jax.tree.map(put, ctx.obs, step.obs),
        action=put(ctx.action, step.action),
        reward=put(ctx.reward, step.reward),
        next_obs=jax.tree.map(put, ctx.next_obs, successor(step)),
        count=ctx.count + 1,
    )


def commit(ctx: Context, new: Context) -> Context:
    """The last ``ctx.size`` of ``ctx[:count] ++ new[:new.count]``, per row."""
    size, extra = ctx.size, new.size
    total = ctx.count + new.count
    j = jnp.maximum(total - size, 0)[:, None] + jnp.arange(size)[None]  # [B, N]
    src = jnp.where(j < ctx.count[:, None], j, size + j - ctx.count[:, None])
    src = jnp.clip(src, 0, size + extra - 1)

    def gather(a, b):
        cat = jnp.concatenate([a, b], axis=1)
        idx = src.reshape(src.shape + (1,) * (cat.ndim - 2))
        return jnp.take_along_axis(cat, idx, axis=1)

    return Context(
        obs=jax.tree.map(gather, ctx.obs, new.obs),
        action=gather(ctx.action, new.action),
        reward=gather(ctx.reward, new.reward),
        next_obs=jax.tree.map(gather, ctx.next_obs, new.next_obs),
        count=jnp.minimum(total, size).astype(jnp.int32),
    )


class DPTState(NamedTuple):
    """The context the model conditions on and the running episode's steps."""

    context: Context
    pending: Context


class DPTModelAgent(ScoredAgent):
    """Decision-Pretrained Transformer acting on its own context set (batched)."""

    def __init__(
        self,
        model: Any,
        env: Any,
        context_size: int | None = None,
        context_update: str = "step",
        greedy: bool = False,
        temperature: float = 1.0,
        context: Context | None = None,
    ):
        if context_update not in CONTEXT_UPDATES:
            raise ValueError(
                f"context_update must be one of {CONTEXT_UPDATES}, "
                f"got {context_update!r}"
            )
        super().__init__(model, env, greedy, temperature)
        self.context = context
        if context is not None:
            context_size = context.size
        self.context_size = int(context_size or env.horizon)
        self.context_update = context_update

    def init(self, key: jax.Array, params: Any) -> DPTState:
        pending_size = env_horizon(self.env) if self.context_update == "episode" else 1
        pending = empty_context(self.env, key, params, pending_size)
        if self.context is None:
            context = empty_context(self.env, key, params, self.context_size)
        else:
            if self.context.count.shape[0] != key.shape[0]:
                raise ValueError(
                    f"fixed DPT context has {self.context.count.shape[0]} rows, "
                    f"the batch has {key.shape[0]} tasks (offline evaluation "
                    "needs the batched driver run_batched_agent)"
                )
            context = self.context
        return DPTState(context, pending)

    def scores(self, state: DPTState, obs, env_state, params) -> jax.Array:
        ctx = state.context
        out = self.model.get().predict_query(
            obs, ctx.obs, ctx.action, ctx.reward, ctx.next_obs
        )
        # every position's scores, then the query's at ``count``: a
        # Gaussian's mean and log std of the same position
        pos = jnp.minimum(ctx.count, ctx.size)
        return scores_at(action_scores(out, self.space), pos)

    def update(self, state: DPTState, step: Step) -> DPTState:
        if self.context_update == "none":
            return state
        pending = append(state.pending, step)
        committed = commit(state.context, pending)
        if self.context_update == "step":
            return DPTState(committed, pending._replace(count=pending.count * 0))
        done = jnp.asarray(step.done).reshape(-1)
        pick = lambda a, b: jnp.where(  # noqa: E731
            done.reshape(done.shape + (1,) * (a.ndim - 1)), a, b
        )
        context = jax.tree.map(pick, committed, state.context)
        return DPTState(
            context, pending._replace(count=jnp.where(done, 0, pending.count))
        )


class DPTCachedState(NamedTuple):
    """KV cache and the scores of the next pull (``[B, A]`` logits, or
    :func:`~agentrl.agents.model_agents.action_scores`' mean and log std)."""

    cache: Any
    scores: jax.Array


class DPTCachedModelAgent(ScoredAgent):
    """DPT on a growing context with a fixed query, decoded with a KV cache.

    The bandit protocol: the query (the bandit's one observation) is the
    first token and every pull appends one transition, so step ``t`` is one
    ``decode_transition`` instead of a forward pass over ``t`` transitions.
    Equals :class:`DPTModelAgent` with ``context_update="step"`` while the
    context has not overflowed, which :func:`make_model_agent` ensures by
    using it only when the whole evaluation fits the context and the
    observation never changes (bandits).

    The query is the first observation (a bandit's only one): ``start``
    decodes it, once before the driver's scan, so every pull is exactly one
    model call in ``update`` and no step branches on being the first (a
    ``lax.cond`` whose branches decode different numbers of tokens made XLA
    copy every layer's cache per pull). ``start`` must run before the first
    ``act`` (the driver calls it).
    """

    def __init__(
        self,
        model: Any,
        env: Any,
        context_size: int,
        greedy: bool = False,
        temperature: float = 1.0,
    ):
        super().__init__(model, env, greedy, temperature)
        self.context_size = int(context_size)

    def init(self, key: jax.Array, params: Any) -> DPTCachedState:
        batch = key.shape[0]
        cache = self.model.get().init_cache(batch, self.context_size + 1)
        scores = jnp.zeros((batch, *out_shape(self.space)), jnp.float32)
        return DPTCachedState(cache, scores)

    def start(self, state: DPTCachedState, obs: Any) -> DPTCachedState:
        """Decode the query ``obs [B, ...]`` (the first token)."""
        out, cache = self.model.get().decode_query(state.cache, obs)
        return DPTCachedState(cache, action_scores(out, self.space))

    def scores(self, state: DPTCachedState, obs, env_state, params) -> jax.Array:
        return state.scores

    def update(self, state: DPTCachedState, step: Step) -> DPTCachedState:
        action = jnp.asarray(step.action, self.space.dtype)
        action = action.reshape(action.shape[:1] + self.space.shape)
        reward = jnp.asarray(step.reward, jnp.float32).reshape(-1)
        out, cache = self.model.get().decode_transition(
            state.cache, step.obs, action, reward, successor(step)
        )
        return DPTCachedState(cache, action_scores(out, self.space))
