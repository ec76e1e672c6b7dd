"""Causal self-attention with rotary positions, a sliding window and a KV cache.

Token positions are absolute integers. A query at position ``p`` attends to
keys at positions ``q`` with ``p - window < q <= p`` (and ``q >= 0``; negative
positions mark empty or placeholder slots). The full pass is flash attention
in pure JAX (:func:`blockwise_attention`): one query block at a time over
only the keys its window can see, a few (batch, head) pairs at a time so
each score tile stays in cache, with a hand-written backward pass that
recomputes the tiles (never a ``[T, T]`` array); the reference
(:func:`masked_attention`) masks the whole ``[T, T]`` score matrix and is
kept, selectable, for tests. The cached pass keeps a ring buffer of ``S``
slots (slot = position + offset mod ``S``) that remembers the position held
by each slot, so the two compute the same function whenever ``window <= S``.

Decoding appends a chunk of ``C`` tokens (1 for the "step" and "transition"
layouts, 3 for "sar"). Scores against the cache, the chunk and the sink are
computed separately and share one softmax whose max and normaliser are
reduced part by part (never concatenated), so the cache is read once and
never copied, and the chunk (one in-place ``dynamic_update_slice``) may
overwrite the slots it evicts. Keys are stored transposed, ``[B, H, Dh,
S]``; values too for heads narrower than :data:`VALUES_TRANSPOSED_BELOW`
(:func:`value_slot_axis`).

Prefill (:meth:`CausalSelfAttention.prefill`) encodes a piece of ``P``
tokens at slots ``[lo, lo + P)`` of a cache whose slots are the positions
(``lo`` traced): the piece attends causally to itself and, one ``P``-slot
key block at a time in a ``lax.fori_loop`` (flash-style online softmax), to
the slots before it (masked by the window). Its work is proportional to the
causal prefix and its compiled size does not depend on the cache length.

Mixed precision: the score and value matmuls take their operands in the
dtype of ``q, k, v`` (bfloat16 under ``compute_dtype="bfloat16"``) and
accumulate and return float32 (``preferred_element_type``), their backward
in that dtype too (:mod:`agentrl.models.precision`); the masked softmax is
always float32.

Optional Sink-KV (ReLIC): a learned per-layer, per-head key and value that
every query sees, position-free (no RoPE), so a head can put its attention
weight on "nothing"; it joins the softmax as one more column.

Optional dropout on the attention weights (training's full pass only;
:class:`WeightDropout`): each weight, the sink's included, is kept with
probability ``1 - rate`` and scaled by ``1 / (1 - rate)`` after the softmax
(its normaliser is the undropped one, as ``torch.nn.MultiheadAttention``'s
``dropout``). The keep mask is drawn per (batch, head) group and per query
block of the blockwise tiling, from ``fold_in(group key, block index)``
(:func:`_tile_keep`): the blockwise pass draws each tile's mask where it
computes the tile and draws it again in its hand-written backward pass, and
the reference assembles the same tiles into its ``[T, T]`` mask, so the two
paths drop the same weights (given the same key and ``block``) and agree in
outputs and gradients. Decoding and prefill never drop.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from agentrl.models.precision import mixed_einsum, mixed_linear, mixed_matmul

NEG_INF = -1e30  # finite: a fully masked row gives uniform weights, never NaN
F32 = jnp.float32
#: values are cached transposed, ``[B, H, Dh, S]``, for heads narrower than
#: this, else ``[B, H, S, Dh]``: XLA:CPU runs ``p V`` ~1.7x faster over the
#: transposed layout with 8-wide heads (T2MIR's shape) and ~1.4x slower with
#: 32-wide ones (DPT's bandit model, 200 tasks); measured at those two widths
VALUES_TRANSPOSED_BELOW = 32


class KVCache(NamedTuple):
    """Decoding state of a :class:`~agentrl.models.DecisionModel` (a pytree).

    Attributes:
      keys: per layer ``[B, H, Dh, S]``, RoPE-rotated and stored transposed
        so that the score ``q K`` is a plain matmul (no per-step transpose).
      values: per layer ``[B, H, Dh, S]`` (transposed too) for heads
        narrower than :data:`VALUES_TRANSPOSED_BELOW`, else ``[B, H, S,
        Dh]``; :func:`value_slot_axis` says which axis holds the slots.
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


def _sink_scores(q: jax.Array, sink_k: jax.Array) -> jax.Array:
    """Scores of ``q [B, T, H, Dh]`` on the sink key ``[H, Dh]``: ``[B, H, T, 1]``."""
    sink_k = sink_k.astype(q.dtype)
    s = mixed_einsum("bqhd,hd->bhq", q, sink_k)
    return s[..., None]


def _sink_values(p_sink: jax.Array, sink_v: jax.Array) -> jax.Array:
    """Sink weights ``[B, H, T, 1]`` times values ``[H, Dh]``: ``[B, T, H, Dh]``."""
    return jnp.einsum("bhq,hd->bqhd", p_sink[..., 0], sink_v.astype(F32))


class WeightDropout(NamedTuple):
    """Dropout on the attention weights of a training pass.

    Attributes:
      key: a typed PRNG key; every (batch, head) group gets its own
        (``split(key, B * H)``) and every query block of a group draws its
        keep mask from ``fold_in(group key, block index)``.
      rate: probability of dropping a weight, in ``(0, 1)``.
    """

    key: jax.Array
    rate: float


def _group_keys(dropout: WeightDropout | None, groups: int):
    """One key per (batch, head) group ``[B H]`` (``None`` without dropout)."""
    if dropout is None:
        return None
    return jax.random.split(dropout.key, groups)


def _tile_keep(keys, index: int, rate: float, shape: tuple[int, int]) -> jax.Array:
    """Keep mask ``[c, *shape]`` of query block ``index`` for group keys ``[c]``.

    ``shape`` is ``(rows, keys [+ 1 for the sink])``: the tile's key span
    ``[k0, q1)`` of :func:`_query_spans`, then the sink's column.
    """

    def one(key):
        return jax.random.bernoulli(jax.random.fold_in(key, index), 1.0 - rate, shape)

    return jax.vmap(one)(keys)


def _weight_keep(keys, t: int, window: int, block: int, rate: float, sink: bool):
    """The whole ``[G, T, T (+ 1)]`` keep mask of :func:`_tile_keep`'s tiles.

    Each query block's tile lands on its key span ``[k0, q1)`` (False
    elsewhere: those weights are zero anyway) and the sink's column last.
    """
    rows = []
    for index, (q0, q1, k0) in enumerate(_query_spans(t, window, block)):
        span = q1 - k0
        tile = _tile_keep(keys, index, rate, (q1 - q0, span + int(sink)))
        row = jnp.pad(tile[..., :span], ((0, 0), (0, 0), (k0, t - q1)))
        if sink:
            row = jnp.concatenate([row, tile[..., span:]], axis=-1)
        rows.append(row)
    return jnp.concatenate(rows, axis=1)


def _drop(w: jax.Array, keep: jax.Array | None, rate: float) -> jax.Array:
    """``w`` where ``keep`` (scaled by ``1 / (1 - rate)``), else 0."""
    if keep is None:
        return w
    return jnp.where(keep, w / (1.0 - rate), 0.0)


def masked_attention(
    q,
    k,
    v,
    q_pos,
    k_pos,
    window: int,
    sink=None,
    dropout: WeightDropout | None = None,
    block: int = 128,
) -> jax.Array:
    """Softmax attention of ``q [B, Tq, H, Dh]`` over ``k, v [B, Tk, H, Dh]``.

    The reference: materialises the ``[B, H, Tq, Tk]`` float32 scores, masks
    them with :func:`window_mask` and (``sink = (key [H, Dh], value [H, Dh])``)
    adds one always-visible sink column. Matmul operands in ``q``'s dtype,
    float32 accumulation, float32 softmax. Returns ``[B, Tq, H, Dh]`` float32.

    ``dropout`` (a full pass: ``q_pos = k_pos = arange(T)``) drops weights
    after the softmax with the mask :func:`blockwise_attention` draws with
    query blocks of ``block`` tokens (the same weights dropped).
    """
    s = mixed_einsum("bqhd,bkhd->bhqk", q, k)
    s = jnp.where(window_mask(q_pos, k_pos, window), s, NEG_INF)
    if sink is not None:
        s = jnp.concatenate([s, _sink_scores(q, sink[0])], axis=-1)
    p = jax.nn.softmax(s, axis=-1)
    tk = k.shape[1]
    if dropout is not None:
        b, t, h = q.shape[:3]
        if tk != t:
            raise ValueError(
                "masked_attention: dropout needs a full pass (as many keys as "
                f"queries), got {t} queries and {tk} keys"
            )
        keys = _group_keys(dropout, b * h)
        keep = _weight_keep(keys, t, window, block, dropout.rate, sink is not None)
        p = _drop(p, keep.reshape(b, h, *keep.shape[1:]), dropout.rate)
    pv = p[..., :tk].astype(v.dtype)
    y = mixed_einsum("bhqk,bkhd->bqhd", pv, v)
    if sink is not None:
        y = y + _sink_values(p[..., tk:], sink[1])
    return y


#: score elements of one (batch, head) chunk's tile: 2^18 float32 = 1 MiB,
#: what one core's L2 holds here; the tile's whole chain (scores, weights,
#: their gradients) then stays in cache instead of streaming through DRAM
TILE_ELEMENTS = 1 << 18
#: at most this many score elements in all (4 MiB), every group runs at once
#: and autodiff keeps the weights for the backward pass: where they fit in
#: cache anyway, recomputing them (and a loop over chunks) costs more than
#: it saves (the T = 80 AD Dark Room shape: ~1.2x slower chunked)
ONE_PASS_ELEMENTS = 1 << 20


def _query_spans(t: int, window: int, block: int) -> list[tuple[int, int, int]]:
    """``(q0, q1, k0)`` per query block: rows ``[q0, q1)`` see keys ``[k0, q1)``."""
    return [
        (q0, min(q0 + block, t), max(0, q0 - window + 1)) for q0 in range(0, t, block)
    ]


def _group_chunk(groups: int, rows: int, keys: int) -> int | None:
    """(Batch, head) groups per chunk of the flash pass, or ``None`` for one pass.

    On a CPU, past :data:`ONE_PASS_ELEMENTS` score elements in all: the
    largest divisor ``c`` of ``groups`` with ``c * rows * keys <=``
    :data:`TILE_ELEMENTS`. Else ``None``: every group at once, autodiff
    keeping the weights. An accelerator always takes one pass: its
    parallelism is across groups, and a loop over them would idle it.
    """
    if jax.default_backend() != "cpu" or groups * rows * keys <= ONE_PASS_ELEMENTS:
        return None
    fits = max(1, TILE_ELEMENTS // max(1, rows * keys))
    return max(c for c in range(1, groups + 1) if groups % c == 0 and c <= fits)


def masked_scores(q, k_t, q_pos, k_pos, window: int) -> jax.Array:
    """Float32 scores ``q k_t`` of queries ``[..., Q, Dh]`` on keys stored
    transposed ``[..., Dh, K]``, masked (:data:`NEG_INF`) where
    :func:`window_mask` hides key ``k_pos [K]`` from query ``q_pos [Q]``."""
    s = mixed_matmul(q, k_t)
    return jnp.where(window_mask(q_pos, k_pos, window), s, NEG_INF)


def _tile_scores(qb, k_t, q0: int, k0: int, window: int) -> jax.Array:
    """Masked scores ``[c, Q, K]`` of ``qb [c, Q, Dh]`` on ``k_t [c, Dh, K]``."""
    q_pos = q0 + jnp.arange(qb.shape[1], dtype=jnp.int32)
    k_pos = k0 + jnp.arange(k_t.shape[2], dtype=jnp.int32)
    return masked_scores(qb, k_t, q_pos, k_pos, window)


def _sink_tile(qb, sink_k) -> jax.Array:
    """Scores ``[c, Q, 1]`` of ``qb [c, Q, Dh]`` on the sink keys ``[c, Dh]``."""
    s = mixed_einsum("cqd,cd->cq", qb, sink_k.astype(qb.dtype))
    return s[..., None]


def _tile_masks(keys, index: int, rate: float, rows: int, span: int, sink: bool):
    """``(keep [c, Q, K], sink keep [c, Q, 1])`` of one tile, ``(None, None)``
    without dropout (``keys`` ``None``)."""
    if keys is None:
        return None, None
    keep = _tile_keep(keys, index, rate, (rows, span + int(sink)))
    return keep[..., :span], (keep[..., span:] if sink else None)


def _flash_forward(q, k_t, v, sink_k, sink_v, keys, window, block, sink, rate):
    """Outputs ``[c, T, Dh]`` and row log-normalisers ``[c, T, 1]`` of one chunk.

    ``keys``: the chunk's group keys ``[c]`` for weight dropout at ``rate``
    (``None``: none); the normaliser is the undropped weights'.
    """
    ys, lse = [], []
    for index, (q0, q1, k0) in enumerate(_query_spans(q.shape[1], window, block)):
        qb = q[:, q0:q1]
        s = _tile_scores(qb, k_t[..., k0:q1], q0, k0, window)
        keep, keep_sink = _tile_masks(keys, index, rate, q1 - q0, q1 - k0, sink)
        m = jnp.max(s, axis=-1, keepdims=True)
        if sink:
            s_sink = _sink_tile(qb, sink_k)
            m = jnp.maximum(m, s_sink)
        m = jax.lax.stop_gradient(m)  # softmax does not depend on it
        e = jnp.exp(s - m)
        norm = jnp.sum(e, axis=-1, keepdims=True)
        y = mixed_matmul(_drop(e, keep, rate).astype(v.dtype), v[:, k0:q1])
        if sink:
            e_sink = jnp.exp(s_sink - m)
            norm = norm + e_sink
            w_sink = _drop(e_sink, keep_sink, rate)
            y = y + w_sink * sink_v.astype(F32)[:, None, :]
        ys.append(y / norm)  # normalised on [Q, Dh], not on [Q, K]
        lse.append(m + jnp.log(norm))
    return jnp.concatenate(ys, axis=1), jnp.concatenate(lse, axis=1)


def _flash_backward(
    q, k_t, v, sink_k, sink_v, keys, y, lse, dy, window, block, sink, rate
):
    """Gradients of one chunk's :func:`_flash_forward` outputs ``y`` for ``dy``.

    Flash attention's backward pass: each tile's weights are recomputed from
    the scores and the saved log-normaliser, ``p = exp(s - lse)``; then
    ``ds = p (dy V^T - rowsum(dy y))``. Every matmul reads its operands in
    their stored layout (keys transposed, gradients of ``K^T`` and ``V^T``
    accumulated as ``[Dh, K]``), so XLA:CPU runs no transposed contraction.
    With weight dropout each tile's keep mask ``M`` is drawn again from the
    group keys (:func:`_tile_keep`, the forward pass's draw): ``dV`` takes
    the dropped weights ``p M / (1 - rate)``, ``dy V^T`` is masked and scaled
    the same way, and ``rowsum(dy y)`` is still ``rowsum(p dP)``.
    """
    dt = q.dtype
    k, q_t = jnp.swapaxes(k_t, 1, 2), jnp.swapaxes(q, 1, 2)
    v_t, dy_t = jnp.swapaxes(v, 1, 2), jnp.swapaxes(dy, 1, 2).astype(dt)
    delta = jnp.sum(dy * y, axis=-1, keepdims=True)  # [c, T, 1]
    dq, dk_t, dv_t = [], jnp.zeros(k_t.shape, F32), jnp.zeros(v_t.shape, F32)
    d_sink_k = jnp.zeros(sink_k.shape, F32)
    d_sink_v = jnp.zeros(sink_v.shape, F32)
    spans = _query_spans(q.shape[1], window, block)
    for index, (q0, q1, k0) in enumerate(spans):
        qb, dyb, lse_b, delta_b = (
            q[:, q0:q1],
            dy[:, q0:q1],
            lse[:, q0:q1],
            delta[:, q0:q1],
        )
        keep, keep_sink = _tile_masks(keys, index, rate, q1 - q0, q1 - k0, sink)
        p = jnp.exp(_tile_scores(qb, k_t[..., k0:q1], q0, k0, window) - lse_b)
        dp = jnp.matmul(dyb.astype(dt), v_t[..., k0:q1], preferred_element_type=F32)
        dp = _drop(dp, keep, rate)
        ds = (p * (dp - delta_b)).astype(dt)
        dq_b = jnp.matmul(ds, k[:, k0:q1], preferred_element_type=F32)
        dk_t = dk_t.at[..., k0:q1].add(
            jnp.matmul(q_t[..., q0:q1], ds, preferred_element_type=F32)
        )
        w = _drop(p, keep, rate).astype(dt)
        dv_t = dv_t.at[..., k0:q1].add(
            jnp.matmul(dy_t[..., q0:q1], w, preferred_element_type=F32)
        )
        if sink:
            p_sink = jnp.exp(_sink_tile(qb, sink_k) - lse_b)  # [c, Q, 1]
            dp_sink = jnp.sum(dyb * sink_v.astype(F32)[:, None, :], -1, keepdims=True)
            dp_sink = _drop(dp_sink, keep_sink, rate)
            ds_sink = p_sink * (dp_sink - delta_b)
            dq_b = dq_b + ds_sink * sink_k.astype(F32)[:, None, :]
            d_sink_k = d_sink_k + jnp.sum(ds_sink * qb.astype(F32), axis=1)
            w_sink = _drop(p_sink, keep_sink, rate)
            d_sink_v = d_sink_v + jnp.sum(w_sink * dyb, axis=1)
        dq.append(dq_b)
    return (
        jnp.concatenate(dq, axis=1).astype(q.dtype),
        dk_t.astype(k_t.dtype),
        jnp.swapaxes(dv_t, 1, 2).astype(v.dtype),
        d_sink_k.astype(sink_k.dtype),
        d_sink_v.astype(sink_v.dtype),
    )


def _chunked(fn, chunk: int, *arrays):
    """``fn`` over ``chunk`` groups at a time (``lax.map``) of ``[G, ...]`` arrays.

    One loop body, compiled once, whose buffers are reused by every chunk:
    the score tiles of ``chunk`` groups fit in cache, where a pass over all
    ``G`` groups at once would write every tile to memory and read it back.
    """
    groups = arrays[0].shape[0]
    split = jax.tree.map(
        lambda a: a.reshape(groups // chunk, chunk, *a.shape[1:]), arrays
    )
    out = jax.lax.map(lambda xs: fn(*xs), split)
    return jax.tree.map(lambda o: o.reshape(groups, *o.shape[2:]), out)


def _flash_fwd(q, k_t, v, sink_k, sink_v, keys, window, block, chunk, sink, rate):
    def fwd(*xs):
        return _flash_forward(*xs, window, block, sink, rate)

    y, lse = _chunked(fwd, chunk, q, k_t, v, sink_k, sink_v, keys)
    return y, (q, k_t, v, sink_k, sink_v, keys, y, lse)


@functools.partial(jax.custom_vjp, nondiff_argnums=(6, 7, 8, 9, 10))
def _flash(q, k_t, v, sink_k, sink_v, keys, window, block, chunk, sink, rate):
    """``[G, T, Dh]`` attention, ``chunk`` groups at a time (blockwise_attention).

    ``keys``: group keys ``[G]`` of weight dropout at ``rate`` (``None``:
    none); kept as a residual, so the backward pass draws the same masks.
    """
    args = (q, k_t, v, sink_k, sink_v, keys, window, block, chunk, sink, rate)
    return _flash_fwd(*args)[0]


def _flash_bwd(window, block, chunk, sink, rate, residuals, dy):
    def bwd(*xs):
        return _flash_backward(*xs, window, block, sink, rate)

    grads = _chunked(bwd, chunk, *residuals, dy)
    return (*grads, None)  # no cotangent for the keys


_flash.defvjp(_flash_fwd, _flash_bwd)


def blockwise_attention(
    q, k, v, window: int, block: int, sink=None, dropout: WeightDropout | None = None
) -> jax.Array:
    """:func:`masked_attention` at positions ``arange(T)``: flash attention in pure JAX.

    ``q, k, v [B, T, H, Dh]``; ``sink = (key [H, Dh], value [H, Dh])`` or
    ``None``; ``dropout``: weight dropout (training; the module docstring),
    the same weights dropped as :func:`masked_attention` with this ``block``.
    Returns ``[B, T, H, Dh]`` float32.

    Query block ``[i, i + block)`` only meets keys in ``[i - window + 1,
    i + block)``: blocks of the ``[T, T]`` score matrix that the causal mask
    or the sliding window remove entirely are never computed, and no
    ``[T, T]`` array exists (the largest is ``[chunk, block, window + block
    - 1]``). Inside the kept span the softmax is the reference's (masked
    entries get exactly zero weight), so outputs and gradients equal the
    reference to float rounding.

    What makes it fast on a CPU, as in the flash-attention kernels: (batch,
    head) pairs run a few at a time (:func:`_chunked`, chunks sized so a
    score tile fits in L2, :data:`TILE_ELEMENTS`), weights are normalised
    after the value matmul, and the backward pass is written by hand
    (:func:`_flash_backward`): it recomputes each tile's weights from a saved
    ``[T]`` log-normaliser (nothing ``[T, T]``-sized is stored for it, so
    rematerialisation has nothing left to save here) and runs every matmul
    on operands in their stored layout. Small passes (at most
    :data:`ONE_PASS_ELEMENTS` score elements) run every group at once and
    let autodiff keep the weights instead: they fit in cache anyway.
    """
    if window < 1:
        raise ValueError(f"attention window must be >= 1 token, got {window}")
    b, t, h, d = q.shape
    groups = b * h

    def heads_major(x):  # [B, T, H, Dh] -> [B H, T, Dh]
        return jnp.swapaxes(x, 1, 2).reshape(groups, t, d)

    k_t = jnp.transpose(k, (0, 2, 3, 1)).reshape(groups, d, t)
    if sink is None:
        sink_k = sink_v = jnp.zeros((groups, d), q.dtype)
    else:
        sink_k, sink_v = (
            jnp.broadcast_to(x, (b, h, d)).reshape(groups, d) for x in sink
        )
    rows = min(block, t)
    chunk = _group_chunk(groups, rows, min(t, window + rows - 1))
    keys = _group_keys(dropout, groups)
    rate = 0.0 if dropout is None else float(dropout.rate)
    arrays = (heads_major(q), k_t, heads_major(v), sink_k, sink_v, keys)
    if chunk is None:
        y = _flash_forward(*arrays, window, block, sink is not None, rate)[0]
    else:
        y = _flash(*arrays, window, block, chunk, sink is not None, rate)
    return jnp.swapaxes(y.reshape(b, h, t, d), 1, 2)


class CausalSelfAttention(nnx.Module):
    """Multi-head causal self-attention with RoPE (fused QKV projection).

    ``impl``: ``"blockwise"`` (:func:`blockwise_attention`, the default) or
    ``"reference"`` (:func:`masked_attention` over the full ``[T, T]``; kept
    for tests). ``sink``: learned per-head sink key and value (Sink-KV), an
    extra always-visible, position-free slot that lets a head put its weight
    nowhere; off by default (no parameters are created then). ``dropout``:
    the rate of dropout on the attention weights in a training full pass
    (:class:`WeightDropout`); only a rate above 0 forks an RNG stream
    (``rngs``' ``dropout`` stream), so a model without it has the same state
    as before the setting existed. ``rope_period``: tokens per rotary
    position (queries and keys are rotated by ``pos // rope_period``: ReLIC's
    RoPE over the episode index, ``ModelConfig.positions="episode"``); the
    window and the causal mask still count tokens. ``head_scaling``: a
    learned scale per head (ones at init) on its output before the output
    projection (NormFormer's, ``ModelConfig.normformer``).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        rope_base: float,
        *,
        rngs,
        impl: str = "blockwise",
        block: int = 128,
        sink: bool = False,
        dtype=jnp.float32,
        dropout: float = 0.0,
        rope_period: int = 1,
        head_scaling: bool = False,
    ):
        self.num_heads = num_heads
        self.rope_period = rope_period
        self.dtype = dtype
        self.head_dim = d_model // num_heads
        self.rope_base = rope_base
        self.impl = impl
        self.block = block
        self.qkv = mixed_linear(d_model, 3 * d_model, dtype, rngs=rngs)
        self.out = mixed_linear(d_model, d_model, dtype, rngs=rngs)
        self.has_sink = sink
        if sink:
            init = nnx.initializers.normal(0.02)
            shape = (num_heads, self.head_dim)
            self.sink_key = nnx.Param(init(rngs.params(), shape))
            self.sink_value = nnx.Param(init(rngs.params(), shape))
        self.weight_dropout = dropout
        if dropout > 0.0:  # its own stream, forked after the parameters
            self.dropout_rngs = rngs["dropout"].fork()
        self.head_scaling = head_scaling
        if head_scaling:
            self.head_scale = nnx.Param(jnp.ones((num_heads,)))

    def _sink(self):
        if not self.has_sink:
            return None
        return self.sink_key[...], self.sink_value[...]

    def _project(self, x: jax.Array, pos: jax.Array):
        b, t, _ = x.shape
        q, k, v = jnp.split(self.qkv(x), 3, axis=-1)
        shape = (b, t, self.num_heads, self.head_dim)
        q, k, v = (a.reshape(shape) for a in (q, k, v))
        if self.rope_period > 1:  # positions in the mask stay token positions
            pos = pos // self.rope_period
        q = rope(q, pos, self.rope_base) / math.sqrt(self.head_dim)
        k = rope(k, pos, self.rope_base)
        return (a.astype(self.dtype) for a in (q, k, v))

    def _merge(self, y: jax.Array) -> jax.Array:
        """Heads ``y [B, T, H, Dh]`` -> ``[B, T, d]`` through the projection."""
        b, t = y.shape[:2]
        if self.head_scaling:
            y = y * self.head_scale[...][:, None]
        return self.out(y.reshape(b, t, -1))

    def __call__(
        self, x: jax.Array, pos: jax.Array, window: int, deterministic: bool = True
    ) -> jax.Array:
        """Full pass: ``x [B, T, d]``, ``pos [T]`` -> ``[B, T, d]``.

        The blockwise path and the reference's dropout masks assume ``pos =
        arange(T)`` (every full pass of :class:`~agentrl.models.DecisionModel`
        uses it). ``deterministic``
        False drops attention weights at the module's rate (a key drawn
        from its stream each call).
        """
        q, k, v = self._project(x, pos)
        dropout = None
        if self.weight_dropout > 0.0 and not deterministic:
            dropout = WeightDropout(self.dropout_rngs(), self.weight_dropout)
        sink = self._sink()
        if self.impl == "reference":
            y = masked_attention(q, k, v, pos, pos, window, sink, dropout, self.block)
        else:
            y = blockwise_attention(q, k, v, window, self.block, sink, dropout)
        return self._merge(y)

    def decode(
        self,
        x: jax.Array,
        pos: jax.Array,
        k_cache: jax.Array,
        v_cache: jax.Array,
        slot_pos: jax.Array,
        window: int,
        offset: int = 0,
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Attend a chunk ``x [B, C, d]`` at ``pos [C]`` to the cache.

        ``k_cache [B, H, Dh, S]`` (stored transposed, so ``q K`` is a plain
        matmul and no step transposes the cache), ``v_cache`` in the layout
        of :func:`value_slot_axis`. Returns ``(y
        [B, C, d], k_cache, v_cache)`` with the chunk written at slots
        ``(pos + offset) mod S`` (see :func:`cache_slots`); the caller
        updates ``slot_pos``.

        One softmax over three parts, never concatenated (a concatenation
        is one more pass over the ``[B, H, C, S]`` scores): the cache slots,
        the chunk itself and the sink (:func:`_decode_one_pass`). The whole
        buffer is read, filled or not: on XLA:CPU reading only the filled
        key blocks (a ``lax`` loop over ``dynamic_slice`` s) copies every
        block it reads: slower over a whole DPT deployment (docs/performance.md).
        """
        q, k, v = self._project(x, pos)
        # the chunk as stored in the cache, so that it attends to itself as
        # the full pass does (equal when the cache has the compute dtype)
        k, v = k.astype(k_cache.dtype), v.astype(v_cache.dtype)
        qh = q.astype(k_cache.dtype).swapaxes(1, 2)  # [B, H, C, Dh]: tiny
        vh = v.swapaxes(1, 2)  # [B, H, C, Dh]
        kt = k.transpose(0, 2, 3, 1)  # [B, H, Dh, C], as stored
        vt, v_axis = _as_stored(v, self.head_dim)
        s_new = masked_scores(qh, kt, pos, pos, window)
        sink = self._sink()
        # the parts beside the cache: (scores [B, H, C, n], weights -> y)
        small = [(s_new, lambda w: _weigh_cache(w, vh, 2))]
        if sink is not None:
            s_sink = _sink_scores(qh.swapaxes(1, 2), sink[0])
            small.append((s_sink, lambda w: _weigh_sink(w, sink[1])))
        size = k_cache.shape[3]
        y = _decode_one_pass(qh, k_cache, v_cache, v_axis, pos, slot_pos, window, small)
        y = y.swapaxes(1, 2)  # [B, C, H, Dh]
        # order the in-place writes after every read of the old cache: without
        # it XLA cannot prove the reads come first and copies the whole cache
        y, k_cache, v_cache = jax.lax.optimization_barrier((y, k_cache, v_cache))
        slot = cache_slots(pos, size, offset)
        k_cache = write_slots(k_cache, kt, slot, axis=3)
        v_cache = write_slots(v_cache, vt, slot, axis=v_axis)
        return self._merge(y), k_cache, v_cache

    def prefill(
        self,
        x: jax.Array,
        lo: jax.Array,
        k_cache: jax.Array,
        v_cache: jax.Array,
        window: int,
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Attend a piece ``x [B, P, d]`` at positions ``lo + arange(P)`` to
        the cache slots before it and causally to itself.

        The cache's slot ``s`` holds position ``s`` (a cache spanning the
        sequence, filled from slot 0: :meth:`DecisionModel.prefill
        <agentrl.models.DecisionModel.prefill>`); ``lo`` (traced) is a
        multiple of ``P``. The earlier slots are read one ``P``-slot block
        at a time in a ``lax.fori_loop`` (masked by the window), joined by
        an online softmax (running max, normaliser and
        weighted sum, flash attention's), so no ``[P, S]`` score array
        exists and the compiled loop is the same for every cache length.
        Equal to :meth:`decode` of the piece as one chunk, to float
        rounding. Returns ``(y [B, P, d], k_cache, v_cache)`` with the piece
        written in place at slots ``[lo, lo + P)``.
        """
        p = x.shape[1]
        pos = lo + jnp.arange(p, dtype=jnp.int32)
        q, k, v = self._project(x, pos)
        k, v = k.astype(k_cache.dtype), v.astype(v_cache.dtype)
        qh = q.astype(k_cache.dtype).swapaxes(1, 2)  # [B, H, P, Dh]
        kt = k.transpose(0, 2, 3, 1)  # [B, H, Dh, P], as stored
        vt, v_axis = _as_stored(v, self.head_dim)
        read = _prefill_reader(qh, pos, k_cache, v_cache, v_axis, window)
        # the piece itself (every query sees at least its own key) and the
        # sink open the softmax; the earlier blocks join it one at a time
        sink = self._sink()
        s_own = masked_scores(qh, kt, pos, pos, window)
        m, norm = _join_scores(s_own, s_own.max(-1, keepdims=True), 0.0)
        s_sink = None
        if sink is not None:
            s_sink = _sink_scores(q.astype(k_cache.dtype), sink[0])  # [B,H,P,1]
            m, norm = _join_scores(s_sink, m, norm)
        sink_v = None if sink is None else sink[1].astype(F32)[None, :, None, :]
        opening = (s_own, vt, s_sink, sink_v)
        last = lo // p  # every earlier block (the window masks)
        if v_cache.dtype == F32:
            acc, norm = _prefill_one_pass(read, opening, m, norm, last, v_axis)
        else:
            acc, norm = _prefill_two_pass(read, opening, m, norm, last, v_axis)
        y = (acc / norm).swapaxes(1, 2)  # [B, P, H, Dh]
        # the in-place writes after every read of the old cache (see decode)
        y, k_cache, v_cache = jax.lax.optimization_barrier((y, k_cache, v_cache))
        k_cache = jax.lax.dynamic_update_slice_in_dim(k_cache, kt, lo, 3)
        v_cache = jax.lax.dynamic_update_slice_in_dim(v_cache, vt, lo, v_axis)
        return self._merge(y), k_cache, v_cache


def _prefill_reader(qh, pos, k_cache, v_cache, v_axis: int, window: int):
    """``read(j)``: the scores and values of earlier key block ``j`` (of ``P``
    slots) for the piece's queries ``qh [B, H, P, Dh]`` at ``pos``."""
    p = qh.shape[2]

    def read(j):
        k0 = j * p
        keys = jax.lax.dynamic_slice_in_dim(k_cache, k0, p, 3)
        vals = jax.lax.dynamic_slice_in_dim(v_cache, k0, p, v_axis)
        k_pos = k0 + jnp.arange(p, dtype=jnp.int32)
        return masked_scores(qh, keys, pos, k_pos, window), vals

    return read


def _join_scores(s, m, norm):
    """Scores ``s`` into the running max ``m`` and normaliser ``norm``."""
    new_m = jnp.maximum(m, s.max(-1, keepdims=True))
    return new_m, norm * jnp.exp(m - new_m) + jnp.exp(s - new_m).sum(-1, keepdims=True)


def _prefill_one_pass(read, opening, m, norm, last, v_axis: int):
    """Float32 values: one pass, flash attention's: rescale the weighted sum
    as the running max grows, normalise at the end. Returns ``(acc, norm)``.

    ``opening``: ``(s_own, vt, s_sink, sink_v)``, the piece's own scores and
    values and the sink's (``None`` without one), which open the softmax.
    """
    s_own, vt, s_sink, sink_v = opening

    def block(j, carry):
        m, norm, acc = carry
        s, vals = read(j)
        new_m, norm = _join_scores(s, m, norm)
        acc = acc * jnp.exp(m - new_m) + _weigh_cache(jnp.exp(s - new_m), vals, v_axis)
        return new_m, norm, acc

    acc = _weigh_cache(jnp.exp(s_own - m), vt, v_axis)
    if s_sink is not None:
        acc = acc + jnp.exp(s_sink - m) * sink_v
    _, norm, acc = jax.lax.fori_loop(0, last, block, (m, norm, acc))
    return acc, norm


def _prefill_two_pass(read, opening, m, norm, last, v_axis: int):
    """Low precision: round ``exp(s - final max)`` to the values' dtype, as
    the full pass and decode do, not a running-max rescaling of rounded sums
    (a second pass once the max is known). As :func:`_prefill_one_pass`."""
    s_own, vt, s_sink, sink_v = opening

    def stats(j, carry):
        return _join_scores(read(j)[0], *carry)

    m, norm = jax.lax.fori_loop(0, last, stats, (m, norm))

    def block(j, acc):
        s, vals = read(j)
        return acc + _weigh_cache(jnp.exp(s - m), vals, v_axis)

    acc = _weigh_cache(jnp.exp(s_own - m), vt, v_axis)
    if s_sink is not None:
        acc = acc + jnp.exp(s_sink - m) * sink_v
    acc = jax.lax.fori_loop(0, last, block, acc)
    return acc, norm


def _max_scores(parts) -> jax.Array:
    """Row maximum ``[B, H, C, 1]`` over score arrays ``[B, H, C, n]``."""
    m = parts[0].max(-1, keepdims=True)
    for s in parts[1:]:
        m = jnp.maximum(m, s.max(-1, keepdims=True))
    return m


def value_slot_axis(head_dim: int) -> int:
    """The slot axis of a cached values array: 3 (``[B, H, Dh, S]``) for heads
    narrower than :data:`VALUES_TRANSPOSED_BELOW`, else 2 (``[B, H, S, Dh]``)."""
    return 3 if head_dim < VALUES_TRANSPOSED_BELOW else 2


def _as_stored(v: jax.Array, head_dim: int) -> tuple[jax.Array, int]:
    """Values ``[B, T, H, Dh]`` in the cache's layout, and its slot axis."""
    axis = value_slot_axis(head_dim)
    return (v.transpose(0, 2, 3, 1) if axis == 3 else v.swapaxes(1, 2)), axis


def _weigh_cache(w: jax.Array, vals: jax.Array, axis: int) -> jax.Array:
    """Weights ``[B, H, C, n]`` times values -> ``[B, H, C, Dh]`` float32,
    the weights rounded to the values' dtype first (as the full pass does).

    ``vals``: ``[B, H, Dh, n]`` (slot ``axis`` 3) or ``[B, H, n, Dh]`` (2).
    """
    w = w.astype(vals.dtype)
    if axis == 3:
        return jnp.einsum("bhcs,bhds->bhcd", w, vals, preferred_element_type=F32)
    return jnp.matmul(w, vals, preferred_element_type=F32)


def _weigh_sink(w: jax.Array, sink_v: jax.Array) -> jax.Array:
    """Sink weights ``[B, H, C, 1]`` times its value ``[H, Dh]`` (float32)."""
    return w * sink_v.astype(F32)[None, :, None, :]


def _decode_one_pass(qh, k_cache, v_cache, v_axis, pos, slot_pos, window, small):
    """Attention of ``qh [B, H, C, Dh]`` over the whole cache and ``small``.

    ``v_cache``'s slots lie along ``v_axis`` (:func:`value_slot_axis`).

    ``small``: ``(scores [B, H, C, n], weights -> [B, H, C, Dh])`` parts
    beside the cache (the chunk, the sink). One softmax over all of them,
    never concatenated: the max and the normaliser are reduced part by part.
    The unnormalised weights ``exp(s - max)`` meet the values (rounded to the
    values' dtype, as the full pass rounds them) and the ``[B, H, C, Dh]``
    sum is normalised after, not the ``[B, H, C, S]`` weights. Returns
    ``[B, H, C, Dh]`` float32.
    """
    s = masked_scores(qh, k_cache, pos, slot_pos, window)
    m = _max_scores([s] + [sc for sc, _ in small])
    e = jnp.exp(s - m)
    es = [jnp.exp(sc - m) for sc, _ in small]
    norm = e.sum(-1, keepdims=True)
    for x in es:
        norm = norm + x.sum(-1, keepdims=True)
    y = _weigh_cache(e, v_cache, v_axis)
    for x, (_, weigh) in zip(es, small, strict=True):
        y = y + weigh(x)
    return y / norm


def cache_slots(pos: jax.Array, size: int, offset: int = 0) -> jax.Array:
    """First slot of a chunk at ``pos [C]``: ``(pos[0] + offset) mod S``.

    Decoding writes a chunk of ``C`` consecutive positions; the model picks
    ``offset`` so that every chunk starts at a multiple of ``C`` and ``S`` is
    a multiple of ``C`` ("sar": chunks ``3t-2..3t``, offset 2). The chunk then
    never wraps around the ring and is one contiguous in-place write.
    """
    return jnp.mod(pos[0] + offset, size).astype(jnp.int32)


def write_slots(cache: jax.Array, chunk: jax.Array, slot: jax.Array, axis: int):
    """Write ``chunk`` into ``cache`` at ``[slot, slot + C)`` along ``axis``.

    A ``dynamic_update_slice``: XLA does it in place inside the decoding scan
    (a general index scatter there costs a copy of the whole cache).
    """
    start = [jnp.zeros((), jnp.int32)] * cache.ndim
    start[axis] = slot
    return jax.lax.dynamic_update_slice(cache, chunk.astype(cache.dtype), start)


def window_mean(x: jax.Array, pos: jax.Array, window: int) -> jax.Array:
    """Causal windowed mean ``[B, T, d]``: at ``t`` the mean of visible tokens.

    Reference form: a ``[T, T]`` mask matmul (any ``pos``).
    """
    m = window_mask(pos, pos, window).astype(x.dtype)
    return jnp.einsum("qk,bkd->bqd", m, x) / m.sum(-1)[None, :, None]


def window_mean_cumsum(x: jax.Array, window: int) -> jax.Array:
    """:func:`window_mean` at ``pos = arange(T)`` from a running sum (no ``[T, T]``).

    The sum over ``(t - window, t]`` is ``cs[t] - cs[t - window]``; it
    equals the reference to float rounding (the running sum is float32).
    """
    t = x.shape[1]
    cs = jnp.cumsum(x.astype(jnp.float32), axis=1)
    lag = jnp.pad(cs, ((0, 0), (window, 0), (0, 0)))[:, :t]
    count = jnp.minimum(jnp.arange(1, t + 1), window).astype(jnp.float32)
    return ((cs - lag) / count[None, :, None]).astype(x.dtype)


def window_mean_decode(
    x: jax.Array, pos: jax.Array, cache_x: jax.Array, slot_pos: jax.Array, window: int
) -> jax.Array:
    """Cached :func:`window_mean` for a chunk ``x [B, C, d]`` at ``pos [C]``."""
    mc = window_mask(pos, slot_pos, window).astype(x.dtype)
    mn = window_mask(pos, pos, window).astype(x.dtype)
    total = jnp.einsum("qk,bkd->bqd", mc, cache_x) + jnp.einsum("qk,bkd->bqd", mn, x)
    count = jnp.maximum(mc.sum(-1) + mn.sum(-1), 1.0)
    return total / count[None, :, None]


def window_mean_prefill(
    x: jax.Array, lo: jax.Array, cache_x: jax.Array, window: int
) -> jax.Array:
    """:func:`window_mean` of a piece ``x [B, P, d]`` at ``lo + arange(P)``.

    Over the piece (causally) and the slots before it of ``cache_x [B, S,
    d]`` (slot = position, as in :meth:`CausalSelfAttention.prefill`), read
    one ``P``-slot block at a time in a ``lax.fori_loop``.
    """
    p = x.shape[1]
    pos = lo + jnp.arange(p, dtype=jnp.int32)
    mask = window_mask(pos, pos, window).astype(x.dtype)
    total = jnp.einsum("qk,bkd->bqd", mask, x)
    count = mask.sum(-1)

    def block(j, carry):
        total, count = carry
        k0 = j * p
        xs = jax.lax.dynamic_slice_in_dim(cache_x, k0, p, 1)
        mask = window_mask(pos, k0 + jnp.arange(p, dtype=jnp.int32), window)
        mask = mask.astype(x.dtype)
        return total + jnp.einsum("qk,bkd->bqd", mask, xs), count + mask.sum(-1)

    total, count = jax.lax.fori_loop(0, lo // p, block, (total, count))
    return total / count[None, :, None]
