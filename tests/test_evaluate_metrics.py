"""Evaluation metrics against hand computations (NumPy, no compilation)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from agentrl.envs.bandits import BernoulliBandit
from agentrl.evaluate import metrics
from agentrl.history import History, episode_index


def test_iqm_of_known_arrays():
    # n = 8: cut int(0.25 * 8) = 2 from each end -> mean(2, 3, 4, 5) = 3.5
    assert metrics.iqm(np.arange(8)) == pytest.approx(3.5)
    # An outlier does not move the IQM, but moves the mean.
    x = np.array([1.0, 2, 3, 4, 5, 6, 7, 1000])
    assert metrics.iqm(x) == pytest.approx(4.5)
    # n = 10: cut 2 -> mean of the middle six values 2..7
    assert metrics.iqm(np.arange(10)[::-1]) == pytest.approx(4.5)
    # axis: one IQM per row; axis=None pools [run, task]
    rows = np.stack([np.arange(8), np.arange(8) + 10])
    np.testing.assert_allclose(metrics.iqm(rows, axis=1), [3.5, 13.5])
    assert metrics.iqm(rows) == pytest.approx(np.mean([4, 5, 6, 7, 10, 11, 12, 13]))


def test_standard_error_by_hand():
    assert metrics.standard_error([1.0, 2.0, 3.0, 4.0]) == pytest.approx(
        np.sqrt(5.0 / 3.0) / 2.0
    )
    assert metrics.standard_error([3.0]) == 0.0


def test_bootstrap_ci_contains_mean_shrinks_and_is_seeded():
    rng = np.random.default_rng(0)
    small = rng.normal(1.0, 1.0, size=20)
    large = rng.normal(1.0, 1.0, size=2000)
    lo_s, hi_s = metrics.bootstrap_ci(small, "mean", seed=1)
    lo_l, hi_l = metrics.bootstrap_ci(large, "mean", seed=1)
    assert lo_s <= small.mean() <= hi_s
    assert lo_l <= large.mean() <= hi_l
    assert (hi_l - lo_l) < 0.25 * (hi_s - lo_s)
    # The half-width of a 95% CI of the mean is about 1.96 standard errors.
    assert (hi_l - lo_l) / 2 == pytest.approx(
        1.96 * metrics.standard_error(large), rel=0.15
    )
    assert metrics.bootstrap_ci(small, "iqm", seed=1) == metrics.bootstrap_ci(
        small, "iqm", seed=1
    )
    assert metrics.bootstrap_ci(small, "iqm", seed=1) != metrics.bootstrap_ci(
        small, "iqm", seed=2
    )


def test_bootstrap_resampling_modes():
    # Runs differ by a constant, tasks are identical within a run: resampling
    # tasks within runs gives a zero-width CI, resampling runs does not.
    scores = np.repeat(np.array([[0.0], [1.0], [2.0]]), 5, axis=1)  # [run, task]
    lo, hi = metrics.bootstrap_ci(scores, resample="tasks")
    assert lo == hi == pytest.approx(1.0)
    lo, hi = metrics.bootstrap_ci(scores, resample="runs")
    assert lo < 1.0 < hi
    lo, hi = metrics.bootstrap_ci(scores, resample="both")
    assert lo < 1.0 < hi
    with pytest.raises(ValueError, match="resample must be one of"):
        metrics.bootstrap_ci(scores, resample="episodes")
    with pytest.raises(ValueError, match="statistic must be one of"):
        metrics.bootstrap_ci(scores, statistic="mode")


def test_bootstrap_curve_shapes_and_chunking():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(2, 30, 7))  # [run, task, episode]
    point, lo, hi = metrics.bootstrap_curve(scores, "mean", num_samples=500)
    assert point.shape == lo.shape == hi.shape == (7,)
    np.testing.assert_allclose(point, scores.mean(axis=(0, 1)))
    assert np.all(lo <= point) and np.all(point <= hi)
    # Chunking over the episode axis gives the same numbers.
    tiny = metrics.bootstrap_curve(scores, "mean", num_samples=500, max_elements=1)
    np.testing.assert_allclose(tiny[1], lo)
    np.testing.assert_allclose(tiny[2], hi)


def test_paired_ci_drops_undefined_tasks_and_resolves_by_sign():
    rng = np.random.default_rng(0)
    diff = 1.0 + 0.1 * rng.standard_normal(40)
    diff[[3, 7]] = np.nan  # two tasks undefined
    up = metrics.paired_ci(diff)
    assert up["tasks"] == 38 and up["dropped"] == 2
    assert up["mean"] == pytest.approx(np.nanmean(diff))
    assert 0.9 < up["ci"][0] < up["mean"] < up["ci"][1] < 1.1
    assert up["resolved"]
    down = metrics.paired_ci(-diff)
    assert not down["resolved"] and down["ci"][1] < 0
    noise = metrics.paired_ci(rng.standard_normal(40))
    assert noise["ci"][0] < 0 < noise["ci"][1] and not noise["resolved"]
    with pytest.raises(ValueError, match="finite"):
        metrics.paired_ci([np.nan, np.inf])


def test_normalized_score_random_zero_oracle_one():
    random = np.array([1.0, 2.0, 5.0])
    oracle = np.array([3.0, 10.0, 5.0])  # third task: nothing to learn
    returns = np.stack([random, oracle, (random + oracle) / 2], axis=1)
    score = metrics.normalized_score(returns, random, oracle)
    np.testing.assert_allclose(score[:2], [[0.0, 1.0, 0.5], [0.0, 1.0, 0.5]])
    assert np.isnan(score[2]).all()
    agg = metrics.aggregate(score[:, 2])
    assert agg["dropped"] == 1 and agg["tasks"] == 2
    assert agg["mean"] == pytest.approx(0.5)
    assert agg["mean_ci"][0] <= 0.5 <= agg["mean_ci"][1]
    jax_score = metrics.normalized_score(jnp.asarray(returns), random, oracle)
    np.testing.assert_allclose(np.asarray(jax_score)[:2], score[:2])


def test_expected_regret_oracle_zero_random_linear():
    rng = np.random.default_rng(0)
    tasks, steps, arms = 400, 200, 5
    means = rng.uniform(size=(tasks, arms))
    oracle = np.repeat(means.argmax(-1)[:, None], steps, axis=1)
    regret = metrics.expected_regret(jnp.asarray(oracle), jnp.asarray(means))
    assert regret.shape == (tasks, steps)
    np.testing.assert_array_equal(regret, 0.0)
    random = rng.integers(0, arms, size=(tasks, steps))
    regret = np.asarray(
        metrics.expected_regret(jnp.asarray(random), jnp.asarray(means))
    )
    gap = (means.max(-1) - means.mean(-1)).mean()  # expected regret per step
    curve = regret.mean(0)
    assert curve[-1] == pytest.approx(steps * gap, rel=0.05)
    assert curve[steps // 2 - 1] == pytest.approx(curve[-1] / 2, rel=0.05)
    assert np.all(np.diff(regret, axis=1) >= 0)


def test_realized_regret_by_hand():
    reward = jnp.array([[1.0, 0.0, 1.0]])
    regret = metrics.realized_regret(reward, jnp.array([0.75]))
    np.testing.assert_allclose(regret, [[-0.25, 0.5, 0.25]])


def test_per_episode_returns_with_early_termination():
    # Episode 0 terminates after 2 steps, episode 1 is truncated after 3,
    # episode 2 is still running when the history ends.
    reward = jnp.array([[0.0, 1.0, 1.0, 1.0, 0.0, 2.0]])
    term = jnp.array([[False, True, False, False, False, False]])
    trunc = jnp.array([[False, False, False, False, True, False]])
    history = History(
        obs=jnp.zeros((1, 6)),
        action=jnp.zeros((1, 6), jnp.int32),
        reward=reward,
        terminated=term,
        truncated=trunc,
        episode=episode_index(term | trunc),
        optimal_action=None,
        task_id=jnp.zeros((1,), jnp.int32),
        params=None,
    )
    np.testing.assert_allclose(
        metrics.per_episode_returns(history, 3), [[1.0, 2.0, 2.0]]
    )
    np.testing.assert_array_equal(metrics.episodes_completed(history), [2])
    assert metrics.regret_from_history(history) is None


# Mutants of metrics.py the tests above let through (session 56's mutation pass).


@pytest.mark.parametrize("n", [4, 5, 6, 7, 9, 10, 11, 13])
def test_iqm_is_scipy_trim_mean_for_every_sample_size(n):
    # The docstring promises trim_mean(x, 0.25) (rliable): int(0.25 * n) cut
    # from each end. Sizes where 0.25 * n has a fractional part >= 0.5
    # (6, 7, 10, 11) tell int() from round(). Skewed values so the trimmed
    # windows have different means.
    x = np.random.default_rng(n).exponential(size=n) ** 3
    assert metrics.iqm(x) == pytest.approx(stats.trim_mean(x, 0.25))


def test_iqm_along_the_first_axis_equals_along_the_last_of_the_transpose():
    x = np.random.default_rng(0).exponential(size=(3, 9)) ** 3  # [row, value]
    per_row = metrics.iqm(x, axis=1)
    np.testing.assert_allclose(metrics.iqm(x.T, axis=0), per_row)
    np.testing.assert_allclose(per_row, stats.trim_mean(x, 0.25, axis=1))


@pytest.mark.parametrize("resample", ["tasks", "both"])
def test_the_bootstrap_draws_every_task(resample):
    # One task scores 1, the others 0. With 5 tasks a resample misses a given
    # task with probability (4/5)**5 = 0.33 > 2.5%, so the CI of the mean
    # starts at 0; and it draws it with probability 0.67, so the top is > 0,
    # wherever the task sits (the last one included).
    for k in range(5):
        scores = np.zeros((2, 5))
        scores[:, k] = 1.0
        low, high = metrics.bootstrap_ci(scores, resample=resample, num_samples=500)
        assert low == 0.0 and high > 0.0, (k, low, high)


def test_both_resamples_tasks_within_runs_and_runs_only_runs():
    # Every run sees the same task scores: resampling runs alone cannot move
    # the mean, resampling tasks (alone or within resampled runs) does.
    scores = np.tile(np.arange(5.0), (3, 1))  # [run, task]
    lo, hi = metrics.bootstrap_ci(scores, resample="runs")
    assert lo == hi == pytest.approx(2.0)
    for resample in ("tasks", "both"):
        lo, hi = metrics.bootstrap_ci(scores, resample=resample)
        assert lo < 2.0 < hi, resample


def test_paired_ci_is_not_resolved_when_its_ci_touches_zero():
    # A and B tie on 10 tasks, A wins one. A resample of the 11 differences
    # is all zeros with probability (10/11)**11 = 0.35 > 2.5%, so the CI's
    # low end is exactly 0: not above 0, so not resolved.
    diff = np.array([0.0] * 10 + [1.0])
    out = metrics.paired_ci(diff)
    assert out["tasks"] >= metrics.MIN_RESOLVING_TASKS
    assert out["ci"][0] == 0.0 and out["ci"][1] > 0.0
    assert not out["resolved"]


def test_episodes_to_threshold_counts_a_value_equal_to_the_threshold():
    # ">= threshold": reaching exactly 0.5 at episode 2 counts.
    curve = np.array([[0.0, 0.5, 1.0], [0.25, 0.25, 0.5]])
    np.testing.assert_array_equal(metrics.episodes_to_threshold(curve, 0.5), [2, 3])


def test_random_return_stops_at_each_tasks_own_episode_length():
    # A task whose traced max_steps_in_episode (3) is below the family's
    # horizon (5): a random policy collects mean(means) on each of 3 pulls,
    # as the oracle's return horizon * max(means) uses the same field.
    env = BernoulliBandit(num_arms=4, horizon=5)
    p = env.default_params
    params = jax.tree.map(lambda x: jnp.stack([x, x]), p)
    params = dataclasses.replace(
        params, max_steps_in_episode=jnp.array([5, 3], jnp.int32)
    )
    got = np.asarray(metrics.random_return(env, params))
    mean = float(np.mean(p.means))
    np.testing.assert_allclose(got, [5 * mean, 3 * mean], rtol=1e-5)


def test_switching_expected_regret_measures_each_step_against_its_own_best_arm():
    # The best arm's mean changes from step to step (0.9, then 0.4): each
    # step's gap is against that step's best, not the first step's.
    means = jnp.array([[[0.9, 0.1], [0.2, 0.4], [0.2, 0.4]]])  # [task, step, arm]
    regret = metrics.expected_regret(jnp.array([[0, 1, 0]]), means)
    np.testing.assert_allclose(regret, [[0.0, 0.0, 0.2]], atol=1e-6)


def test_a_reference_below_random_still_scores_only_zero_width_is_undefined():
    # |oracle - random| decides "nothing to learn": a reference return below
    # random's (a source that never converged) gives a score, not NaN.
    score = metrics.normalized_score(
        np.array([[4.0, 2.0]]), np.array([4.0]), np.array([2.0])
    )
    np.testing.assert_allclose(score, [[0.0, 1.0]])


def recording(statistic: str):
    """``(statistic, calls)``: ``statistic`` that keeps every value it returns."""
    calls = []

    def stat(x):
        calls.append(metrics.STATISTICS[statistic](x))
        return calls[-1]

    return stat, calls


@pytest.mark.parametrize("confidence", [0.95, 0.8])
def test_the_interval_is_the_bootstrap_statistics_central_percentiles(confidence):
    rng = np.random.default_rng(0)
    stat, calls = recording("mean")
    low, high = metrics.bootstrap_ci(
        rng.normal(size=(3, 20)), stat, num_samples=400, confidence=confidence
    )
    resampled = calls[-1][:, 0]  # [sample]: the last call, after the point's
    assert resampled.shape == (400,)
    tail = (1 - confidence) / 2
    np.testing.assert_allclose(
        [low, high], np.quantile(resampled, [tail, 1 - tail]), rtol=1e-12
    )


def test_both_draws_whole_runs_and_runs_draws_a_run_per_task():
    # Run r scores r on every task. "both" resamples whole runs (then tasks
    # within them), so a resample's mean is a mean of 3 run values: a
    # multiple of 1/3; "runs" (rliable) draws a run per task, so its means
    # fall between those too.
    scores = np.repeat(np.arange(3.0)[:, None], 5, axis=1)  # [run, task]
    thirds = {}
    for resample in ("both", "runs"):
        stat, calls = recording("mean")
        metrics.bootstrap_ci(scores, stat, num_samples=300, resample=resample)
        means = calls[-1][:, 0] * 3
        thirds[resample] = np.allclose(means, np.round(means))
    assert thirds == {"both": True, "runs": False}


def test_fewer_than_six_tasks_never_resolve_however_clear():
    five = metrics.paired_ci([1.0, 1.1, 0.9, 1.2, 1.05])
    assert five["ci"][0] > 0 and not five["resolved"]
    assert metrics.paired_ci([1.0, 1.1, 0.9, 1.2, 1.05, 1.0])["resolved"]


def test_a_recorded_resolution_is_judged_again_by_todays_task_count():
    # Records from before MIN_RESOLVING_TASKS called 2 tasks resolved.
    assert not metrics.is_resolved({"resolved": True, "tasks": 2})
    assert metrics.is_resolved({"resolved": True, "tasks": 6})
    assert not metrics.is_resolved({"resolved": False, "tasks": 40})
