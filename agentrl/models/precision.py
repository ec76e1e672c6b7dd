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
"""

from __future__ import annotations

import functools

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


def mixed_dot_general(
    lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **kw
):
    """``lax.dot_general`` whose backward multiplies in the operands' dtype.

    For two operands of one dtype narrower than float32 (bfloat16): the
    forward is ``lax.dot_general`` itself (same program, same values); the
    backward rounds the cotangent to that dtype and runs both transposed
    matmuls on it (float32 accumulation in the device's matmul). Any other
    operands: plain ``lax.dot_general``, forward and backward.
    """
    narrow = lhs.dtype == rhs.dtype and jnp.dtype(lhs.dtype).itemsize < 4
    if not narrow or kw.get("out_sharding") is not None:
        return jax.lax.dot_general(
            lhs,
            rhs,
            dimension_numbers,
            precision=precision,
            preferred_element_type=preferred_element_type,
            **kw,
        )
    # hashable (a static argument of the custom VJP): tuples of Python ints
    dims = tuple(
        tuple(tuple(int(d) for d in axes) for axes in pair)
        for pair in dimension_numbers
    )
    return _narrow_dot(lhs, rhs, dims, precision, preferred_element_type)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def _narrow_dot(lhs, rhs, dims, precision, out_dtype):
    return jax.lax.dot_general(
        lhs, rhs, dims, precision=precision, preferred_element_type=out_dtype
    )


def _narrow_dot_fwd(lhs, rhs, dims, precision, out_dtype):
    return _narrow_dot(lhs, rhs, dims, precision, out_dtype), (lhs, rhs)


def _narrow_dot_bwd(dims, precision, out_dtype, residuals, g):
    lhs, rhs = residuals

    def in_operand_dtype(a, b):
        return jax.lax.dot_general(
            a, b, dims, precision=precision, preferred_element_type=lhs.dtype
        )

    _, transpose = jax.vjp(in_operand_dtype, lhs, rhs)
    return transpose(g.astype(lhs.dtype))


_narrow_dot.defvjp(_narrow_dot_fwd, _narrow_dot_bwd)


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
