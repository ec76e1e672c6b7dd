"""T2MIR's task-wise router contrastive pieces: EMA router, keys, InfoNCE.

The online task router gives queries (``aux["task_router_logits"]``); an EMA
copy of the router (rate ``tau = 0.005`` per update) applied to the same router
input gives keys. Similarity is bilinear ``q W k^T`` with a learnable
``W [E, E]`` (``DecisionModel.contrastive_w``). A batch holds ``B/2`` tasks x
2 segments; for a row, the positives are the other rows of the same task
(the other segment) and the row itself is left out.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from agentrl.models.moe import router_logits


def ema_init(online):
    """An independent copy of ``online`` to start the EMA target from.

    ``nnx.state(module, nnx.Param)`` *aliases* the module's variables (later
    in-place updates of the model show through), so copy it first.
    """
    return jax.tree.map(jnp.copy, online)


def ema_update(target, online, tau: float = 0.005):
    """``target <- (1 - tau) * target + tau * online``, leaf by leaf.

    Works on any matching pytrees of arrays, including ``nnx.State`` (e.g.
    ``nnx.state(model.task_router, nnx.Param)``). Returns the new target;
    inputs are not modified.
    """
    return jax.tree.map(lambda t, o: (1.0 - tau) * t + tau * o, target, online)


def task_router_logits(router_params, router_input: jax.Array) -> jax.Array:
    """Sequence-averaged task-router logits ``[B, E]`` (the contrastive keys).

    Args:
      router_params: the EMA router's params: ``nnx.State`` of a task
        ``Router`` (keys ``w1, b1, w2, b2``) or a dict of arrays.
      router_input: ``[B, T, d]``, ``aux["task_router_input"]`` of the model
        output. Gradients are stopped through both arguments.
    """
    params = jax.tree.map(jax.lax.stop_gradient, router_params)
    x = jax.lax.stop_gradient(router_input)
    return router_logits(params, x).mean(axis=1)


def contrastive_loss(
    query_logits: jax.Array,
    key_logits: jax.Array,
    bilinear: jax.Array,
    task_id: jax.Array,
) -> jax.Array:
    """Symmetric InfoNCE with bilinear similarity.

    Args:
      query_logits: ``[B, E]`` online router logits (averaged over tokens).
      key_logits: ``[B, E]`` EMA router logits of the same segments.
      bilinear: ``[E, E]`` learnable ``W``; similarity ``s_ij = q_i W k_j``.
      task_id: ``[B]`` int; rows with equal ids are positives (the other
        segment of the same task). Self pairs ``(i, i)`` are excluded.

    Returns:
      Scalar: mean over rows and over both directions (q->k and k->q) of
      ``-mean_{j in pos(i)} log softmax_j(s_i.)``. Rows without a positive
      are ignored.
    """
    if isinstance(bilinear, nnx.Variable):
        bilinear = bilinear[...]
    n = query_logits.shape[0]
    sim = query_logits @ bilinear @ key_logits.T
    sim = sim - jax.lax.stop_gradient(sim.max())
    eye = jnp.eye(n, dtype=bool)
    pos = (task_id[:, None] == task_id[None, :]) & ~eye
    npos = pos.sum(-1)
    has = (npos > 0).astype(sim.dtype)

    def one_direction(s):
        s = jnp.where(eye, -1e30, s)
        logp = jax.nn.log_softmax(s, axis=-1)
        per_row = -(jnp.where(pos, logp, 0.0).sum(-1)) / jnp.maximum(npos, 1)
        return (per_row * has).sum() / jnp.maximum(has.sum(), 1.0)

    return 0.5 * (one_direction(sim) + one_direction(sim.T))
