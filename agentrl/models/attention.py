"""Causal self-attention with rotary positions, a sliding window and a KV cache.

Token positions are absolute integers. A query at position ``p`` attends to
keys at positions ``q`` with ``p - window < q <= p`` (and ``q >= 0``; negative
positions mark empty or placeholder slots). The full pass builds that mask
over ``[T, T]``; the cached pass keeps a ring buffer of ``S`` slots (slot =
position mod ``S``) that remembers the position held by each slot, so the
two compute the same function whenever ``window <= S``.

Decoding appends a chunk of ``C`` tokens (1 for the "step" and "transition"
layouts, 3 for "sar"). Scores against the cache and against the chunk are
computed separately and joined before the softmax, so the cache is never
copied and the chunk may overwrite the slots it evicts.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

NEG_INF = -1e30  # finite: a fully masked row gives uniform weights, never NaN


class KVCache(NamedTuple):
    """Decoding state of a :class:`~agentrl.models.DecisionModel` (a pytree).

    Attributes:
      keys, values: per layer ``[B, H, S, Dh]`` (keys stored RoPE-rotated;
        head-major so attention reads the cache without a transpose).
      router_inputs: per layer ``[B, S, d]`` MoE input kept for sequence-mean
        task routing, ``None`` for layers that do not need it.
      slot_pos: ``[S]`` int32 token position held by each slot (< 0: empty).
      next_pos: int32 scalar, the token position of the next observation
        token (``t`` for "step", ``3 t`` for "sar", next token for
        "transition"); ``next_pos // tokens_per_step`` is the step count.
    """

    keys: tuple
    values: tuple
    router_inputs: tuple
    slot_pos: jax.Array
    next_pos: jax.Array

    @property
    def capacity(self) -> int:
        """Number of token slots ``S`` (the attention window when decoding)."""
        return self.slot_pos.shape[0]


def window_mask(q_pos: jax.Array, k_pos: jax.Array, window: int) -> jax.Array:
    """``[Tq, Tk]`` bool: key visible to query (causal, inside the window)."""
    q = q_pos[:, None]
    k = k_pos[None, :]
    return (k <= q) & (k > q - window) & (k >= 0)


def rope(x: jax.Array, pos: jax.Array, base: float) -> jax.Array:
    """Rotate ``x [B, T, H, Dh]`` by positions ``pos [T]`` (half-split RoPE)."""
    half = x.shape[-1] // 2
    inv_freq = base ** (-jnp.arange(half, dtype=jnp.float32) / half)
    ang = pos.astype(jnp.float32)[:, None] * inv_freq[None, :]  # [T, half]
    cos = jnp.cos(ang)[None, :, None, :].astype(x.dtype)
    sin = jnp.sin(ang)[None, :, None, :].astype(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


class CausalSelfAttention(nnx.Module):
    """Multi-head causal self-attention with RoPE (fused QKV projection)."""

    def __init__(self, d_model: int, num_heads: int, rope_base: float, *, rngs):
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.rope_base = rope_base
        self.qkv = nnx.Linear(d_model, 3 * d_model, rngs=rngs)
        self.out = nnx.Linear(d_model, d_model, rngs=rngs)

    def _project(self, x: jax.Array, pos: jax.Array):
        b, t, _ = x.shape
        q, k, v = jnp.split(self.qkv(x), 3, axis=-1)
        shape = (b, t, self.num_heads, self.head_dim)
        q, k, v = (a.reshape(shape) for a in (q, k, v))
        q = rope(q, pos, self.rope_base) / math.sqrt(self.head_dim)
        return q, rope(k, pos, self.rope_base), v

    def _merge(self, y: jax.Array) -> jax.Array:
        b, t = y.shape[:2]
        return self.out(y.reshape(b, t, -1))

    def __call__(self, x: jax.Array, pos: jax.Array, window: int) -> jax.Array:
        """Full pass: ``x [B, T, d]``, ``pos [T]`` -> ``[B, T, d]``."""
        q, k, v = self._project(x, pos)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k)
        s = jnp.where(window_mask(pos, pos, window), s, NEG_INF)
        p = jax.nn.softmax(s, axis=-1)
        return self._merge(jnp.einsum("bhqk,bkhd->bqhd", p, v))

    def decode(
        self,
        x: jax.Array,
        pos: jax.Array,
        k_cache: jax.Array,
        v_cache: jax.Array,
        slot_pos: jax.Array,
        window: int,
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Attend a chunk ``x [B, C, d]`` at ``pos [C]`` to cache ``[B, H, S, Dh]``.

        Returns ``(y [B, C, d], k_cache, v_cache)`` with the chunk written at
        slots ``pos mod S``; the caller updates ``slot_pos``.
        """
        q, k, v = self._project(x, pos)
        s_cache = jnp.einsum("bqhd,bhkd->bhqk", q, k_cache)
        s_new = jnp.einsum("bqhd,bkhd->bhqk", q, k)
        s_cache = jnp.where(window_mask(pos, slot_pos, window), s_cache, NEG_INF)
        s_new = jnp.where(window_mask(pos, pos, window), s_new, NEG_INF)
        p = jax.nn.softmax(jnp.concatenate([s_cache, s_new], axis=-1), axis=-1)
        size = k_cache.shape[2]
        y = jnp.einsum("bhqk,bhkd->bqhd", p[..., :size], v_cache)
        y = y + jnp.einsum("bhqk,bkhd->bqhd", p[..., size:], v)
        k_cache = _write_slots(k_cache, k.swapaxes(1, 2), pos)
        v_cache = _write_slots(v_cache, v.swapaxes(1, 2), pos)
        return self._merge(y), k_cache, v_cache


def _write_slots(cache: jax.Array, chunk: jax.Array, pos: jax.Array) -> jax.Array:
    """Write ``chunk [B, H, C, Dh]`` into ``cache [B, H, S, Dh]`` at ``pos mod S``.

    A one-token chunk (every step of "step"-layout decoding) is a
    ``dynamic_update_slice``, which XLA does in place inside the decoding
    scan; a general index scatter there costs a copy of the whole cache.
    """
    chunk = chunk.astype(cache.dtype)
    size = cache.shape[2]
    if chunk.shape[2] == 1:
        slot = jnp.mod(pos[0], size).astype(jnp.int32)
        zero = jnp.zeros((), jnp.int32)
        return jax.lax.dynamic_update_slice(cache, chunk, (zero, zero, slot, zero))
    return cache.at[:, :, jnp.mod(pos, size)].set(chunk)


def window_mean(x: jax.Array, pos: jax.Array, window: int) -> jax.Array:
    """Causal windowed mean ``[B, T, d]``: at ``t`` the mean of visible tokens."""
    m = window_mask(pos, pos, window).astype(x.dtype)
    return jnp.einsum("qk,bkd->bqd", m, x) / m.sum(-1)[None, :, None]


def window_mean_decode(
    x: jax.Array, pos: jax.Array, cache_x: jax.Array, slot_pos: jax.Array, window: int
) -> jax.Array:
    """Cached :func:`window_mean` for a chunk ``x [B, C, d]`` at ``pos [C]``."""
    mc = window_mask(pos, slot_pos, window).astype(x.dtype)
    mn = window_mask(pos, pos, window).astype(x.dtype)
    total = jnp.einsum("qk,bkd->bqd", mc, cache_x) + jnp.einsum("qk,bkd->bqd", mn, x)
    count = jnp.maximum(mc.sum(-1) + mn.sum(-1), 1.0)
    return total / count[None, :, None]
