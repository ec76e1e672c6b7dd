"""PPO written once (agentrl.rl.ppo): mutants the tests before let through.

Pass 9 of the hand-made mutation passes; every number worked out by hand
or in a NumPy loop.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from agentrl.rl.ppo import Learner, epoch_permutations, mean_metrics, sgd_epochs


def test_mean_metrics_recompute_the_loss_from_the_averaged_terms():
    # steps' terms averaged: pg 1.5, vf 3, entropy 0.5; the loss from them
    # with vf_coef 0.25 and ent_coef 2: 1.5 + 0.75 - 1 = 1.25
    metrics = {
        "pg_loss": jnp.array([1.0, 2.0]),
        "vf_loss": jnp.array([2.0, 4.0]),
        "entropy": jnp.array([0.0, 1.0]),
        "approx_kl": jnp.array([0.1, 0.3]),
    }
    out = mean_metrics(metrics, 0.25, 2.0)
    assert float(out["loss"]) == pytest.approx(1.25)
    assert float(out["approx_kl"]) == pytest.approx(0.2)
    assert float(out["entropy"]) == pytest.approx(0.5)


def test_sgd_epochs_carry_the_parameters_from_step_to_step():
    # loss (p - mean x_row)^2 under plain SGD at rate 0.25: each step
    # p <- p - 0.5 (p - mean x_row), from where the last step left p
    rows = jnp.array([[0, 1], [2, 3], [1, 3]])
    data = jnp.array([2.0, 4.0, 10.0, 6.0])

    def loss(p, x):
        return (p - x.mean()) ** 2, {"x": x.mean()}

    tx = optax.sgd(0.25)
    learner, aux = sgd_epochs(
        tx, loss, Learner(jnp.float32(0.0), tx.init(0.0)), rows, lambda i: (data[i],)
    )
    p = 0.0
    for row in np.asarray(rows):
        p = p - 0.5 * (p - np.asarray(data)[row].mean())
    assert float(learner.params) == pytest.approx(p)
    np.testing.assert_allclose(aux["x"], [3.0, 8.0, 5.0])


def test_every_epoch_draws_its_own_permutation():
    # 5 epochs of 12 indices in 3 minibatches: each epoch a shuffled
    # permutation of range(12), no two epochs in the same order
    rows = np.asarray(epoch_permutations(jax.random.key(4), 12, 5, 3))
    assert rows.shape == (15, 4)
    epochs = rows.reshape(5, 12)
    for epoch in epochs:
        assert sorted(epoch) == list(range(12))
        assert list(epoch) != list(range(12))
    assert len({tuple(e) for e in epochs}) == 5
