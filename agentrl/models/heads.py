"""Action heads (categorical, Gaussian, MSE), the model output and helpers.

- "categorical": ``action`` = logits ``[..., A]``.
- "mse": ``action`` = mean ``[..., A]`` (regress with squared error).
- "gaussian": ``action`` = mean ``[..., A]``, ``log_std`` ``[..., A]`` in
  ``[LOG_STD_MIN, LOG_STD_MAX]`` (a squashed, state-dependent std).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx, struct

from agentrl.models.precision import F32, mixed_linear

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


@struct.dataclass
class ModelOutput:
    """What a decision model returns (a pytree).

    Attributes:
      action: logits (categorical) or mean (mse, gaussian), ``[..., A]``.
      log_std: ``[..., A]`` for "gaussian", else ``None``.
      aux: dict; always ``"balance_loss"`` (scalar, unweighted, 0 without
        MoE); with MoE also ``"task_router_logits" [B, E]``,
        ``"task_router_input" [B, T, d]`` (last MoE layer).
    """

    action: jax.Array
    log_std: jax.Array | None
    aux: dict


class ActionHead(nnx.Module):
    """Linear read-out of the final hidden state."""

    def __init__(self, d_model: int, action_size: int, head: str, *, rngs):
        self.head = head
        width = 2 * action_size if head == "gaussian" else action_size
        self.proj = mixed_linear(d_model, width, F32, rngs=rngs)

    def __call__(self, h: jax.Array) -> tuple[jax.Array, jax.Array | None]:
        """``h [..., d]`` -> ``(action [..., A], log_std [..., A] | None)``."""
        y = self.proj(h)
        if self.head != "gaussian":
            return y, None
        mean, raw = jnp.split(y, 2, axis=-1)
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (jnp.tanh(raw) + 1)
        return mean, log_std


def log_prob(head: str, out: ModelOutput, action: jax.Array) -> jax.Array:
    """Log-likelihood of ``action`` under the head's distribution, ``[...]``.

    Categorical: ``action`` int ``[...]``. Gaussian: ``[..., A]`` (summed
    over A). MSE: minus the squared error summed over A (a unit-variance
    Gaussian up to a constant).
    """
    if head == "categorical":
        logp = jax.nn.log_softmax(out.action, axis=-1)
        return jnp.take_along_axis(logp, action[..., None].astype(jnp.int32), -1)[
            ..., 0
        ]
    if head == "mse":
        return -jnp.sum((out.action - action) ** 2, axis=-1)
    z = (action - out.action) * jnp.exp(-out.log_std)
    return jnp.sum(-0.5 * z**2 - out.log_std - 0.5 * math.log(2 * math.pi), axis=-1)


def greedy_action(head: str, out: ModelOutput) -> jax.Array:
    """Most likely action: argmax of logits, or the mean."""
    if head == "categorical":
        return jnp.argmax(out.action, axis=-1).astype(jnp.int32)
    return out.action


def sample_action(
    head: str, out: ModelOutput, key: jax.Array, temperature: float = 1.0
) -> jax.Array:
    """Sample an action (categorical logits / temperature; Gaussian mean + std)."""
    if head == "categorical":
        return jax.random.categorical(key, out.action / temperature).astype(jnp.int32)
    if head == "mse":
        return out.action
    noise = jax.random.normal(key, out.action.shape)
    return out.action + temperature * jnp.exp(out.log_std) * noise
