"""Algorithm Distillation (Laskin et al., 2023) and AD-ε (noise distillation).

AD trains a causal transformer to predict the source algorithm's next action
across episodes of a learning history: the window holds several consecutive
whole episodes of one task, and the loss is the action likelihood at every
step of the window. AD-ε is the same model and loss on histories made by an
oracle whose ε-greedy noise is annealed across episodes (``noisy_oracle``
source); only the data differ, so it shares this module.
"""

from __future__ import annotations

from typing import Any

import jax

from agentrl.algos.losses import action_loss


def ad_loss(model: Any, batch: dict[str, jax.Array], *, deterministic: bool = False):
    """Next-action loss over AD windows.

    Args:
      model: a :class:`agentrl.models.DecisionModel` with a step/sar layout.
      batch: ``obs [B, T, ...]``, ``action [B, T, ...]``, ``reward [B, T]``,
        optional ``mask [B, T]`` (False on padding, which is not scored).

    Returns:
      ``(loss, metrics, output)``.
    """
    out = model(
        batch["obs"], batch["action"], batch["reward"], deterministic=deterministic
    )
    loss, metrics = action_loss(
        model.config.head, out, batch["action"], batch.get("mask")
    )
    return loss, metrics, out
