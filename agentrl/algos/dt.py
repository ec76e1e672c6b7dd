"""Decision Transformer (Chen et al., 2021), return-conditioned, as a baseline.

DT predicts ``a_t`` from the returns-to-go ``R_<=t``, states ``s_<=t`` and
earlier actions. agentrl feeds the return-to-go through the observation: the
model's observation at step t is ``[one_hot(s_t) (or s_t), R_t / scale]``
(so a DT model has a continuous observation of size ``obs_size + 1``), with
the usual previous action and reward. Returns-to-go are computed inside each
episode of the window and reset at episode boundaries; at evaluation the
target return is decreased by the rewards received.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from agentrl.algos.losses import action_loss


def returns_to_go(reward: jax.Array, done: jax.Array) -> jax.Array:
    """``[B, T]`` sum of the rewards from t to the end of t's episode."""

    def back(carry, x):
        r, d = x
        carry = r + jnp.where(d, 0.0, carry)
        return carry, carry

    def one(r, d):
        _, rtg = jax.lax.scan(back, jnp.float32(0), (r, d), reverse=True)
        return rtg

    return jax.vmap(one)(reward.astype(jnp.float32), done)


def dt_observation(
    obs: jax.Array, rtg: jax.Array, num_obs: int | None, scale: float
) -> jax.Array:
    """``[B, T, obs_dim + 1]``: one-hot (discrete) or raw obs, then ``rtg/scale``."""
    base = (
        jax.nn.one_hot(obs, num_obs, dtype=jnp.float32)
        if num_obs is not None
        else obs.astype(jnp.float32).reshape(*obs.shape[:2], -1)
    )
    return jnp.concatenate([base, (rtg / scale)[..., None]], axis=-1)


def dt_loss(
    model: Any,
    batch: dict[str, jax.Array],
    *,
    num_obs: int | None,
    rtg_scale: float,
    deterministic: bool = False,
):
    """Return-conditioned next-action loss on windows of whole episodes.

    Args:
      batch: ``obs [B, T]``, ``action``, ``reward [B, T]``, ``done [B, T]``.
      num_obs: number of discrete observations (``None`` for vector obs).
      rtg_scale: returns-to-go are divided by it (e.g. the oracle return).
    """
    rtg = returns_to_go(batch["reward"], batch["done"])
    obs = dt_observation(batch["obs"], rtg, num_obs, rtg_scale)
    out = model(obs, batch["action"], batch["reward"], deterministic=deterministic)
    loss, metrics = action_loss(
        model.config.head, out, batch["action"], batch.get("mask")
    )
    return loss, metrics, out
