"""Action heads: the Gaussian's log std range, log-likelihoods and temperatures."""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from agentrl.models import ModelOutput, log_prob, sample_action
from agentrl.models.heads import LOG_STD_MAX, LOG_STD_MIN, ActionHead


def test_gaussian_log_std_spans_its_range_and_starts_midway():
    """``log_std`` lies in ``[LOG_STD_MIN, LOG_STD_MAX]``, reaching both
    ends for large pre-activations, and is their midpoint at zero."""
    head = ActionHead(4, 3, "gaussian", rngs=nnx.Rngs(0))
    h = 100.0 * jax.random.normal(jax.random.key(1), (256, 4))
    mean, log_std = head(h)
    assert mean.shape == log_std.shape == (256, 3)
    assert float(log_std.min()) >= LOG_STD_MIN and float(log_std.max()) <= LOG_STD_MAX
    assert float(log_std.min()) < LOG_STD_MIN + 0.01
    assert float(log_std.max()) > LOG_STD_MAX - 0.01
    head.proj.kernel[...] = jnp.zeros_like(head.proj.kernel[...])
    head.proj.bias[...] = jnp.zeros_like(head.proj.bias[...])
    mid = (LOG_STD_MIN + LOG_STD_MAX) / 2
    np.testing.assert_allclose(head(h)[1], mid, atol=1e-6)


def test_gaussian_log_prob_is_the_normal_density():
    """Summed over A, it is ``jax.scipy.stats.norm.logpdf`` of the action."""
    k1, k2, k3 = jax.random.split(jax.random.key(2), 3)
    mean = jax.random.normal(k1, (5, 3))
    log_std = jax.random.uniform(k2, (5, 3), minval=-2.0, maxval=1.0)
    action = jax.random.normal(k3, (5, 3))
    out = ModelOutput(action=mean, log_std=log_std, aux={})
    expected = jax.scipy.stats.norm.logpdf(action, mean, jnp.exp(log_std)).sum(-1)
    np.testing.assert_allclose(log_prob("gaussian", out, action), expected, rtol=1e-5)


def test_temperature_sharpens_or_removes_the_sampling_noise():
    """Categorical: logits / temperature, so at 0.05 a one-nat lead is
    taken every time. Gaussian: mean + temperature x std x noise, so at 0
    the sample is the mean and at 2 its spread is twice the std."""
    logits = jnp.tile(jnp.array([0.0, 1.0, 0.0]), (512, 1))
    cat = ModelOutput(action=logits, log_std=None, aux={})
    k1, k2, k3 = jax.random.split(jax.random.key(3), 3)
    assert (np.asarray(sample_action("categorical", cat, k1, 0.05)) == 1).all()
    mean = jnp.full((4096, 2), 0.5)
    gauss = ModelOutput(action=mean, log_std=jnp.full((4096, 2), -1.0), aux={})
    np.testing.assert_array_equal(sample_action("gaussian", gauss, k2, 0.0), mean)
    spread = np.std(np.asarray(sample_action("gaussian", gauss, k3, 2.0)))
    np.testing.assert_allclose(spread, 2 * np.exp(-1.0), rtol=0.05)
