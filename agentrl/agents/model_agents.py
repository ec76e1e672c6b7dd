"""Trained decision models acting online, as batched agents (AD and DPT).

Both agents are :class:`~agentrl.evaluate.agents.BatchedAgent` s: one model
call per step serves every task (the batch axis is the task axis). Use
:func:`agentrl.evaluate.agents.per_task` to get a per-task ``Agent`` for
``run_agent_on_tasks`` (batch of one; same history for the same key).

Model contract (what ``agentrl.models`` is expected to provide; a duck-typed
object or a Flax NNX module, which is split once and merged per step):

- AD: ``model.init_cache(batch, max_steps) -> cache`` and the jittable
  ``model.decode(cache, obs [B, ...], prev_action [B, ...], prev_reward [B])
  -> (out, cache)``, ``out.action`` = logits ``[B, A]`` for the action to take
  in ``obs`` (the mean ``[B, *action_shape]`` for continuous actions). One
  token per step; ``decode`` rolls its window when the context outgrows the
  cache. Decoding is functional: the model must not mutate itself.
- DPT: ``model.predict_query(query_obs [B, ...], ctx_obs [B, N, ...],
  ctx_action [B, N, ...], ctx_reward [B, N], ctx_next_obs [B, N, ...]) -> out``
  with ``out.action [B, N + 1, A]``, where position ``i`` depends only on the
  query and the first ``i`` context transitions.

AD protocol: the context runs across episodes; at step ``t`` the model reads
``(obs_t, a_{t-1}, r_{t-1})``, with zeros before the first step and the
previous action/reward carried over episode boundaries (as
:class:`agentrl.envs.MultiEpisodeTrial`). ``start`` decodes the first
observation's token (once, before the driver's scan) and ``update`` the
*next* one, so every step in the scan is exactly one ``decode`` and no step
branches on being the first.

DPT protocol: the agent keeps a context of its own past ``(s, a, r, s')``
(the last ``N``) and predicts the query's action at position ``count``.
``context_update="episode"`` adds an episode's transitions when it ends (the
reference Dark Room protocol: the current episode is not in context),
``"step"`` after every step (the bandit protocol), ``"none"`` keeps a fixed
context (offline evaluation).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agentrl.agents.agent import Step
from agentrl.envs.base import env_horizon

CONTEXT_UPDATES = ("step", "episode", "none")


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


def _out_shape(space: Any) -> tuple[int, ...]:
    return (space.n,) if hasattr(space, "n") else tuple(space.shape)


class ADState(NamedTuple):
    """KV cache, last action/reward ``[B, ...]`` and the next logits ``[B, A]``."""

    cache: Any
    prev_action: jax.Array
    prev_reward: jax.Array
    logits: jax.Array


class ADModelAgent(ScoredAgent):
    """Algorithm Distillation acting online with a KV cache (batched).

    ``start`` must run before the first ``act`` (the driver calls it): it
    decodes the first observation, whose logits ``act`` then uses.
    """

    def __init__(
        self,
        model: Any,
        env: Any,
        cache_steps: int,
        greedy: bool = False,
        temperature: float = 1.0,
    ):
        self.model = split_model(model)
        self.env = env
        self.cache_steps = int(cache_steps)
        self.greedy = greedy
        self.temperature = temperature
        self.space = env.action_space(None)

    def init(self, key: jax.Array, params: Any) -> ADState:
        batch = key.shape[0]
        model = self.model.get()
        return ADState(
            cache=model.init_cache(batch, self.cache_steps),
            prev_action=jnp.zeros((batch, *self.space.shape), self.space.dtype),
            prev_reward=jnp.zeros((batch,), jnp.float32),
            logits=jnp.zeros((batch, *_out_shape(self.space)), jnp.float32),
        )

    def start(self, state: ADState, obs: Any) -> ADState:
        """Decode the first token ``(obs [B, ...], zero action, zero reward)``."""
        out, cache = self.model.get().decode(
            state.cache, obs, state.prev_action, state.prev_reward
        )
        return state._replace(cache=cache, logits=out.action.astype(jnp.float32))

    def scores(self, state: ADState, obs, env_state, params) -> jax.Array:
        return state.logits

    def update(self, state: ADState, step: Step) -> ADState:
        action = jnp.asarray(step.action, self.space.dtype).reshape(
            state.prev_action.shape
        )
        reward = jnp.asarray(step.reward, jnp.float32).reshape(state.prev_reward.shape)
        # one decode, the same at every step (the first token is ``start``'s),
        # so the cache is updated in place with no branch around it
        out, cache = self.model.get().decode(
            state.cache, step.reset_obs, action, reward
        )
        return ADState(cache, action, reward, out.action.astype(jnp.float32))


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
        next_obs=jax.tree.map(put, ctx.next_obs, step.next_obs),
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
        self.model = split_model(model)
        self.env = env
        self.context = context
        if context is not None:
            context_size = context.size
        self.context_size = int(context_size or env.horizon)
        self.context_update = context_update
        self.greedy = greedy
        self.temperature = temperature
        self.space = env.action_space(None)

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
        pos = jnp.minimum(ctx.count, ctx.size).reshape(-1, 1, 1)
        return jnp.take_along_axis(out.action, pos, axis=1)[:, 0]

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
    """KV cache and the logits ``[B, A]`` of the next pull."""

    cache: Any
    logits: jax.Array


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
        self.model = split_model(model)
        self.env = env
        self.context_size = int(context_size)
        self.greedy = greedy
        self.temperature = temperature
        self.space = env.action_space(None)

    def init(self, key: jax.Array, params: Any) -> DPTCachedState:
        batch = key.shape[0]
        cache = self.model.get().init_cache(batch, self.context_size + 1)
        logits = jnp.zeros((batch, *_out_shape(self.space)), jnp.float32)
        return DPTCachedState(cache, logits)

    def start(self, state: DPTCachedState, obs: Any) -> DPTCachedState:
        """Decode the query ``obs [B, ...]`` (the first token)."""
        out, cache = self.model.get().decode_query(state.cache, obs)
        return DPTCachedState(cache, out.action.astype(jnp.float32))

    def scores(self, state: DPTCachedState, obs, env_state, params) -> jax.Array:
        return state.logits

    def update(self, state: DPTCachedState, step: Step) -> DPTCachedState:
        action = jnp.asarray(step.action, self.space.dtype)
        action = action.reshape(action.shape[:1] + self.space.shape)
        reward = jnp.asarray(step.reward, jnp.float32).reshape(-1)
        out, cache = self.model.get().decode_transition(
            state.cache, step.obs, action, reward, step.next_obs
        )
        return DPTCachedState(cache, out.action.astype(jnp.float32))


def rolling_cache_agent(
    model: Any, env: Any, config: Any, agent: Any = None, **settings: Any
) -> Any:
    """The batched agent of a model acting one token per step on a rolling KV
    cache of ``config.model.max_steps`` (AD's, transformer PPO's; DT's with
    ``agent=DTModelAgent`` and its ``settings``), by the acting rule
    ``config.eval.acting`` at ``config.eval.temperature``."""
    from agentrl.agents.acting import acting_agent

    agent = ADModelAgent if agent is None else agent
    model = split_model(model)  # one handle for the acting rule's agents
    return acting_agent(
        lambda greedy: agent(
            model,
            env,
            config.model.max_steps,
            greedy=greedy,
            temperature=config.eval.temperature,
            **settings,
        ),
        config.eval.acting,
    )
