"""Bandit sources step by step: each act against its formula, each choice's odds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

from agentrl import envs
from agentrl.agents.agent import Step
from agentrl.sources import bandits
from agentrl.sources.registry import make_agent

DRAWS = 20_000  # act calls per choice-frequency check (sd of a share <= 0.0035)


def _stats(count, total):
    count = jnp.asarray(count, jnp.float32)
    return bandits.ArmStats(count, jnp.asarray(total, jnp.float32), count.sum(-1))


def _acts(agent, state, seed):
    """``DRAWS`` actions of ``agent`` in ``state``, one fresh key each."""
    keys = jax.random.split(jax.random.key(seed), DRAWS)
    act = jax.vmap(lambda k: agent.act(k, state, None, None, None))
    return np.asarray(act(keys))


def _shares(actions, num_arms):
    return np.bincount(actions, minlength=num_arms) / len(actions)


def _random_tried_states(seed, n=3000, arms=4):
    """``n`` states in which every arm was pulled 1-12 times, means in [0, 1]."""
    rng = np.random.default_rng(seed)
    count = rng.integers(1, 13, (n, arms)).astype(np.float64)
    total = count * rng.random((n, arms))
    return count, total


def _check_argmax(agent, count, total, want_score, seed):
    """``agent`` picks the argmax of ``want_score [n, arm]`` wherever it is
    clear (the top two more than 1e-4 apart: float32 cannot flip them)."""
    keys = jax.random.split(jax.random.key(seed), len(count))
    state = _stats(count, total)
    act = jax.vmap(lambda k, s: agent.act(k, s, None, None, None))
    got = np.asarray(act(keys, state))
    top2 = np.sort(want_score, 1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-4
    assert clear.mean() > 0.95
    np.testing.assert_array_equal(got[clear], want_score.argmax(1)[clear])


def test_update_counts_only_the_pulled_arm():
    agent = bandits.UCB(num_arms=3)
    state = agent.init(jax.random.key(0), None)
    for action, reward in [(2, 0.5), (0, -1.0), (2, 0.25)]:
        step = Step(
            None, jnp.int32(action), jnp.float32(reward), None, False, False, None
        )
        state = agent.update(state, step)
    np.testing.assert_array_equal(state.count, [1, 0, 2])
    np.testing.assert_allclose(state.total, [-1.0, 0.0, 0.75])
    assert float(state.t) == 3


def test_ucb1_picks_the_argmax_of_its_index():
    """UCB1: ``mean + c * sqrt(2 ln t / n)`` with ``t`` the pulls so far."""
    count, total = _random_tried_states(1)
    t = count.sum(1, keepdims=True)
    for c, seed in [(1.0, 2), (0.3, 3)]:
        score = total / count + c * np.sqrt(2 * np.log(t) / count)
        _check_argmax(bandits.UCB(4, c), count, total, score, seed)


def test_ucb_dpt_picks_the_argmax_of_its_index():
    """DPT's UCB1.0 once every arm is tried: ``mean + c / sqrt(n)``."""
    count, total = _random_tried_states(4)
    score = total / count + 0.5 / np.sqrt(count)
    _check_argmax(bandits.UCBDPT(4, 0.5), count, total, score, 5)


@pytest.mark.parametrize(
    "agent",
    [bandits.UCB(4), bandits.UCBDPT(4), bandits.EpsilonGreedy(4, 0.0)],
    ids=["ucb", "ucb_dpt", "epsilon_greedy"],
)
def test_an_untried_arm_goes_first(agent):
    """Arm 2 was never pulled; the tried arms paid well. UCB1 and greedy
    break the tie among untried arms at random; UCB1.0 takes the lowest."""
    state = _stats([3.0, 5.0, 0.0, 4.0], [2.7, 4.5, 0.0, 3.6])
    assert set(_acts(agent, state, 6)[:200]) == {2}
    # after one paid pull (t = 1, so UCB1's bonus log t is 0) an untried
    # arm still goes first, however well the tried one paid
    one_paid = _stats([1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0])
    assert 0 not in set(_acts(agent, one_paid, 8)[:200])
    fresh = _stats(np.zeros(4), np.zeros(4))
    shares = _shares(_acts(agent, fresh, 7), 4)
    if isinstance(agent, bandits.UCBDPT):
        np.testing.assert_array_equal(shares, [1.0, 0.0, 0.0, 0.0])
    else:
        np.testing.assert_allclose(shares, 0.25, atol=0.015)


def _beta_win(a0, b0, a1, b1):
    """P(X0 > X1) for independent X0 ~ Beta(a0, b0), X1 ~ Beta(a1, b1)."""
    f = lambda x: stats.beta.pdf(x, a0, b0) * stats.beta.cdf(x, a1, b1)  # noqa: E731
    return integrate.quad(f, 0.0, 1.0)[0]


def test_bernoulli_thompson_draws_from_beta_one_plus_successes_one_plus_failures():
    """Arm 0: 3 successes in 4 pulls; arm 1: 6 in 12. With Beta(1, 1)
    priors the posteriors are Beta(4, 2) and Beta(7, 7), and Thompson
    sampling picks arm 0 with the probability that its draw is larger."""
    state = _stats([4.0, 12.0], [3.0, 6.0])
    want = _beta_win(4, 2, 7, 7)  # 0.77
    share = _shares(_acts(bandits.BernoulliThompson(2), state, 8), 2)[0]
    assert abs(share - want) < 0.015, (share, want)


def test_gaussian_thompson_posterior_and_choice_odds():
    """Conjugate normal update: precision ``1 / v0 + n / s2``, mean
    ``(m0 / v0 + sum / s2) / precision``; arm 0 is picked with probability
    ``Phi((m0 - m1) / sqrt(v0 + v1))``."""
    agent = bandits.GaussianThompson(
        2, noise_variance=0.5, prior_mean=0.2, prior_variance=0.25
    )
    count, total = np.array([2.0, 6.0]), np.array([1.6, 3.0])
    precision = 1 / 0.25 + count / 0.5
    var = 1 / precision
    mean = var * (0.2 / 0.25 + total / 0.5)
    got_mean, got_var = agent.posterior(_stats(count, total))
    np.testing.assert_allclose(got_mean, mean, rtol=1e-6)
    np.testing.assert_allclose(got_var, var, rtol=1e-6)
    want = stats.norm.cdf((mean[0] - mean[1]) / np.sqrt(var.sum()))  # 0.57
    share = _shares(_acts(agent, _stats(count, total), 9), 2)[0]
    assert abs(share - want) < 0.015, (share, want)


def test_epsilon_greedy_choice_odds():
    """The best arm w.p. ``1 - eps + eps / K``, every other ``eps / K``."""
    state = _stats([5.0, 5.0, 5.0, 5.0], [1.0, 4.0, 2.0, 3.0])
    shares = _shares(_acts(bandits.EpsilonGreedy(4, 0.3), state, 10), 4)
    np.testing.assert_allclose(shares, [0.075, 0.775, 0.075, 0.075], atol=0.015)


def test_fixed_policy_bandit_pulls_with_its_probabilities():
    agent = bandits.FixedPolicyBandit(3)
    shares = _shares(_acts(agent, jnp.array([0.7, 0.2, 0.1]), 11), 3)
    np.testing.assert_allclose(shares, [0.7, 0.2, 0.1], atol=0.015)


def test_fixed_policy_bandit_concentration_shapes_the_dirichlet_part():
    """``p = (1 - w) * Dirichlet(conc) + w * onehot(j)``: at a large
    concentration the Dirichlet part is near uniform, so the arms other
    than ``j`` get (almost) equal shares in every draw."""
    for conc, spread, seed in [(1e4, 0.005, 12), (1.0, 0.05, 13)]:
        keys = jax.random.split(jax.random.key(seed), 500)
        agent = bandits.FixedPolicyBandit(5, conc)
        p = np.sort(np.asarray(jax.vmap(agent.init, (0, None))(keys, None)), 1)
        others = p[:, :4].std(1)  # j's arm is the largest
        assert (others.max() < spread) == (conc > 1), (conc, others.max())


@pytest.mark.parametrize(
    "source, settings, want",
    [
        ("ucb", {"c": 0.25}, bandits.UCB(5, 0.25)),
        ("ucb_dpt", {"c": 0.25}, bandits.UCBDPT(5, 0.25)),
        ("epsilon_greedy", {"epsilon": 0.3}, bandits.EpsilonGreedy(5, 0.3)),
        ("thompson", {}, bandits.GaussianThompson(5, 0.3, 0.5, 1 / 12)),
        (
            "thompson",
            {"noise_variance": 0.2, "prior_mean": 0.1, "prior_var": 2.0},
            bandits.GaussianThompson(5, 0.2, 0.1, 2.0),
        ),
        ("dpt_rollin", {"concentration": 3.0}, bandits.FixedPolicyBandit(5, 3.0)),
    ],
)
def test_registry_settings_reach_the_agent(source, settings, want):
    env = envs.make("gaussian_bandit")  # 5 arms, noise variance 0.3
    agent = make_agent(source, env, 1, **settings)
    assert type(agent) is type(want)
    for field in vars(want):
        assert getattr(agent, field) == pytest.approx(getattr(want, field)), field
