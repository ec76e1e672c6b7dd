"""T2MIR (Mixture-of-Experts meets In-Context RL, NeurIPS 2025).

T2MIR wraps AD or DPT with a model whose last layer's FFN is a token-wise
MoE in parallel with a task-wise MoE (see :mod:`agentrl.models`). Two losses
are added to the base algorithm's:

- the token-wise load-balancing loss ``w (CV^2(importance) + CV^2(load))``
  (``aux["balance_loss"]``, already weighted by ``ModelConfig.balance_weight``);
- a contrastive InfoNCE loss on the task router: the online router's
  sequence-averaged logits are the queries, an EMA copy of the router
  (``tau`` per step) gives the keys, similarity is bilinear ``q W k^T``, and
  the positives of a segment are the other segments of the same task in the
  batch (the sampler returns ``B/2`` tasks x 2 segments). Weighted by
  ``ModelConfig.contrastive_weight``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from agentrl.models import contrastive_loss, ema_update, task_router_logits


def init_ema_router(model: Any) -> nnx.State:
    """A copy of the task router's params: the EMA target's initial value."""
    # A real copy: the EMA must not share buffers with the (donated) params.
    return jax.tree.map(jnp.copy, nnx.state(model.task_router, nnx.Param))


def update_ema_router(ema: Any, model: Any, tau: float) -> Any:
    return ema_update(ema, nnx.state(model.task_router, nnx.Param), tau)


def t2mir_loss(
    base_loss: Callable[..., tuple],
    model: Any,
    batch: dict,
    ema_router: Any,
    balance_weight: Any = None,
    contrastive_weight: Any = None,
    **kw,
):
    """Base loss + weighted balance loss + weighted contrastive loss.

    The weights default to the model config's; pass them (traced) to sweep
    them. Returns ``(loss, metrics, output)`` with the unweighted
    ``balance_loss`` and ``contrastive_loss`` in the metrics.
    """
    c = model.config
    balance_weight = c.balance_weight if balance_weight is None else balance_weight
    if contrastive_weight is None:
        contrastive_weight = c.contrastive_weight
    base, metrics, out = base_loss(model, batch, **kw)
    query = out.aux["task_router_logits"]
    keys = task_router_logits(ema_router, out.aux["task_router_input"])
    contrast = contrastive_loss(query, keys, model.contrastive_w, batch["task_id"])
    balance = out.aux["balance_loss_raw"]
    loss = base + balance_weight * balance + contrastive_weight * contrast
    metrics = {
        **metrics,
        "base_loss": base,
        "balance_loss": balance,
        "contrastive_loss": contrast,
    }
    return loss, metrics, out
