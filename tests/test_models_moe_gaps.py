"""Noisy top-k routing of the T2MIR MoE, checked by hand."""

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from agentrl.models import Router
from agentrl.models.moe import _prob_in_top_k


def _phi(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def test_prob_in_top_k_uses_the_bar_to_stay_in_or_to_get_in():
    """Shazeer et al.: an expert in the top-k stays in while its logit beats
    the (k+1)-th noisy logit, one outside gets in by beating the k-th.
    Clean logits 0, noisy [2, 1, 0, -1], std 1: top-1 -> expert 0 stays in
    with P = Phi(0 - 1), the others get in with Phi(0 - 2); top-2 -> experts
    0, 1 with Phi(0 - 0), experts 2, 3 with Phi(0 - 1)."""
    clean = jnp.zeros((1, 4))
    noisy = jnp.array([[2.0, 1.0, 0.0, -1.0]])
    std = jnp.ones((1, 4))
    top1 = _prob_in_top_k(clean, noisy, std, 1)[0]
    np.testing.assert_allclose(top1, [_phi(-1)] + [_phi(-2)] * 3, rtol=1e-5)
    top2 = _prob_in_top_k(clean, noisy, std, 2)[0]
    np.testing.assert_allclose(top2, [0.5, 0.5, _phi(-1), _phi(-1)], rtol=1e-5)


def test_the_noise_std_has_a_floor_of_one_hundredth():
    """``noisy = clean + N(0, 1) (softplus(x W_noise) + 1e-2)``: with the
    softplus driven to 0 the logits still move by about 1e-2, so training
    gates over all experts (a softmax of the noisy logits) differ from the
    clean ones by that much, no more."""
    router = Router(4, 3, noisy=True, rngs=nnx.Rngs(noise=1, params=2))
    router.w_noise[...] = jnp.full((4, 3), -100.0)
    x = jnp.abs(jax.random.normal(jax.random.key(3), (256, 4))) + 1.0
    noisy = router.route(x, 3, deterministic=False)[0]
    clean = router.route(x, 3, deterministic=True)[0]
    gap = float(jnp.abs(noisy - clean).max())
    assert 1e-3 < gap < 0.05
