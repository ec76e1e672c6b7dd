"""Retrieval from an external memory of sub-trajectories, on the device (RA-DT).

The memory holds pieces of histories (``P`` consecutive steps), each keyed
by a frozen encoder's embedding of its first ``q`` steps; a query is the
same encoder's embedding of the last ``q`` steps of the current context, so
a hit is a piece whose past looks like the present and whose remaining
``P - q`` steps show what followed (the reference's past + future context).

- :class:`FrozenEncoder`: random features that are never trained. Step
  ``t`` is ``(obs_t, a_{t-1}, r_{t-1})`` (what is known when acting at
  ``t``); its feature is ``tanh(E_obs[obs_t] + E_act[a_{t-1}] + r_{t-1}
  w_r)`` and a key is the L2-normalised projection of the mean feature over
  the steps. Stands in for the paper's frozen pretrained language model
  (weights cannot be downloaded at run time); discrete observations and
  actions only.
- :func:`search`: exact maximum inner product search (cosine, the keys are
  normalised) over the allowed entries, top ``k`` by ``jax.lax.top_k``.
- :func:`reweight`: the paper's score of the ``k`` candidates,
  ``min_max(similarity) + utility_weight * utility`` (relevance plus
  utility), and the best ``n`` of them.

Shapes: ``B`` queries, ``N`` memory entries, ``D`` key size.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

#: score of an entry that may not be retrieved (masked out before top-k)
BLOCKED = -jnp.inf


class FrozenEncoder(NamedTuple):
    """Frozen random-feature encoder tables (a pytree; see the module doc).

    ``obs [num_obs, H]``, ``action [num_actions, H]``, ``reward [H]``,
    ``out [H, D]``.
    """

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    out: jax.Array

    @classmethod
    def create(
        cls, seed: int, num_obs: int, num_actions: int, hidden: int, dim: int
    ) -> FrozenEncoder:
        """Tables drawn from ``key(seed)``: a pure function of the settings."""
        k_obs, k_act, k_rew, k_out = jax.random.split(jax.random.key(seed), 4)
        normal = jax.random.normal
        return cls(
            obs=normal(k_obs, (num_obs, hidden)),
            action=normal(k_act, (num_actions, hidden)),
            reward=normal(k_rew, (hidden,)),
            out=normal(k_out, (hidden, dim)) / jnp.sqrt(hidden),
        )

    def features(self, obs, prev_action, prev_reward) -> jax.Array:
        """``[..., H]`` step features of ``obs, prev_action, prev_reward [...]``."""
        x = self.obs[obs] + self.action[prev_action]
        return jnp.tanh(x + prev_reward.astype(jnp.float32)[..., None] * self.reward)

    def pool(self, features: jax.Array, mask: jax.Array | None = None) -> jax.Array:
        """``[..., D]`` unit keys from ``features [..., T, H]`` (mean over the
        steps where ``mask [..., T]`` is True)."""
        if mask is None:
            mean = features.mean(-2)
        else:
            m = mask.astype(jnp.float32)[..., None]
            mean = (features * m).sum(-2) / jnp.maximum(m.sum(-2), 1.0)
        return normalise(mean @ self.out)


def normalise(x: jax.Array) -> jax.Array:
    """``x`` scaled to unit L2 norm along the last axis (zeros stay zero)."""
    return x / (jnp.linalg.norm(x, axis=-1, keepdims=True) + 1e-8)


def search(
    query: jax.Array,
    keys: jax.Array,
    allowed: jax.Array,
    k: int,
    max_similarity: float | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Top-``k`` maximum inner product search.

    Args:
      query: ``[B, D]``; keys: ``[N, D]`` shared, or ``[B, N, D]`` one
        memory per query (an agent's own history); allowed: ``[B, N]`` bool.
      max_similarity: entries more similar than this are skipped (the
        reference's near-duplicate cutoff); ``None``: none.

    Returns:
      ``(similarity [B, k], index [B, k])``, best first; a slot with no
      allowed entry left has similarity ``-inf``.
    """
    if keys.ndim == 2:
        sim = query @ keys.T  # [B, N]
    else:
        sim = jnp.einsum("bd,bnd->bn", query, keys)
    if max_similarity is not None:
        allowed = allowed & (sim <= max_similarity)
    sim = jnp.where(allowed, sim, BLOCKED)
    return jax.lax.top_k(sim, min(k, keys.shape[-2]))


def min_max(x: jax.Array, valid: jax.Array) -> jax.Array:
    """``x [B, k]`` scaled to ``[0, 1]`` per row over the ``valid`` entries."""
    lo = jnp.min(jnp.where(valid, x, jnp.inf), -1, keepdims=True)
    hi = jnp.max(jnp.where(valid, x, -jnp.inf), -1, keepdims=True)
    return jnp.where(valid, (x - lo) / (hi - lo + 1e-8), 0.0)


def reweight(
    similarity: jax.Array, utility: jax.Array, utility_weight: float, n: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The ``n`` best of ``k`` candidates by relevance plus utility.

    ``score = min_max(similarity) + utility_weight * utility``; ``utility``
    is already on its scale (a 0/1 task match, or min-maxed returns).

    Args:
      similarity: ``[B, k]`` from :func:`search` (``-inf``: no candidate).
      utility: ``[B, k]``.

    Returns:
      ``(score [B, n], slot [B, n], found [B, n])``: ``slot`` indexes the
      ``k`` candidates; ``found`` is False where no candidate was left.
    """
    valid = jnp.isfinite(similarity)
    score = min_max(similarity, valid) + utility_weight * utility
    score = jnp.where(valid, score, BLOCKED)
    if score.shape[-1] < n:  # fewer candidates than slots: pad with none
        pad = jnp.full((*score.shape[:-1], n - score.shape[-1]), BLOCKED)
        score = jnp.concatenate([score, pad], -1)
    best, slot = jax.lax.top_k(score, n)
    slot = jnp.minimum(slot, similarity.shape[-1] - 1)
    return best, slot, jnp.isfinite(best)
