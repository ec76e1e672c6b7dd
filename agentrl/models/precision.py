"""Mixed precision: bfloat16 matmul operands, float32 accumulation and results.

``ModelConfig.compute_dtype = "bfloat16"`` follows the usual mixed-precision
recipe (Micikevicius et al. 2018; MaxText, big_vision): parameters and the
optimizer state stay float32 and are cast to bfloat16 where a matmul uses
them; the matmul accumulates in float32 and returns float32
(``preferred_element_type``), so the residual stream, softmax, LayerNorm and
the loss see float32. Routers and the action head stay float32 (a top-k
choice or a logit flipped by bfloat16 rounding changes the computation, not
just its precision: Switch Transformer's "selective precision").

The backward pass multiplies in bfloat16 too (:func:`mixed_dot_general`):
JAX's transpose of a bfloat16 matmul with float32 output multiplies the
float32 cotangent by the bfloat16 operand, which XLA runs as a float32
matmul (on one H200, 2026-11-28: every backward matmul of ``dpt_bandit``'s
gpu preset ran as a TF32 or float32 GEMM and took most of the update). The
cotangent is rounded to bfloat16 first, as mixed-precision training does
(the gradient of each operand is bfloat16 in either case: it is the
gradient of a bfloat16 value). ``moe_dispatch="sorted"``'s ``ragged_dot``
keeps JAX's own backward (float32 for bfloat16 operands).

A linear layer's weight gradient ``x^T g`` contracts over every token of
the batch into a small ``[d_in, d_out]``: with an output of one or two
GEMM tiles, one of the GPU's SMs walks the whole contraction while the
rest idle (on one H200, 2026-11-28: dpt_bandit's 16 such matmuls, 32,064
rows into 32x96 and the like, took ~50 µs each, and the float32 head's
one 339 µs, ~1.15 of the update's 3.05 busy ms). So when the rows are
many and the output small (:func:`weight_grad_split`), the rows are cut
into ``S`` equal chunks, multiplied as one batched matmul and the ``S``
float32 partial sums added: split-K by hand, the same sum in float32 (the
action head and the token embeddings, float32 ``mixed_linear``
layers, go the same way).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from flax import nnx

F32 = jnp.float32


def dtype_of(name: str):
    """The JAX dtype of a ``ModelConfig.compute_dtype`` name."""
    return jnp.dtype(name)


def mixed_linear(d_in: int, d_out: int, dtype, *, rngs) -> nnx.Linear:
    """``nnx.Linear`` with float32 parameters, ``dtype`` operands, float32 output.

    With ``dtype = float32`` it is a plain ``nnx.Linear`` (same parameters,
    same values), so checkpoints are the same either way.
    """
    return nnx.Linear(
        d_in,
        d_out,
        dtype=dtype,
        preferred_element_type=F32,
        dot_general=mixed_dot_general,
        rngs=rngs,
    )


#: the weight gradient is split when it contracts at least this many rows
SPLIT_MIN_ROWS = 8192
#: ... into an output of at most this many entries (four 128x128 tiles)
SPLIT_MAX_OUT = 65536
#: ... into at most this many chunks of at least this many rows each
SPLIT_MAX_CHUNKS, SPLIT_MIN_CHUNK_ROWS = 64, 256


def weight_grad_split(lhs_shape, rhs_shape, dims) -> int:
    """The chunks ``S`` a linear layer's weight gradient is cut into (1: none).

    A linear layer: ``lhs [..., d_in] x rhs [d_in, d_out]`` contracting the
    last axis of ``lhs`` with the first of ``rhs``, no batch axes. ``S`` is
    the largest power of two up to :data:`SPLIT_MAX_CHUNKS` that divides the
    rows (the product of ``lhs``'s leading axes) into chunks of at least
    :data:`SPLIT_MIN_CHUNK_ROWS`; 1 unless the rows are at least
    :data:`SPLIT_MIN_ROWS` and the output at most :data:`SPLIT_MAX_OUT`.
    """
    ndim = len(lhs_shape)
    if len(rhs_shape) != 2 or dims != (((ndim - 1,), (0,)), ((), ())):
        return 1
    rows = math.prod(lhs_shape[:-1])
    if rows < SPLIT_MIN_ROWS or math.prod(rhs_shape) > SPLIT_MAX_OUT:
        return 1
    chunks = 1
    while (
        chunks * 2 <= SPLIT_MAX_CHUNKS
        and rows % (chunks * 2) == 0
        and rows // (chunks * 2) >= SPLIT_MIN_CHUNK_ROWS
    ):
        chunks *= 2
    return chunks


def mixed_dot_general(
    lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **kw
):
    """``lax.dot_general`` whose backward multiplies in the operands' dtype.

    For two operands of one dtype narrower than float32 (bfloat16): the
    forward is ``lax.dot_general`` itself (same program, same values); the
    backward rounds the cotangent to that dtype and runs both transposed
    matmuls on it (float32 accumulation in the device's matmul). A linear
    layer's weight gradient over many rows is split
    (:func:`weight_grad_split`), in any dtype. Any other operands: plain
    ``lax.dot_general``, forward and backward.
    """
    # hashable (a static argument of the custom VJP): tuples of Python ints
    dims = tuple(
        tuple(tuple(int(d) for d in axes) for axes in pair)
        for pair in dimension_numbers
    )
    same = lhs.dtype == rhs.dtype
    narrow = same and jnp.dtype(lhs.dtype).itemsize < 4
    chunks = weight_grad_split(lhs.shape, rhs.shape, dims) if same else 1
    if (not narrow and chunks == 1) or kw.get("out_sharding") is not None:
        return jax.lax.dot_general(
            lhs,
            rhs,
            dimension_numbers,
            precision=precision,
            preferred_element_type=preferred_element_type,
            **kw,
        )
    return _custom_dot(lhs, rhs, dims, precision, preferred_element_type, chunks)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4, 5))
def _custom_dot(lhs, rhs, dims, precision, out_dtype, chunks):
    return jax.lax.dot_general(
        lhs, rhs, dims, precision=precision, preferred_element_type=out_dtype
    )


def _custom_dot_fwd(lhs, rhs, dims, precision, out_dtype, chunks):
    return _custom_dot(lhs, rhs, dims, precision, out_dtype, chunks), (lhs, rhs)


def _custom_dot_bwd(dims, precision, out_dtype, chunks, residuals, g):
    lhs, rhs = residuals
    g = g.astype(lhs.dtype)  # bfloat16 operands: the cotangent rounded too

    def in_operand_dtype(a, b):
        return jax.lax.dot_general(
            a, b, dims, precision=precision, preferred_element_type=lhs.dtype
        )

    if chunks == 1:
        _, transpose = jax.vjp(in_operand_dtype, lhs, rhs)
        return transpose(g)
    _, transpose_lhs = jax.vjp(lambda a: in_operand_dtype(a, rhs), lhs)
    (d_lhs,) = transpose_lhs(g)
    # [S, rows / S, d] chunks, one batched matmul, the S partial sums added
    x = lhs.reshape(chunks, -1, lhs.shape[-1])
    gc = g.reshape(chunks, -1, g.shape[-1])
    batched = (((1,), (1,)), ((0,), (0,)))
    partial = jax.lax.dot_general(
        x, gc, batched, precision=precision, preferred_element_type=F32
    )
    return d_lhs, partial.sum(0).astype(rhs.dtype)


_custom_dot.defvjp(_custom_dot_fwd, _custom_dot_bwd)


def mixed_matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b`` with float32 output over ``[..., M, K] x [..., K, N]`` of the
    same leading (batch) shape; the backward as :func:`mixed_dot_general`."""
    if a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2]:
        return jnp.matmul(a, b, preferred_element_type=F32)
    batch = tuple(range(a.ndim - 2))
    dims = (((a.ndim - 1,), (b.ndim - 2,)), (batch, batch))
    return mixed_dot_general(a, b, dims, preferred_element_type=F32)


def mixed_einsum(spec: str, *operands: jax.Array) -> jax.Array:
    """``jnp.einsum`` with float32 output, its matmuls' backward as
    :func:`mixed_dot_general`."""
    return jnp.einsum(
        spec, *operands, preferred_element_type=F32, _dot_general=mixed_dot_general
    )
