"""Bandit rewards, noise levels, arm-mean draws and oracle, against the module doc."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs


def _pulls(env, params, arm, key, n=4000):
    """``[n]`` rewards of ``n`` independent pulls of ``arm``."""
    _, state = env.reset(jax.random.key(0), params)
    pull = jax.vmap(lambda k: env.step(k, state, jnp.int32(arm), params)[2])
    return np.asarray(jax.jit(pull)(jax.random.split(key, n)))


def test_bernoulli_arms_pay_one_with_probability_their_mean():
    env = envs.make("bernoulli_bandit", num_arms=2, horizon=10)
    params = env._params(jnp.array([0.1, 0.9], jnp.float32))
    low = _pulls(env, params, 0, jax.random.key(31))
    high = _pulls(env, params, 1, jax.random.key(32))
    assert set(np.unique(low)) | set(np.unique(high)) <= {0.0, 1.0}
    assert low.mean() == pytest.approx(0.1, abs=0.02)  # sd 0.005
    assert high.mean() == pytest.approx(0.9, abs=0.02)


@pytest.mark.parametrize(
    "kw,std",
    [({}, np.sqrt(0.3)), ({"noise_std": 0.3}, 0.3), ({"noise_variance": 0.04}, 0.2)],
)
def test_gaussian_noise_level_from_variance_or_std(kw, std):
    """Default variance 0.3 (the DPT paper's text); ``noise_std`` is a std."""
    env = envs.make("gaussian_bandit", num_arms=3, horizon=10, **kw)
    params = env.default_params
    assert float(params.noise_std) == pytest.approx(std, rel=1e-6)
    rewards = _pulls(env, params, 2, jax.random.key(33))
    assert rewards.std() == pytest.approx(std, rel=0.05)
    assert rewards.mean() == pytest.approx(float(params.means[2]), abs=0.05)


def test_giving_both_noise_levels_is_refused():
    with pytest.raises(ValueError, match="one of `noise_variance` and `noise_std`"):
        envs.make("gaussian_bandit", noise_variance=0.3, noise_std=0.3)


@pytest.mark.parametrize("name", ["bernoulli_bandit", "gaussian_bandit"])
def test_oracle_pulls_the_best_arm_for_horizon_times_its_mean(name):
    env = envs.make(name, num_arms=4, horizon=10)
    params = env._params(jnp.array([0.2, 0.7, 0.4, 0.1], jnp.float32))
    _, state = env.reset(jax.random.key(0), params)
    assert int(env.optimal_action(state, params)) == 1
    assert float(env.optimal_return(params)) == pytest.approx(7.0)


def test_arm_means_are_uniform_on_the_unit_interval():
    env = envs.make("bernoulli_bandit", num_arms=5, horizon=10)
    means = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(34), 2000))
    means = np.asarray(means.means).ravel()  # 10,000 draws
    assert means.min() >= 0.0 and means.max() <= 1.0
    assert means.min() < 0.01 and means.max() > 0.99
    assert means.mean() == pytest.approx(0.5, abs=0.01)
    assert (means > 0.75).mean() == pytest.approx(0.25, abs=0.02)


def test_means_beta_draws_beta_a_b_not_beta_b_a():
    env = envs.make("bernoulli_bandit", num_arms=5, horizon=10, means_beta=(2, 5))
    means = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(35), 2000))
    # Beta(2, 5): mean 2 / 7, variance 10 / 392
    assert float(means.means.mean()) == pytest.approx(2 / 7, abs=0.01)
    assert float(means.means.var()) == pytest.approx(10 / 392, rel=0.1)


def test_means_beta_must_be_positive():
    with pytest.raises(ValueError, match="`means_beta`"):
        envs.make("bernoulli_bandit", means_beta=(0, 1))
