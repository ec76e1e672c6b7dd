"""The shared action losses (``agentrl.algos.losses``): the mean over the
counted positions, accuracy over them only, the continuous heads' squared
error, and an all-padding batch."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl.algos.losses import action_loss, masked_mean
from agentrl.models.heads import ModelOutput


def _categorical(b=3, t=4, a=5, seed=0):
    logits = jax.random.normal(jax.random.key(seed), (b, t, a))
    return ModelOutput(logits, None, {})


def test_no_mask_is_the_mean_over_every_position():
    out = _categorical()
    target = jnp.zeros((3, 4), jnp.int32)
    loss, m = action_loss("categorical", out, target)
    ones, m1 = action_loss("categorical", out, target, jnp.ones((3, 4), bool))
    nll = -jax.nn.log_softmax(out.action)[..., 0]
    np.testing.assert_allclose(float(loss), float(nll.mean()), rtol=1e-6)
    np.testing.assert_allclose(float(loss), float(ones), rtol=1e-6)
    np.testing.assert_allclose(float(m["accuracy"]), float(m1["accuracy"]))


def test_accuracy_counts_the_masked_positions_only():
    # Targets are the argmax on the first two positions (counted) and never
    # the argmax on the last two (padding): accuracy 1 over the counted ones
    # (0.5 if padding were counted, 0 if "correct" were inverted).
    out = _categorical()
    best = jnp.argmax(out.action, -1)
    wrong = (best + 1) % 5
    target = jnp.concatenate([best[:, :2], wrong[:, 2:]], 1)
    mask = jnp.arange(4) < 2
    mask = jnp.broadcast_to(mask, (3, 4))
    _, m = action_loss("categorical", out, target, mask)
    assert float(m["accuracy"]) == 1.0
    _, m = action_loss("categorical", out, wrong, mask)
    assert float(m["accuracy"]) == 0.0


def test_mse_metric_is_the_squared_error_over_the_counted_positions():
    # "mse" head: its loss is the squared error summed over the action's
    # dimensions, averaged over counted positions (log_prob's definition),
    # and the mse metric measures the same; padding, with a huge error,
    # counts in neither.
    mean = jax.random.normal(jax.random.key(1), (2, 3, 4))
    target = mean + 0.5  # error 0.25 per dimension, 4 dimensions: 1.0
    target = target.at[:, 2].set(1e3)  # padded position
    mask = jnp.broadcast_to(jnp.arange(3) < 2, (2, 3))
    for head, log_std in (("mse", None), ("gaussian", jnp.zeros_like(mean))):
        loss, m = action_loss(head, ModelOutput(mean, log_std, {}), target, mask)
        assert "accuracy" not in m
        assert float(m["mse"]) == pytest.approx(1.0, rel=1e-5)
        if head == "mse":
            assert float(loss) == pytest.approx(float(m["mse"]), rel=1e-6)


def test_a_batch_with_nothing_counted_has_zero_loss_not_nan():
    assert float(masked_mean(jnp.ones((2, 3)), jnp.zeros((2, 3), bool))) == 0.0
