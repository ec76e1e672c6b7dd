"""Action losses shared by the algorithms: likelihood of the target action.

Discrete actions use cross-entropy on the logits; continuous actions use the
Gaussian negative log-likelihood ("gaussian" head) or the squared error
("mse" head). Every loss is averaged over the positions where ``mask`` is 1.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from agentrl.models.heads import ModelOutput, greedy_action, log_prob


def masked_mean(x: jax.Array, mask: jax.Array | None) -> jax.Array:
    if mask is None:
        return jnp.mean(x)
    mask = mask.astype(x.dtype)
    return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def action_loss(
    head: str, out: ModelOutput, target: jax.Array, mask: jax.Array | None = None
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """``(loss, metrics)``: negative log-likelihood of ``target`` under ``out``.

    Args:
      head: the model's head ("categorical", "gaussian" or "mse").
      out: model output with ``action [..., A]``.
      target: ``[...]`` int actions or ``[..., A]`` continuous actions.
      mask: optional ``[...]`` weights (1 = counted).

    Metrics: ``nll``; ``accuracy`` (discrete) or ``mse`` (continuous).
    """
    nll = -log_prob(head, out, target)
    loss = masked_mean(nll, mask)
    metrics = {"nll": loss}
    if head == "categorical":
        correct = (greedy_action(head, out) == target).astype(jnp.float32)
        metrics["accuracy"] = masked_mean(correct, mask)
    else:
        err = jnp.sum((out.action - target) ** 2, axis=-1)
        metrics["mse"] = masked_mean(err, mask)
    return loss, metrics
