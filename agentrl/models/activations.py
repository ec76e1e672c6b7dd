"""The feed-forward nonlinearity of a decision model (``model.ffn_activation``).

The reference codes differ here, and a reproduction takes its reference's:

- ``"gelu_tanh"`` (the default): GELU's tanh approximation, GPT-2's
  ``gelu_new``, the default of Hugging Face's ``GPT2Config``: DPT's model,
  and T2MIR-DPT's MuJoCo configs name it;
- ``"gelu"``: GELU with the exact Gaussian CDF (``erf``), torch's
  ``nn.GELU()`` and Hugging Face's ``"gelu"``: AD-ε's ``ADTransformer`` and
  the XLand-100B AD baseline's blocks;
- ``"relu"``: Meta-DT's policy (``dt_activation_function``) and DT's own
  (kzl/decision-transformer ``gym/experiment.py``, ``--activation_function``);
- ``"leaky_relu"``: slope 0.01 for negative inputs (torch's default, which
  Hugging Face's ``"leaky_relu"`` and AMAGO's ``activation_switch`` use):
  T2MIR-AD's configs, T2MIR-DPT's Dark Room and Point-Robot ones, AMAGO's
  transformer.

The two GELUs differ by at most ~5e-4 at any input; ReLU and leaky ReLU
change what a unit passes for negative pre-activations. Every function is
elementwise: ``[...] -> [...]``, same dtype.
"""

from __future__ import annotations

from collections.abc import Callable

import jax

#: torch's ``nn.LeakyReLU`` default slope (``negative_slope=0.01``)
LEAKY_SLOPE = 0.01


def gelu_tanh(x: jax.Array) -> jax.Array:
    """GELU, tanh form: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""
    return jax.nn.gelu(x, approximate=True)


def gelu_exact(x: jax.Array) -> jax.Array:
    """GELU, exact form: ``x Phi(x)`` with ``Phi`` the standard normal CDF."""
    return jax.nn.gelu(x, approximate=False)


def leaky_relu(x: jax.Array) -> jax.Array:
    """``x`` where positive, ``LEAKY_SLOPE * x`` elsewhere."""
    return jax.nn.leaky_relu(x, negative_slope=LEAKY_SLOPE)


FFN_ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "gelu_tanh": gelu_tanh,
    "gelu": gelu_exact,
    "relu": jax.nn.relu,
    "leaky_relu": leaky_relu,
}
