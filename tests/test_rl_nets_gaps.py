"""PPO's action heads against scipy: Gaussian density and entropy, temperature."""

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from agentrl.envs.spaces import Box, Discrete
from agentrl.rl.nets import ActionHead

BOX = ActionHead(Box(-2.0, 2.0, (2,), jnp.float32))  # half-width 2


def test_gaussian_log_prob_and_entropy_with_the_std_clipped():
    """A diagonal normal with ``log_std`` clipped to ``[-5, 2]``."""
    out = jnp.array([[0.3, -0.5], [1.0, 0.2]])
    raw = jnp.array([[0.1, 0.4], [2.5, -0.3]])
    for log_std, used in [([-0.4, 0.7], [-0.4, 0.7]), ([-7.0, 3.0], [-5.0, 2.0])]:
        logp, ent = BOX.logp_entropy(out, jnp.array(log_std), raw)
        std = np.exp(used)
        np.testing.assert_allclose(
            logp, stats.norm.logpdf(raw, out, std).sum(-1), rtol=1e-5
        )
        np.testing.assert_allclose(ent, stats.norm.entropy(0, std).sum(), rtol=1e-5)
        np.testing.assert_allclose(
            BOX.env_log_std(jnp.array(log_std)), np.array(used) + np.log(2.0)
        )


def test_temperature_scales_the_gaussian_std_and_the_logits():
    keys = jax.random.split(jax.random.key(0), 4000)
    out, log_std = jnp.zeros(2), jnp.log(jnp.array([0.2, 0.4]))
    raw = jax.vmap(lambda k: BOX.sample(k, out, log_std, temperature=0.5))(keys)
    np.testing.assert_allclose(np.std(raw, 0), [0.1, 0.2], rtol=0.05)
    head = ActionHead(Discrete(3))
    logits = jnp.array([0.0, 0.5, 1.0])
    keys = jax.random.split(jax.random.key(1), 20_000)
    drawn = jax.vmap(lambda k: head.sample(k, logits, None, temperature=0.5))(keys)
    shares = np.bincount(np.asarray(drawn), minlength=3) / 20_000
    np.testing.assert_allclose(shares, jax.nn.softmax(logits / 0.5), atol=0.015)
    assert int(head.sample(None, logits, None, greedy=True)) == 2
