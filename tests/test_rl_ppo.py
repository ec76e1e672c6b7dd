"""PPO written once (agentrl.rl): GAE against hand-worked numbers and a plain
loop, the clipped surrogate's clipping, the optimizer chain, the SGD scan."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from agentrl.envs.spaces import Box, Discrete
from agentrl.rl.nets import ActionHead, categorical_logp_entropy
from agentrl.rl.ppo import (
    Learner,
    epoch_permutations,
    gae,
    gae_across_episodes,
    normalize,
    optimizer,
    ppo_loss,
    sgd_epochs,
    successor_values,
)


def _gae_loop(value, next_value, reward, terminal, done, gamma, lam):
    """The textbook recursion, one step at a time in numpy (float64)."""
    adv, acc = np.zeros(len(value)), 0.0
    for t in reversed(range(len(value))):
        delta = reward[t] + gamma * (1 - terminal[t]) * next_value[t] - value[t]
        acc = delta + gamma * lam * (1 - done[t]) * acc
        adv[t] = acc
    return adv


def test_gae_per_episode_by_hand():
    # gamma = 0.5, lam = 1. Step 1 is truncated (bootstraps from its final
    # observation's value 8, the recursion stops); step 3 is terminated.
    value = jnp.array([1.0, 2.0, 3.0, 4.0])
    next_value = jnp.array([2.0, 8.0, 4.0, 100.0])
    reward = jnp.array([1.0, 0.0, 2.0, 1.0])
    terminated = jnp.array([False, False, False, True])
    done = jnp.array([False, True, False, True])
    adv = gae(value, next_value, reward, terminated, done, 0.5, 1.0)
    # deltas: 1 + 1 - 1 = 1; 0 + 4 - 2 = 2; 2 + 2 - 3 = 1; 1 - 4 = -3
    # (the terminal step's successor value 100 does not count)
    np.testing.assert_allclose(adv, [1 + 0.5 * 2, 2.0, 1 + 0.5 * -3, -3.0])


@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (0.9, 0.3), (1.0, 1.0)])
def test_gae_equals_the_plain_loop(gamma, lam):
    k = jax.random.split(jax.random.key(0), 5)
    t = 17
    value = jax.random.normal(k[0], (t,))
    next_value = jax.random.normal(k[1], (t,))
    reward = jax.random.normal(k[2], (t,))
    terminal = jax.random.bernoulli(k[3], 0.2, (t,))
    done = terminal | jax.random.bernoulli(k[4], 0.2, (t,))
    adv = gae(value, next_value, reward, terminal, done, gamma, lam)
    want = _gae_loop(
        *(np.asarray(a, np.float64) for a in (value, next_value, reward)),
        np.asarray(terminal, np.float64),
        np.asarray(done, np.float64),
        gamma,
        lam,
    )
    np.testing.assert_allclose(adv, want, rtol=1e-5, atol=1e-5)


def test_gae_across_episodes_is_gae_with_the_trial_end_as_both_masks():
    k = jax.random.split(jax.random.key(1), 4)
    value = jax.random.normal(k[0], (6, 3))
    last = jax.random.normal(k[1], (3,))
    reward = jax.random.normal(k[2], (6, 3))
    trial_end = jax.random.bernoulli(k[3], 0.3, (6, 3))
    following = successor_values(value, last)
    np.testing.assert_array_equal(following[:-1], value[1:])
    np.testing.assert_array_equal(following[-1], last)
    a = gae_across_episodes(value, last, reward, trial_end, 0.9, 0.8)
    b = gae(value, following, reward, trial_end, trial_end | False, 0.9, 0.8)
    np.testing.assert_array_equal(a, b)
    for env in range(3):  # each column is its own stream
        want = _gae_loop(
            *(np.asarray(x[:, env], np.float64) for x in (value, following, reward)),
            np.asarray(trial_end[:, env], np.float64),
            np.asarray(trial_end[:, env], np.float64),
            0.9,
            0.8,
        )
        np.testing.assert_allclose(a[:, env], want, rtol=1e-5, atol=1e-5)


def _loss(logp, adv, clip=0.2):
    n = logp.shape[0]
    zeros = jnp.zeros(n)
    return ppo_loss(logp, zeros, zeros, zeros, adv, zeros, clip, 0.5, 0.01)


def test_loss_clips_the_ratio_on_the_side_the_advantage_pushes():
    adv = jnp.array([1.0, -1.0])  # normalised: stays [1, -1]
    np.testing.assert_allclose(normalize(adv), adv, rtol=1e-6)
    # ratio e^0.5 > 1.2 on a positive advantage: clipped, no gradient;
    # ratio e^-0.5 < 0.8 on a negative advantage: clipped, no gradient.
    logp = jnp.array([0.5, -0.5])
    grad = jax.grad(lambda lp: _loss(lp, adv)[0])(logp)
    np.testing.assert_array_equal(grad, [0.0, 0.0])
    loss, m = _loss(logp, adv)
    np.testing.assert_allclose(m["pg_loss"], -(1.2 * 1.0 + 0.8 * -1.0) / 2, rtol=1e-6)
    # the pessimistic side is not clipped: a ratio below 1 - eps on a
    # positive advantage (and above 1 + eps on a negative one) keeps its
    # gradient, d(-r A / 2)/d logp = -r A / 2
    logp = jnp.array([-0.5, 0.5])
    grad = jax.grad(lambda lp: _loss(lp, adv)[0])(logp)
    r = np.exp([-0.5, 0.5])
    np.testing.assert_allclose(grad, -r * np.array([1.0, -1.0]) / 2, rtol=1e-6)


def test_loss_terms_and_kl():
    k = jax.random.split(jax.random.key(2), 6)
    logp, old, ent, value, adv, target = (jax.random.normal(kk, (8,)) for kk in k)
    loss, m = ppo_loss(logp, old, ent, value, adv, target, 0.2, 0.5, 0.01)
    np.testing.assert_allclose(m["vf_loss"], 0.5 * np.mean((value - target) ** 2))
    np.testing.assert_allclose(m["entropy"], np.mean(ent))
    r = np.exp(np.asarray(logp - old))
    np.testing.assert_allclose(m["approx_kl"], np.mean(r - 1 - np.log(r)), rtol=1e-5)
    want = m["pg_loss"] + 0.5 * m["vf_loss"] - 0.01 * m["entropy"]
    np.testing.assert_allclose(loss, want, rtol=1e-6)
    # at ratio 1 the surrogate is minus the normalised advantages' mean (0)
    _, m = ppo_loss(old, old, ent, value, adv, target, 0.2, 0.5, 0.01)
    assert abs(float(m["pg_loss"])) < 1e-6 and float(m["approx_kl"]) == 0.0


def test_optimizer_chain():
    params = {"w": jnp.array([1.0, -2.0])}
    grads = {"w": jnp.array([3.0, 4.0])}  # norm 5: clipped to 1
    tx = optimizer(0.1, 1.0)
    updates, _ = tx.update(grads, tx.init(params), params)
    # Adam's first step is sign(g) (up to eps); the learning rate scales it
    np.testing.assert_allclose(updates["w"], [-0.1, -0.1], rtol=1e-5)
    ref = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(0.1))
    ref_updates, _ = ref.update(grads, ref.init(params), params)
    np.testing.assert_array_equal(updates["w"], ref_updates["w"])
    # decoupled weight decay: -lr * wd * params on top, and its own state slot
    tx = optimizer(0.1, 1.0, eps=1e-5, weight_decay=0.5)
    assert len(tx.init(params)) == 4
    decayed, _ = tx.update(grads, tx.init(params), params)
    np.testing.assert_allclose(
        decayed["w"] - updates["w"], -0.1 * 0.5 * params["w"], rtol=1e-3
    )


def test_sgd_epochs_and_permutations():
    rows = epoch_permutations(jax.random.key(3), 8, 3, 4)
    assert rows.shape == (12, 2)
    for epoch in np.asarray(rows).reshape(3, 8):
        assert sorted(epoch) == list(range(8))
    data = jnp.arange(8.0)

    def loss(params, x):
        return jnp.mean((params - x) ** 2), {"x": x.mean()}

    tx = optax.sgd(0.1)
    learner, aux = sgd_epochs(
        tx, loss, Learner(jnp.float32(0.0), tx.init(0.0)), rows, lambda i: (data[i],)
    )
    assert isinstance(learner, Learner)
    assert aux["x"].shape == (12,)
    assert 0.0 < float(learner.params) < 7.0  # moved toward the data's mean


def test_action_heads():
    head = ActionHead(Discrete(4))
    logits = jnp.array([[0.0, 1.0, 2.0, 3.0]])
    logp, ent = head.logp_entropy(logits, None, jnp.array([2]))
    logp2, ent2 = categorical_logp_entropy(logits, jnp.array([2]))
    np.testing.assert_array_equal(logp, logp2)
    np.testing.assert_allclose(logp, jax.nn.log_softmax(logits)[:, 2])
    p = jax.nn.softmax(logits)
    np.testing.assert_allclose(ent, -(p * jnp.log(p)).sum(-1), rtol=1e-6)
    box = ActionHead(Box(-2.0, 2.0, (2,), jnp.float32))
    assert box.out == 2 and not box.discrete
    np.testing.assert_allclose(box.to_env(jnp.array([0.5, 3.0])), [1.0, 2.0])


# Mutants the tests above let through (session 56's mutation pass).


def test_advantages_are_normalised_over_the_whole_minibatch():
    # adv [T=2, N=2] = [[0, 2], [0, 2]]: over the whole minibatch mean 1,
    # std 1, normalised [[-1, 1], [-1, 1]] (per env over time each column
    # would be constant and normalise to 0). At ratio 1 (logp = old_logp)
    # both sides of the min are r * A (clip(1) = 1), so
    # d pg / d logp_i = -A_norm_i / 4.
    adv = jnp.array([[0.0, 2.0], [0.0, 2.0]])
    zeros = jnp.zeros((2, 2))

    def pg(logp):
        return ppo_loss(logp, zeros, zeros, zeros, adv, zeros, 0.2, 0.5, 0.0)[1][
            "pg_loss"
        ]

    grad = jax.grad(pg)(zeros)
    np.testing.assert_allclose(grad, [[0.25, -0.25], [0.25, -0.25]], rtol=1e-5)
