"""Bandit sources learn: sublinear regret, close to textbook numpy versions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs
from agentrl.sources.registry import generate

NUM_TASKS = 400
HORIZON = 500


def _dpt_bandit_tasks():
    env = envs.make("gaussian_bandit")  # DPT: 5 arms, H = 500, variance 0.3
    keys = jax.random.split(jax.random.key(123), NUM_TASKS)
    params = jax.vmap(env.sample_params)(keys)
    return env, params


def _regret_curve(means: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """Mean over tasks of cumulative regret ``[step]``."""
    gap = means.max(1, keepdims=True) - np.take_along_axis(means, actions, 1)
    return np.cumsum(gap, axis=1).mean(0)


def _numpy_ucb(means, noise_std, c, rng):
    n, k = means.shape
    counts, sums = np.zeros((n, k)), np.zeros((n, k))
    actions = np.zeros((n, HORIZON), np.int64)
    rows = np.arange(n)
    for t in range(HORIZON):
        if t < k:
            a = np.full(n, t)
        else:
            score = sums / counts + c * np.sqrt(2 * np.log(t) / counts)
            a = score.argmax(1)
        r = means[rows, a] + noise_std * rng.standard_normal(n)
        counts[rows, a] += 1
        sums[rows, a] += r
        actions[:, t] = a
    return actions


def _numpy_ucb_dpt(means, noise_std, c, rng):
    """DPT's reference "UCB1.0" as its online evaluation runs it
    (``UCBPolicy.act_numpy_vec``): mean + c / max(1, sqrt(n)), untried mean
    0, but the lowest-index untried arm first while there is one."""
    n, k = means.shape
    counts, sums = np.zeros((n, k)), np.zeros((n, k))
    actions = np.zeros((n, HORIZON), np.int64)
    rows = np.arange(n)
    for t in range(HORIZON):
        score = sums / np.maximum(counts, 1) + c / np.maximum(1, np.sqrt(counts))
        a, j = score.argmax(1), counts.argmin(1)
        a = np.where(counts[rows, j] == 0, j, a)
        r = means[rows, a] + noise_std * rng.standard_normal(n)
        counts[rows, a] += 1
        sums[rows, a] += r
        actions[:, t] = a
    return actions


def _numpy_gaussian_ts(means, noise_var, rng, mu0=0.5, var0=1 / 12):
    n, k = means.shape
    counts, sums = np.zeros((n, k)), np.zeros((n, k))
    actions = np.zeros((n, HORIZON), np.int64)
    rows = np.arange(n)
    for t in range(HORIZON):
        post_var = 1 / (1 / var0 + counts / noise_var)
        post_mean = post_var * (mu0 / var0 + sums / noise_var)
        a = (post_mean + np.sqrt(post_var) * rng.standard_normal((n, k))).argmax(1)
        r = means[rows, a] + np.sqrt(noise_var) * rng.standard_normal(n)
        counts[rows, a] += 1
        sums[rows, a] += r
        actions[:, t] = a
    return actions


def _numpy_bernoulli_ts(means, rng):
    n, k = means.shape
    succ, fail = np.zeros((n, k)), np.zeros((n, k))
    actions = np.zeros((n, HORIZON), np.int64)
    rows = np.arange(n)
    for t in range(HORIZON):
        a = rng.beta(1 + succ, 1 + fail).argmax(1)
        r = rng.random(n) < means[rows, a]
        succ[rows, a] += r
        fail[rows, a] += ~r
        actions[:, t] = a
    return actions


def _check_sublinear(curve: np.ndarray, random_curve_end: float):
    first, second = curve[HORIZON // 2 - 1], curve[-1] - curve[HORIZON // 2 - 1]
    assert second < 0.6 * first, (first, second)  # linear regret: second == first
    assert curve[-1] < 0.4 * random_curve_end


@pytest.mark.long
@pytest.mark.parametrize("source", ["ucb", "ucb_dpt", "thompson"])
def test_gaussian_regret_sublinear_and_matches_numpy(source):
    """Mean final regret over 3 runs of each side (one run's spread is ~5%
    of it) within 10% of the numpy reference's."""
    env, params = _dpt_bandit_tasks()
    means = np.asarray(params.means, np.float64)
    reference = {
        "ucb": lambda rng: _numpy_ucb(means, np.sqrt(0.3), 1.0, rng),
        "ucb_dpt": lambda rng: _numpy_ucb_dpt(means, np.sqrt(0.3), 1.0, rng),
        "thompson": lambda rng: _numpy_gaussian_ts(means, 0.3, rng),
    }[source]
    random_end = (means.max(1) - means.mean(1)).mean() * HORIZON
    ours, theirs = [], []
    for key, rng in zip(
        jax.random.split(jax.random.key(0), 3), range(7, 10), strict=True
    ):
        history = generate(source, env, params, key, num_episodes=1)
        assert history.action.shape == (NUM_TASKS, HORIZON)
        curve = _regret_curve(means, np.asarray(history.action))
        ref_curve = _regret_curve(means, reference(np.random.default_rng(rng)))
        _check_sublinear(curve, random_end)
        _check_sublinear(ref_curve, random_end)
        ours.append(curve[-1])
        theirs.append(ref_curve[-1])
    assert abs(np.mean(ours) - np.mean(theirs)) <= 0.1 * np.mean(theirs), (
        ours,
        theirs,
    )


@pytest.mark.long
def test_bernoulli_thompson_matches_numpy():
    env = envs.make("bernoulli_bandit", num_arms=5, horizon=HORIZON)
    keys = jax.random.split(jax.random.key(5), NUM_TASKS)
    params = jax.vmap(env.sample_params)(keys)
    means = np.asarray(params.means, np.float64)
    history = generate("thompson", env, params, jax.random.key(1), 1)
    curve = _regret_curve(means, np.asarray(history.action))
    ref = _regret_curve(means, _numpy_bernoulli_ts(means, np.random.default_rng(3)))
    _check_sublinear(curve, (means.max(1) - means.mean(1)).mean() * HORIZON)
    assert abs(curve[-1] - ref[-1]) <= 0.1 * ref[-1], (curve[-1], ref[-1])


@pytest.mark.long
def test_epsilon_greedy_random_and_dpt_rollin():
    env = envs.make("gaussian_bandit", horizon=200)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(2), 200))
    means = np.asarray(params.means)
    best = means.argmax(1)
    picks = {}
    for source in ("epsilon_greedy", "random", "dpt_rollin"):
        h = generate(source, env, params, jax.random.key(3), 1)
        picks[source] = (np.asarray(h.action) == best[:, None]).mean(1)
        # oracle labels are recorded at every step
        np.testing.assert_array_equal(
            h.optimal_action, np.repeat(best[:, None], 200, 1)
        )
    assert picks["epsilon_greedy"].mean() > 0.6
    assert abs(picks["random"].mean() - 0.2) < 0.03
    # DPT's Dirichlet-mixed roll-in: best-arm share varies widely across tasks
    assert picks["dpt_rollin"].std() > 0.15
    assert picks["dpt_rollin"].min() < 0.05 and picks["dpt_rollin"].max() > 0.6


def test_ucb_dpt_pulls_each_arm_once_first_in_index_order():
    """The reference's vectorised UCB1.0 pulls the lowest untried arm while
    one is untried; an untried arm's score alone (c, mean 0) loses to any
    tried arm that paid more than 0, so without the rule arms go untried."""
    env = envs.make("gaussian_bandit", noise_std=0.3)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(3), 200))
    h = generate("ucb_dpt", env, params, jax.random.key(4), 1)
    first = np.asarray(h.action)[:, :5]
    np.testing.assert_array_equal(first, np.tile(np.arange(5), (200, 1)))


def test_dpt_rollin_mixing_weights_are_the_reference_grid():
    """``rollin_bandit``: w uniform on {0, 0.1, ..., 1}, so one context in
    11 is a single arm (w = 1); a continuous w almost never is."""
    from agentrl.sources.bandits import FixedPolicyBandit

    agent = FixedPolicyBandit(num_arms=5)
    p = np.asarray(
        jax.vmap(agent.init, (0, None))(
            jax.random.split(jax.random.key(0), 22_000), None
        )
    )
    one_arm = (p.max(1) == 1.0).mean()
    assert abs(one_arm - 1 / 11) < 0.006, one_arm  # sd ~0.002
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-5)


def test_bandit_agents_are_plain_agents():
    from agentrl.agents.agent import run_agent
    from agentrl.sources import bandits

    env = envs.make("bernoulli_bandit", num_arms=3, horizon=50)
    params = env.default_params  # means 0.1, 0.5, 0.9
    agent = bandits.UCB(num_arms=3)
    history, state = run_agent(env, agent, params, jax.random.key(0), 300)
    assert float(state.t) == 300
    assert int(jnp.argmax(state.count)) == 2


@pytest.mark.long
def test_dpt_reference_noise_and_baselines():
    """The DPT reference's bandit: noise std 0.3; its UCB1.0 and matched-prior
    Thompson sampling both beat textbook UCB1, which explores far more."""
    from agentrl.sources import registry

    env = envs.make("gaussian_bandit", noise_std=0.3)
    assert env.noise_variance == pytest.approx(0.09)
    with pytest.raises(ValueError, match="one of `noise_variance` and `noise_std`"):
        envs.make("gaussian_bandit", noise_std=0.3, noise_variance=0.09)
    ts = registry.make_agent("thompson", env, 1)
    assert (ts.noise_variance, ts.prior_mean) == pytest.approx((0.09, 0.5))
    assert ts.prior_variance == pytest.approx(1 / 12)
    keys = jax.random.split(jax.random.key(11), 200)
    params = jax.vmap(env.sample_params)(keys)
    means = np.asarray(params.means, np.float64)
    regret = {
        s: _regret_curve(
            means, np.asarray(generate(s, env, params, jax.random.key(4), 1).action)
        )[-1]
        for s in ("ucb", "ucb_dpt", "thompson")
    }
    assert regret["ucb_dpt"] < 0.8 * regret["ucb"], regret
    assert regret["thompson"] < 0.8 * regret["ucb"], regret
