"""Sweep reports (agentrl.sweep.report): mutants the tests before let through.

Pass 11 of the hand-made mutation passes. A row's numbers are checked
against values computed by hand: the final loss is the mean of each seed's
last 10% of steps (NaN steps skipped), the score is the mean and its CI the
mean's, the IQM the mean of the middle half; the warnings rank a loss
lowest-best and call five seeds enough.
"""

from __future__ import annotations

import numpy as np

from agentrl.sweep.report import interval_warnings, setting_rows


def test_final_loss_is_the_mean_of_each_seeds_last_tenth_of_steps():
    steps = np.arange(20, dtype=np.float64)  # last 10%: steps 18 and 19
    loss = np.stack([steps, 2 * steps])  # [seed, steps]
    row = setting_rows("a", {}, {"loss": loss})
    assert row["seeds"] == 2
    np.testing.assert_allclose(row["final_loss"], np.mean([18.5, 37.0]))
    # fewer than 10 steps: the last step alone (at least one step)
    short = setting_rows("b", {}, {"loss": np.array([[5.0, 4.0, 3.0, 2.0, 1.0]])})
    assert short["final_loss"] == 1.0


def test_steps_without_a_value_are_skipped_and_an_empty_tail_stays_nan():
    nan = np.nan
    trial = np.array(
        [
            [0.0] * 18 + [nan, 4.0],  # the finite step of the tail alone
            [0.0] * 18 + [nan, nan],  # no value in the tail: NaN, not 0
        ]
    )
    row = setting_rows("a", {}, {"loss": np.ones((2, 20)), "trial_return": trial})
    assert np.isnan(row["final_trial_return"])  # mean over seeds of [4, NaN]
    one = setting_rows("b", {}, {"loss": np.ones((1, 20)), "trial_return": trial[:1]})
    assert one["final_trial_return"] == 4.0


def test_the_score_interval_is_the_means_and_the_iqm_is_the_middle_half():
    # 3 seeds x 16 tasks: near 1 but one task at -50 in every seed; the
    # mean (~-2.2) lies far below the IQM (~1), which trims that task
    rng = np.random.default_rng(0)
    scores = 1.0 + 0.01 * rng.standard_normal((3, 16))
    scores[:, 0] = -50.0
    row = setting_rows("a", {}, {"loss": np.ones((3, 10))}, scores)
    flat = np.sort(scores.reshape(-1))
    np.testing.assert_allclose(row["score"], scores.mean(), rtol=1e-12)
    np.testing.assert_allclose(row["score_iqm"], flat[12:36].mean(), rtol=1e-12)
    assert row["score_ci_low"] <= row["score"] <= row["score_ci_high"]
    assert row["score_iqm_ci_low"] <= row["score_iqm"] <= row["score_iqm_ci_high"]
    assert row["score_ci_low"] < row["score"] < 0.9 < row["score_iqm_ci_low"]


def _loss_row(label: str, level: float, seeds: int) -> dict:
    spread = np.linspace(-0.01, 0.01, seeds)[:, None]
    return setting_rows(label, {}, {"loss": np.full((seeds, 10), level) + spread})


def test_without_scores_the_lowest_loss_is_the_best_setting():
    # a and b overlap near 0.1; c is far above: the best is a (lowest loss),
    # not c, and it is b that the sweep cannot tell apart from it
    rows = [_loss_row("a", 0.100, 5), _loss_row("b", 0.105, 5), _loss_row("c", 5, 5)]
    (warning,) = interval_warnings(rows)
    assert "best final_loss (a) overlaps those of b:" in warning


def test_five_seeds_are_enough_for_intervals_over_seeds():
    rows = [_loss_row("a", 0.1, 5), _loss_row("b", 5.0, 5)]
    assert interval_warnings(rows) == []
    rows = [_loss_row("a", 0.1, 4), _loss_row("b", 5.0, 4)]
    assert interval_warnings(rows) == [
        "4 seeds per setting: intervals over seeds are crude below 5 seeds "
        "(run more with --seeds)"
    ]
