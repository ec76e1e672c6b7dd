"""The decision model: a pre-norm causal transformer with KV-cache decoding.

``DecisionModel`` embeds transitions (see ``embedding.py``), runs
``num_layers`` blocks (attention with RoPE and a sliding window of
``max_steps`` steps; FFN or T2MIR MoE in ``moe_layers``) and reads actions
with a head. Three entry points share the weights:

- ``model(obs, action, reward)``: AD / DT style, prediction for every step;
- ``model.predict_query(query_obs, ctx_...)``: DPT, prediction for the query
  from every context prefix;
- ``init_cache`` + ``decode`` (or ``decode_query`` + ``decode_transition``):
  one step at a time with a rolling KV cache, equal to the full pass;
- ``prefill``: the KV cache of the first ``upto`` (traced) steps of a
  sequence, encoded in causal pieces by ``lax`` loops (compiled size
  independent of the length; used to re-encode a context with new weights).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from agentrl.models.activations import FFN_ACTIVATIONS
from agentrl.models.attention import (
    CausalSelfAttention,
    KVCache,
    cache_slots,
    value_slot_axis,
    window_mean,
    window_mean_cumsum,
    window_mean_decode,
    window_mean_prefill,
    write_slots,
)
from agentrl.models.config import ModelConfig
from agentrl.models.embedding import TokenEmbedding
from agentrl.models.heads import ActionHead, ModelOutput
from agentrl.models.moe import T2MIRFeedForward
from agentrl.models.precision import dtype_of, mixed_linear


class MLP(nnx.Module):
    """Dense feed-forward ``d -> d_ff -> d``: ``fc2(act(fc1 h))``, ``act`` named
    by ``activation`` (:data:`~agentrl.models.activations.FFN_ACTIVATIONS`;
    ``dtype`` matmuls, float32 out); ``hidden_norm``: ``fc2(LN(act(fc1 h)))``
    (NormFormer's)."""

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        *,
        rngs,
        dtype=jnp.float32,
        activation: str = "gelu_tanh",
        hidden_norm: bool = False,
    ):
        self.fc1 = mixed_linear(d_model, d_ff, dtype, rngs=rngs)
        self.fc2 = mixed_linear(d_ff, d_model, dtype, rngs=rngs)
        self.activation = activation  # a name: static, and equal across models
        self.hidden_norm = nnx.LayerNorm(d_ff, rngs=rngs) if hidden_norm else None

    def __call__(self, h: jax.Array) -> jax.Array:
        hidden = FFN_ACTIVATIONS[self.activation](self.fc1(h))
        if self.hidden_norm is not None:
            hidden = self.hidden_norm(hidden)
        return self.fc2(hidden)


class Block(nnx.Module):
    """Pre-norm block: ``x + attn(ln(x))``, then ``x + ffn(ln(x))``."""

    def __init__(self, config: ModelConfig, moe: bool, *, rngs):
        c = config
        self.moe = moe
        self.sequence_routing = moe and c.task_routing == "sequence"
        self.ln1 = nnx.LayerNorm(c.d_model, rngs=rngs)
        self.reference = c.attention == "reference"
        self.attn = CausalSelfAttention(
            c.d_model,
            c.num_heads,
            c.rope_base,
            rngs=rngs,
            impl=c.attention,
            block=c.attention_block,
            sink=c.attention_sink,
            dtype=dtype_of(c.compute_dtype),
            dropout=c.attention_dropout,
            rope_period=c.rope_period,
            head_scaling=c.normformer,
        )
        self.ln2 = nnx.LayerNorm(c.d_model, rngs=rngs)
        if moe:
            self.ffn = T2MIRFeedForward(c, rngs=rngs)
        else:
            self.ffn = MLP(
                c.d_model,
                c.d_ff,
                rngs=rngs,
                dtype=dtype_of(c.compute_dtype),
                activation=c.ffn_activation,
                hidden_norm=c.normformer,
            )
        # residual dropout: on the attention's and the FFN's outputs
        self.drop = nnx.Dropout(c.residual_dropout_rate, rngs=rngs)
        # NormFormer's norm of the attention's output (created last: a model
        # without it draws the parameters it always did)
        self.attn_norm = nnx.LayerNorm(c.d_model, rngs=rngs) if c.normformer else None

    def _attended(self, y: jax.Array) -> jax.Array:
        """The attention's output as it joins the residual stream."""
        return y if self.attn_norm is None else self.attn_norm(y)

    def _ffn(self, x, h, task_in, deterministic):
        if self.moe:
            y, aux = self.ffn(h, task_in, deterministic)
        else:
            y, aux = self.ffn(h), {}
        return x + self.drop(y, deterministic=deterministic), aux

    def __call__(self, x, pos, window: int, deterministic: bool):
        """``x [B, N, d]``, ``pos [N]`` -> ``(x [B, N, d], aux)``."""
        y = self._attended(self.attn(self.ln1(x), pos, window, deterministic))
        x = x + self.drop(y, deterministic=deterministic)
        h = self.ln2(x)
        task_in = h
        if self.sequence_routing:
            if self.reference:
                task_in = window_mean(h, pos, window)
            else:  # pos = arange(T) in every full pass
                task_in = window_mean_cumsum(h, window)
        return self._ffn(x, h, task_in, deterministic)

    def decode(self, x, pos, k, v, r, slot_pos, window: int, offset: int):
        """Chunk ``x [B, C, d]`` -> ``(x, aux, k, v, r)`` with caches updated."""
        y, k, v = self.attn.decode(self.ln1(x), pos, k, v, slot_pos, window, offset)
        x = x + self._attended(y)
        h = self.ln2(x)
        task_in = h
        if self.sequence_routing:
            task_in = window_mean_decode(h, pos, r, slot_pos, window)
            r = write_slots(r, h, cache_slots(pos, r.shape[1], offset), axis=1)
        x, aux = self._ffn(x, h, task_in, True)
        return x, aux, k, v, r

    def prefill(self, x, lo, k, v, r, window: int):
        """Piece ``x [B, P, d]`` at slots ``lo..`` -> ``(x, k, v, r)`` (see
        :meth:`CausalSelfAttention.prefill`); the caches written in place."""
        y, k, v = self.attn.prefill(self.ln1(x), lo, k, v, window)
        x = x + self._attended(y)
        h = self.ln2(x)
        task_in = h
        if self.sequence_routing:
            task_in = window_mean_prefill(h, lo, r, window)
            task_in, r = jax.lax.optimization_barrier((task_in, r))
            r = jax.lax.dynamic_update_slice_in_dim(r, h.astype(r.dtype), lo, 1)
        x, _ = self._ffn(x, h, task_in, True)
        return x, k, v, r


class DecisionModel(nnx.Module):
    """Causal transformer over transitions; see the module docstring."""

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
        if config.max_steps is None:
            raise ValueError(
                "ModelConfig.max_steps is None: set it, or complete the config "
                "with agentrl.models.config.complete_model_config"
            )
        if config.positions == "episode" and config.episode_steps is None:
            raise ValueError(
                "ModelConfig.episode_steps is None with positions='episode': set "
                "it to the episodes' length in steps"
            )
        self.config = config
        c = config
        self.embed = TokenEmbedding(c, rngs=rngs)
        self.drop = nnx.Dropout(c.embedding_dropout_rate, rngs=rngs)  # on tokens
        self.blocks = nnx.List(
            [Block(c, i in c.moe_layers, rngs=rngs) for i in range(c.num_layers)]
        )
        self.ln_f = nnx.LayerNorm(c.d_model, rngs=rngs)
        self.head = ActionHead(c.d_model, c.action_size, c.head, rngs=rngs)
        if c.has_moe:  # T2MIR's bilinear W [E, E]: standard normal (torch.randn)
            w = jax.random.normal(rngs.params(), (c.task_experts, c.task_experts))
            self.contrastive_w = nnx.Param(w)

    @property
    def task_router(self):
        """The task-wise ``Router`` of the last MoE layer (EMA source)."""
        if not self.config.has_moe:
            raise ValueError("ModelConfig.moe_layers is empty: no task router")
        return self.blocks[max(self.config.moe_layers)].ffn.task_moe.router

    # -- shared trunk ----------------------------------------------------------
    def _aux(self, auxes: list[dict]) -> dict:
        dt = jnp.float32
        raw = sum((a["balance_loss"] for a in auxes), jnp.zeros((), dt))
        # Unweighted: the algorithm that trains the model weights it (T2MIR).
        out = {"balance_loss": raw}
        if auxes:
            last = auxes[-1]
            for key in ("task_router_logits", "task_router_input"):
                out[key] = last[key]
            out["token_gates"] = [a["token_gates"] for a in auxes]
            out["task_gates"] = [a["task_gates"] for a in auxes]
        return out

    def _trunk(self, x, pos, window: int, deterministic: bool):
        x = self.drop(x, deterministic=deterministic)
        auxes = []
        for block in self.blocks:
            if self.config.remat:  # recompute the block in the backward pass
                run = nnx.remat(lambda b, x: b(x, pos, window, deterministic))
                x, aux = run(block, x)
            else:
                x, aux = block(x, pos, window, deterministic)
            if aux:
                auxes.append(aux)
        return self.ln_f(x), self._aux(auxes)

    def _output(self, h, aux) -> ModelOutput:
        action, log_std = self.head(h)
        return ModelOutput(action=action, log_std=log_std, aux=aux)

    def _window(self, window: int | None) -> int:
        steps = self.config.max_steps if window is None else window
        return steps * self.config.tokens_per_step

    # -- full passes -----------------------------------------------------------
    def __call__(
        self,
        obs: jax.Array,
        action: jax.Array,
        reward: jax.Array,
        *,
        deterministic: bool = True,
        window: int | None = None,
    ) -> ModelOutput:
        """Predict ``a_t`` for every step from ``obs_<=t, action_<t, reward_<t``.

        Args:
          obs: ``[B, T]`` int32 or ``[B, T, obs_size]``.
          action: ``[B, T]`` int32 or ``[B, T, action_size]`` (a_t; only
            earlier actions are seen by prediction t).
          reward: ``[B, T]`` (r_t, after a_t).
          deterministic: False turns on dropout (embedding, residual,
            attention weights) and noisy gating (needs the ``dropout`` /
            ``noise`` streams, or ``default``, in ``rngs``).
          window: attention window in steps (default ``config.max_steps``);
            T may exceed it (sliding window, as in rolling decoding).

        Returns:
          ``ModelOutput`` with ``action [B, T, A]``.
        """
        c = self.config
        if c.token_layout == "transition":
            raise ValueError(
                "ModelConfig.token_layout='transition' is for predict_query; "
                "__call__ needs one of ('step', 'sar')"
            )
        x = self.embed.steps(obs, action, reward)
        pos = jnp.arange(x.shape[1], dtype=jnp.int32)
        h, aux = self._trunk(x, pos, self._window(window), deterministic)
        if c.token_layout == "sar":
            h = h[:, 0::3]
        return self._output(h, aux)

    def features(
        self, obs: jax.Array, action: jax.Array, reward: jax.Array
    ) -> jax.Array:
        """The trunk's final hidden states ``[B, T, d]`` (after ``ln_f``) of
        :meth:`__call__` ("step" layout, deterministic), before the action
        head: ``head(features(...))[0]`` is ``__call__(...).action``. For
        learners that put more heads on the shared trunk (AMAGO's critics)."""
        if self.config.token_layout != "step":
            raise ValueError(
                "DecisionModel.features needs ModelConfig.token_layout='step', "
                f"got {self.config.token_layout!r}"
            )
        x = self.embed.steps(obs, action, reward)
        pos = jnp.arange(x.shape[1], dtype=jnp.int32)
        return self._trunk(x, pos, self._window(None), True)[0]

    def predict_query(
        self,
        query_obs: jax.Array,
        ctx_obs: jax.Array,
        ctx_action: jax.Array,
        ctx_reward: jax.Array,
        ctx_next_obs: jax.Array,
        *,
        deterministic: bool = True,
    ) -> ModelOutput:
        """DPT: action for the query from every prefix of the context.

        Args:
          query_obs: ``[B, ...]``; ctx_*: ``[B, N, ...]``, ctx_reward ``[B, N]``.

        Returns:
          ``ModelOutput`` with ``action [B, N + 1, A]``: position 0 sees only
          the query, position ``i`` the query and the first ``i`` transitions.
        """
        c = self.config
        if c.token_layout != "transition":
            raise ValueError(
                "predict_query needs ModelConfig.token_layout='transition', "
                f"got {c.token_layout!r}"
            )
        n = ctx_obs.shape[1] + 1
        if n > c.max_steps:
            raise ValueError(
                f"predict_query: N + 1 = {n} tokens exceed ModelConfig.max_steps="
                f"{c.max_steps} (the query would leave the attention window)"
            )
        ctx = self.embed.transitions(ctx_obs, ctx_action, ctx_reward, ctx_next_obs)
        x = jnp.concatenate([self.embed.query(query_obs), ctx], axis=1)
        pos = jnp.arange(n, dtype=jnp.int32)
        h, aux = self._trunk(x, pos, self._window(None), deterministic)
        return self._output(h, aux)

    # -- cached decoding -------------------------------------------------------
    def init_cache(
        self, batch: int, max_steps: int | None = None, dtype=None
    ) -> KVCache:
        """Empty cache for ``batch`` sequences and a window of ``max_steps`` steps.

        Decoding attends to the last ``max_steps`` steps (default
        ``config.max_steps``): it equals ``model(..., window=max_steps)``.
        ``dtype`` of the keys and values defaults to ``config.compute_dtype``
        (the dtype the full pass's attention matmuls see them in); the MoE
        router inputs are always float32.
        """
        c = self.config
        kv_dtype = dtype_of(c.compute_dtype) if dtype is None else dtype
        steps = c.max_steps if max_steps is None else max_steps
        size = steps * c.tokens_per_step
        k_shape = (batch, c.num_heads, c.head_dim, size)
        if value_slot_axis(c.head_dim) == 3:  # transposed (see KVCache)
            v_shape = k_shape
        else:
            v_shape = (batch, c.num_heads, size, c.head_dim)
        keys = tuple(jnp.zeros(k_shape, kv_dtype) for _ in range(c.num_layers))
        values = tuple(jnp.zeros(v_shape, kv_dtype) for _ in range(c.num_layers))
        routed = [b.sequence_routing for b in self.blocks]
        r_shape = (batch, size, c.d_model)
        r_dtype = jnp.float32 if dtype is None else dtype
        router = tuple(jnp.zeros(r_shape, r_dtype) if s else None for s in routed)
        return KVCache(
            keys=keys,
            values=values,
            router_inputs=router,
            slot_pos=jnp.full((size,), -1, jnp.int32),
            next_pos=jnp.zeros((), jnp.int32),
        )

    def prefill(
        self,
        obs: jax.Array,
        action: jax.Array,
        reward: jax.Array,
        upto: jax.Array,
        *,
        piece: int = 128,
        max_steps: int | None = None,
        cache: KVCache | None = None,
    ) -> tuple[jax.Array, KVCache]:
        """The KV cache of the first ``upto`` steps of a sequence ("step" layout).

        Encodes the steps in causal pieces of ``piece`` tokens with ``lax``
        loops: a loop over the ``ceil(upto / piece)`` pieces (trip count
        traced), each running the blocks on its tokens and attending to the
        cache slots before it one ``piece``-slot block at a time
        (:meth:`CausalSelfAttention.prefill`). The work is the causal
        prefix's (``~upto**2 / 2`` token pairs), every cache write is one
        in-place ``dynamic_update_slice``, and the compiled program's size
        does not grow with ``T`` (one piece's program, looped).

        Args:
          obs, action, reward: ``[B, T, ...]`` as for ``__call__``.
          upto: int32 scalar (may be traced), ``0 <= upto <= T``.
          piece: tokens per piece; must divide ``T``.
          max_steps: the cache's window in steps (default
            ``config.max_steps``), ``>= T``.
          cache: a cache whose buffers to write into (e.g. one a loop
            carries: reused in place, no new buffer to fill and copy back;
            its old contents are never read). Default: a new one of
            ``max_steps`` steps.

        Returns:
          ``(action [B, T, A], cache)``: the outputs of the first ``upto``
          steps (those of the later steps are zero), equal to
          ``model(..., window=max_steps).action`` there; and the cache of
          those steps (later slots marked empty; the last piece's slots
          past ``upto`` may hold keys, never attended), equal to ``upto``
          calls of :meth:`decode`, which can go on from it.
        """
        c = self.config
        b, t = action.shape[:2]
        cache = self._prefill_cache(b, t, piece, max_steps, cache)
        window = cache.capacity
        tokens = self.embed.steps(obs, action, reward)
        out = jnp.zeros((b, t, c.action_size), jnp.float32)
        upto = jnp.asarray(upto, jnp.int32)

        def one(i, carry):
            return self._prefill_piece(tokens, i * piece, piece, window, carry)

        pieces = (upto + piece - 1) // piece
        carry = (cache.keys, cache.values, cache.router_inputs, out)
        keys, values, router, out = jax.lax.fori_loop(0, pieces, one, carry)
        steps = jnp.arange(t, dtype=jnp.int32)
        out = jnp.where((steps < upto)[None, :, None], out, 0.0)
        slots = jnp.arange(window, dtype=jnp.int32)
        cache = KVCache(keys, values, router, jnp.where(slots < upto, slots, -1), upto)
        return out, cache

    def _prefill_cache(
        self, b: int, t: int, piece: int, max_steps: int | None, cache: KVCache | None
    ) -> KVCache:
        """The cache :meth:`prefill` writes into, its arguments checked."""
        c = self.config
        if c.token_layout != "step":
            raise ValueError(
                "DecisionModel.prefill needs ModelConfig.token_layout='step', "
                f"got {c.token_layout!r}"
            )
        if t % piece:
            raise ValueError(f"prefill: piece={piece} must divide the {t} steps")
        if cache is None:
            cache = self.init_cache(b, max_steps)
        window = cache.capacity
        if window < t:
            raise ValueError(
                f"prefill: {t} steps exceed the cache's max_steps={window}"
            )
        return cache

    def _prefill_piece(self, tokens, lo, piece: int, window: int, carry):
        """The piece of ``tokens`` at ``lo`` through the blocks: ``carry``
        ``(keys, values, router inputs, out)`` with its cache and outputs."""
        keys, values, router, out = carry
        x = jax.lax.dynamic_slice_in_dim(tokens, lo, piece, 1)
        new = [], [], []
        for j, block in enumerate(self.blocks):
            x, *kvr = block.prefill(x, lo, keys[j], values[j], router[j], window)
            for acc, a in zip(new, kvr, strict=True):
                acc.append(a)
        action_out = self.head(self.ln_f(x))[0].astype(out.dtype)
        out = jax.lax.dynamic_update_slice_in_dim(out, action_out, lo, 1)
        return (*(tuple(a) for a in new), out)

    def _decode_chunk(self, cache: KVCache, x, pos):
        window = cache.capacity
        # chunks of C tokens start at C t - (C - 1): shift slots by C - 1 so
        # each chunk is one contiguous write that never wraps the ring
        offset = x.shape[1] - 1
        keys, values, router, auxes = [], [], [], []
        for i, block in enumerate(self.blocks):
            x, aux, k, v, r = block.decode(
                x,
                pos,
                cache.keys[i],
                cache.values[i],
                cache.router_inputs[i],
                cache.slot_pos,
                window,
                offset,
            )
            keys.append(k)
            values.append(v)
            router.append(r)
            if aux:
                auxes.append(aux)
        slot = cache_slots(pos, window, offset)
        slot_pos = jax.lax.dynamic_update_slice(cache.slot_pos, pos, (slot,))
        new = KVCache(
            tuple(keys), tuple(values), tuple(router), slot_pos, cache.next_pos
        )
        h = self.ln_f(x[:, -1])
        return self._output(h, self._aux(auxes)), new

    def decode(
        self,
        cache: KVCache,
        obs: jax.Array,
        prev_action: jax.Array,
        prev_reward: jax.Array,
    ) -> tuple[ModelOutput, KVCache]:
        """Append one step and predict its action ("step" / "sar" layouts).

        Args:
          cache: from ``init_cache`` or a previous ``decode``.
          obs: ``[B]`` int32 or ``[B, obs_size]``, the current observation.
          prev_action: ``[B]`` / ``[B, action_size]``, the action of the
            previous step; prev_reward ``[B]``. Ignored at the first step
            (pass zeros).

        Returns:
          ``(ModelOutput with action [B, A], new cache)``; equal to
          ``model(...)[:, t]`` over the steps so far (window = cache size).
          Jit it (donate the cache) via ``nnx.split``/``nnx.merge``.
        """
        c = self.config
        tps = c.tokens_per_step
        step = cache.next_pos // tps
        x = self.embed.decode_step(obs, prev_action, prev_reward, step)
        pos = cache.next_pos + jnp.arange(1 - tps, 1, dtype=jnp.int32)
        out, cache = self._decode_chunk(cache, x, pos)
        return out, cache._replace(next_pos=cache.next_pos + tps)

    def decode_query(
        self, cache: KVCache, query_obs: jax.Array
    ) -> tuple[ModelOutput, KVCache]:
        """DPT: start a cache with the query ``[B, ...]``; = predict_query[:, 0]."""
        x = self.embed.query(query_obs)
        pos = jnp.zeros((1,), jnp.int32)
        out, cache = self._decode_chunk(cache, x, pos)
        return out, cache._replace(next_pos=jnp.ones((), jnp.int32))

    def decode_transition(
        self,
        cache: KVCache,
        obs: jax.Array,
        action: jax.Array,
        reward: jax.Array,
        next_obs: jax.Array,
    ) -> tuple[ModelOutput, KVCache]:
        """DPT: append one context transition, predict for the cached query.

        Equals ``predict_query(...)[:, i]`` after ``i`` transitions, while the
        query is inside the window (``i + 1 <= cache capacity``).
        """
        x = self.embed.transitions(
            obs[:, None], action[:, None], reward[:, None], next_obs[:, None]
        )
        pos = cache.next_pos[None]
        out, cache = self._decode_chunk(cache, x, pos)
        return out, cache._replace(next_pos=cache.next_pos + 1)
