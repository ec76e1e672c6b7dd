"""T2MIR's task-wise router contrastive pieces: EMA router, keys, InfoNCE.

The online task router gives queries, an EMA copy of the router (rate
``tau = 0.005`` per update) applied to the same router input gives keys:
each the router's per-token logits, or their softmax (T2MIR's
``add_softmax``), averaged over the segment's tokens (``[B, E]``).
Similarity is bilinear ``q W k^T`` with a learnable ``W [E, E]``
(``DecisionModel.contrastive_w``). A batch holds ``B/2`` pairs, rows ``2i,
2i + 1`` two segments of one task; as T2MIR's ``contrastive_loss``, the
pairs' first rows are scored only against the second rows' keys (``B/2``
candidates) and the second rows against the first rows' keys.
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


def router_features(router_params, router_input: jax.Array, softmax: bool) -> jax.Array:
    """A segment's task-router features ``[B, E]``: the router's logits for
    each token of ``router_input [B, T, d]``, or their softmax over the ``E``
    experts if ``softmax`` (T2MIR's ``add_softmax``), averaged over ``T``.

    ``router_params``: a task ``Router``'s ``nnx.State`` (``w1, w2``) or a
    dict of arrays.
    """
    z = router_logits(router_params, router_input)
    if softmax:
        z = jax.nn.softmax(z, axis=-1)
    return z.mean(axis=1)


def task_router_logits(
    router_params, router_input: jax.Array, softmax: bool = False
) -> jax.Array:
    """The contrastive keys ``[B, E]``: :func:`router_features` of the EMA
    router's params on ``router_input [B, T, d]`` (``aux["task_router_input"]``
    of the model output), gradients stopped through both arguments."""
    params = jax.tree.map(jax.lax.stop_gradient, router_params)
    x = jax.lax.stop_gradient(router_input)
    return router_features(params, x, softmax)


def _info_nce(sim: jax.Array, pos: jax.Array) -> jax.Array:
    """``sim, pos [P, P]`` -> mean over rows with a positive of
    ``-mean_{j in pos(i)} log softmax_j(sim_i.)``."""
    logp = jax.nn.log_softmax(sim, axis=-1)
    npos = pos.sum(-1)
    has = (npos > 0).astype(sim.dtype)
    per_row = -jnp.where(pos, logp, 0.0).sum(-1) / jnp.maximum(npos, 1)
    return (per_row * has).sum() / jnp.maximum(has.sum(), 1.0)


def contrastive_loss(
    query_logits: jax.Array,
    key_logits: jax.Array,
    bilinear: jax.Array,
    task_id: jax.Array,
) -> jax.Array:
    """Symmetric InfoNCE with bilinear similarity across a batch's pair halves.

    Args:
      query_logits: ``[B, E]`` online router features (averaged over tokens).
      key_logits: ``[B, E]`` EMA router features of the same segments.
      bilinear: ``[E, E]`` learnable ``W``; similarity ``s_ij = q_i W k_j``.
      task_id: ``[B]`` int. ``B`` even; rows ``2i, 2i + 1`` are a pair (two
        segments of one task, the samplers' ``paired`` layout).

    Returns:
      Scalar: ``0.5 * (L(first rows' queries, second rows' keys) + L(second
      rows' queries, first rows' keys))``, ``L`` the mean over rows of
      ``-mean_{j in pos(i)} log softmax_j(s_i.)`` over the ``B/2`` keys of
      the other half, the positives those with the row's task (its pair's
      other row, and any other pair of that task). Rows without a positive
      are ignored. As T2MIR's ``contrastive_loss`` where each half holds
      distinct tasks.
    """
    if isinstance(bilinear, nnx.Variable):
        bilinear = bilinear[...]
    if query_logits.shape[0] % 2:
        raise ValueError(f"batch must be pairs of rows, got {query_logits.shape[0]}")
    q1, q2 = query_logits[0::2], query_logits[1::2]
    k1, k2 = key_logits[0::2], key_logits[1::2]
    t1, t2 = task_id[0::2], task_id[1::2]
    loss1 = _info_nce(q1 @ bilinear @ k2.T, t1[:, None] == t2[None, :])
    loss2 = _info_nce(q2 @ bilinear @ k1.T, t2[:, None] == t1[None, :])
    return 0.5 * (loss1 + loss2)
