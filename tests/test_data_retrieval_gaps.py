"""Retrieval's near-duplicate cutoff: only entries more similar than it are skipped."""

import jax.numpy as jnp

from agentrl.data.retrieval import search


def test_an_entry_exactly_at_the_cutoff_is_kept():
    query = jnp.array([[1.0, 0.0]])
    keys = jnp.array([[0.0, 1.0], [1.0, 0.0], [0.6, 0.8]])  # similarity 0, 1, 0.6
    allowed = jnp.ones((1, 3), bool)
    sim, index = search(query, keys, allowed, k=2, max_similarity=1.0)
    assert index.tolist() == [[1, 2]] and sim[0, 0] == 1.0
    sim, index = search(query, keys, allowed, k=2, max_similarity=0.6)
    assert index.tolist() == [[2, 0]]  # 1.0 is beyond the cutoff, 0.6 is not
