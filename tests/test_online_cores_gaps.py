"""RL² core pieces: grid and step features by hand, the GRU's backward pass."""

import jax
import jax.numpy as jnp
import numpy as np

from agentrl.envs.spaces import Discrete
from agentrl.rl.cores import _gru_forward, grid_features, gru_scan, step_features
from agentrl.rl.nets import ActionHead


def test_grid_features_of_a_cell_by_hand():
    """Cell ``layer * 9 + y * 3 + x`` = 1 * 9 + 2 * 3 + 1 on a 3x3 grid of
    two layers: one-hot x = 1, one-hot y = 2, (x, y) / 3, one-hot layer 1."""
    out = grid_features(Discrete(18), 16, 3)
    expected = [0, 1, 0, 0, 0, 1, 1 / 3, 2 / 3, 0, 1]
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_step_features_end_with_the_reward_and_the_new_episode_flag():
    """``[obs one-hot, previous action, previous reward, new-episode flag]``."""
    space = Discrete(3)
    head = ActionHead(Discrete(2))
    first = step_features(space, head, 1, 1, 0.5, True)
    later = step_features(space, head, 1, 1, 0.5, False)
    np.testing.assert_allclose(first[:3], [0, 1, 0])
    np.testing.assert_allclose(first[-2:], [0.5, 1.0])
    np.testing.assert_allclose(later[-2:], [0.5, 0.0])


def test_gru_scan_gradients_equal_autodiff_of_the_plain_scan():
    """The hand-written backward pass gives autodiff's gradients for every
    input, with resets (``keep = 0``) inside the sequence."""
    t, n, h = 5, 3, 4
    k = jax.random.split(jax.random.key(7), 5)
    wh = 0.5 * jax.random.normal(k[0], (h, 3 * h))
    bh = 0.1 * jax.random.normal(k[1], (3 * h,))
    xi = jax.random.normal(k[2], (t, n, 3 * h))
    keep = jnp.ones((t, n)).at[2, 0].set(0.0).at[3, 2].set(0.0)
    h0 = jax.random.normal(k[3], (n, h))
    w = jax.random.normal(k[4], (t, n, h))

    def loss(f):
        return lambda wh, bh, xi, h0: jnp.sum(w * f(wh, bh, xi, keep, h0))

    args = (wh, bh, xi, h0)
    got = jax.grad(loss(gru_scan), argnums=(0, 1, 2, 3))(*args)
    plain = loss(lambda *a: _gru_forward(*a)[0])
    want = jax.grad(plain, argnums=(0, 1, 2, 3))(*args)
    for g, e in zip(got, want, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
