"""T2MIR's task-router contrast (pass 10 of the mutation passes): several
positives per row, rows without one, and where gradients flow (the
reference's keys come from the target router on ``x.detach()``, NJU-RL/T2MIR
``T2MIR-AD/algorithms/moe.py``, ``LinearGLUMoELayerContrastive.forward``)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl.models.contrastive import (
    contrastive_loss,
    router_features,
    task_router_logits,
)

RNG = np.random.default_rng(0)
W = jnp.asarray(RNG.normal(size=(3, 3)), jnp.float32)


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _by_hand(q, k, w, task):
    """The docstring's loss in NumPy: rows 2i, 2i + 1 are pairs; each half's
    queries against the other half's keys, -mean log p over the positives,
    averaged over the rows that have one."""
    q, k, w, task = (np.asarray(x, np.float64) for x in (q, k, w, task))

    def half(qs, ks, tq, tk):
        logp = _log_softmax(qs @ w @ ks.T)
        rows = []
        for i in range(len(qs)):
            pos = tk == tq[i]
            if pos.any():
                rows.append(-logp[i, pos].mean())
        return np.mean(rows)

    return 0.5 * (
        half(q[0::2], k[1::2], task[0::2], task[1::2])
        + half(q[1::2], k[0::2], task[1::2], task[0::2])
    )


def test_a_row_with_several_positives_averages_their_log_probabilities():
    q = jnp.asarray(RNG.normal(size=(6, 3)), jnp.float32)
    k = jnp.asarray(RNG.normal(size=(6, 3)), jnp.float32)
    task = jnp.array([0, 0, 1, 1, 0, 0])  # task 0 twice in each half
    np.testing.assert_allclose(
        contrastive_loss(q, k, W, task), _by_hand(q, k, W, task), rtol=1e-5
    )


def test_rows_without_a_positive_are_left_out_of_the_mean():
    q = jnp.asarray(RNG.normal(size=(4, 3)), jnp.float32)
    k = jnp.asarray(RNG.normal(size=(4, 3)), jnp.float32)
    task = jnp.array([0, 0, 1, 2])  # the second pair's rows have no positive
    want = _by_hand(q, k, W, task)
    np.testing.assert_allclose(contrastive_loss(q, k, W, task), want, rtol=1e-5)


def test_a_batch_that_is_not_pairs_is_refused():
    x = jnp.zeros((3, 3))
    with pytest.raises(ValueError, match="pairs of rows"):
        contrastive_loss(x, x, W, jnp.arange(3))


def test_no_gradient_reaches_the_keys_router_or_its_input():
    params = {
        "w1": jnp.asarray(RNG.normal(size=(4, 3)), jnp.float32),
        "w2": jnp.asarray(RNG.normal(size=(3, 3)), jnp.float32),
    }
    x = jnp.asarray(RNG.normal(size=(4, 5, 4)), jnp.float32)
    query = router_features(params, x * 0.5, False)
    task = jnp.array([0, 0, 1, 1])

    def loss(params, x):
        return contrastive_loss(query, task_router_logits(params, x), W, task)

    g_params, g_x = jax.grad(loss, argnums=(0, 1))(params, x)
    for g in (*jax.tree.leaves(g_params), g_x):
        np.testing.assert_array_equal(g, 0.0)
    # the same loss with the keys' gradient kept is not flat: the check bites
    keep = jax.grad(
        lambda x: contrastive_loss(query, router_features(params, x, False), W, task)
    )(x)
    assert float(jnp.abs(keep).max()) > 0


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_router_features_average_the_per_token_softmax_over_experts():
    # sharp logits (w2 x 10) so that the softmax over experts differs from
    # the uniform 1 / E that a softmax over tokens averages to
    w1 = RNG.normal(size=(4, 3)).astype(np.float32)
    w2 = 10.0 * RNG.normal(size=(3, 3)).astype(np.float32)
    x = RNG.normal(size=(2, 5, 4)).astype(np.float32)
    logits = np.tanh(x @ w1) @ w2  # [B, T, E]
    params = {"w1": jnp.asarray(w1), "w2": jnp.asarray(w2)}
    got = router_features(params, jnp.asarray(x), True)
    np.testing.assert_allclose(got, _softmax(logits).mean(1), rtol=1e-5, atol=1e-6)
    got = router_features(params, jnp.asarray(x), False)
    np.testing.assert_allclose(got, logits.mean(1), rtol=1e-5, atol=1e-5)
