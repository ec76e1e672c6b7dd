"""Decision-Pretrained Transformer (Lee et al., 2023).

DPT predicts the optimal action for a query state from an in-context set of
transitions ``(s, a, r, s')`` collected by some roll-in policy. As in the
reference implementation the model predicts from every prefix of the context
(position 0 sees only the query, position i the first i transitions), and the
cross-entropy against the oracle's label is averaged over all positions.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from agentrl.algos.losses import action_loss


def dpt_loss(model: Any, batch: dict[str, jax.Array], *, deterministic: bool = False):
    """Optimal-action loss for the query from every context prefix.

    Args:
      batch: ``query_obs [B, ...]``, ``context_obs [B, N, ...]``,
        ``context_action``, ``context_reward [B, N]``, ``context_next_obs``,
        ``label [B, ...]`` (the oracle's action in the query state).

    Returns:
      ``(loss, metrics, output)``; output action ``[B, N + 1, A]``.
    """
    out = model.predict_query(
        batch["query_obs"],
        batch["context_obs"],
        batch["context_action"],
        batch["context_reward"],
        batch["context_next_obs"],
        deterministic=deterministic,
    )
    positions = out.action.shape[1]
    label = batch["label"]
    target = jnp.broadcast_to(
        jnp.expand_dims(label, 1), (label.shape[0], positions, *label.shape[1:])
    )
    loss, metrics = action_loss(model.config.head, out, target)
    # Accuracy with the full context: the number DPT is judged by.
    if model.config.head == "categorical":
        last = jnp.argmax(out.action[:, -1], -1) == label
        metrics["accuracy_full_context"] = jnp.mean(last.astype(jnp.float32))
    return loss, metrics, out
