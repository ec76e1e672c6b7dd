"""Mixed precision: bfloat16 matmul operands, float32 accumulation and results.

``ModelConfig.compute_dtype = "bfloat16"`` follows the usual mixed-precision
recipe (Micikevicius et al. 2018; MaxText, big_vision): parameters and the
optimizer state stay float32 and are cast to bfloat16 where a matmul uses
them; the matmul accumulates in float32 and returns float32
(``preferred_element_type``), so the residual stream, softmax, LayerNorm and
the loss see float32. Routers and the action head stay float32 (a top-k
choice or a logit flipped by bfloat16 rounding changes the computation, not
just its precision: Switch Transformer's "selective precision").
"""

from __future__ import annotations

import jax.numpy as jnp
from flax import nnx


def dtype_of(name: str):
    """The JAX dtype of a ``ModelConfig.compute_dtype`` name."""
    return jnp.dtype(name)


def mixed_linear(d_in: int, d_out: int, dtype, *, rngs) -> nnx.Linear:
    """``nnx.Linear`` with float32 parameters, ``dtype`` operands, float32 output.

    With ``dtype = float32`` it is a plain ``nnx.Linear`` (same parameters,
    same values), so checkpoints are the same either way.
    """
    return nnx.Linear(
        d_in, d_out, dtype=dtype, preferred_element_type=jnp.float32, rngs=rngs
    )
