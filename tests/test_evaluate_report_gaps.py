"""The results table column by column, and the episodes-to-threshold edge."""

import numpy as np

from agentrl.evaluate import EvalResult, summarize
from agentrl.evaluate.report import markdown_table

TASKS, EPISODES, STEPS = 8, 3, 6
# each task's last-episodes score: mean 3, interquartile mean 1 (the middle 4)
LAST = np.array([0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 10.0, 10.0])


def _result():
    returns = np.tile([1.0, 5.0, 5.0], (TASKS, 1))
    normalized = np.stack([np.full(TASKS, 0.1), LAST, LAST], axis=1)
    regret = np.tile(np.linspace(1.0, 7.0, STEPS), (TASKS, 1))
    return EvalResult("m", returns, normalized, regret, np.zeros(TASKS), np.ones(TASKS))


def _row(summary):
    """``{column: cell}`` of the table's one method row."""
    head, _, row = markdown_table(summary).splitlines()
    cells = lambda line: [c.strip() for c in line.strip("|").split("|")]  # noqa: E731
    return dict(zip(cells(head), cells(row), strict=True))


def _number(cell):
    return float(cell.split(" [")[0])


def test_each_column_holds_its_own_aggregate():
    row = _row(summarize({"m": _result()}, last_k=2, num_samples=200))
    assert row["method"] == "m" and row["runs x tasks"] == f"1 x {TASKS}"
    assert _number(row["return ep 1"]) == 1.0
    assert _number(row["return last 2"]) == 5.0
    assert _number(row["score ep 1"]) == 0.1
    assert _number(row["score last 2"]) == LAST.mean()
    assert _number(row["score last 2 (IQM)"]) == 1.0
    # the area: the mean over episodes of the mean curve, (0.1 + 3 + 3) / 3
    assert _number(row["AUC"]) == float(f"{(0.1 + 2 * LAST.mean()) / 3:.3g}")
    assert _number(row["final regret"]) == 7.0


def test_a_curve_reaching_the_threshold_at_the_last_episode_reaches_it():
    r = _result()
    r.normalized = np.tile([0.0, 0.2, 0.6], (TASKS, 1))
    s = summarize({"m": r}, num_samples=200, threshold=0.5)["m"]
    reach = s["episodes_to_threshold"]
    assert (reach["mean_curve"], reach["median"], reach["reached"]) == (3, 3.0, 1.0)
    assert _row({"m": s})["episodes to threshold"] == "3 (>= 0.5; 100% reach)"


def test_the_curves_leave_out_a_task_undefined_in_any_seed():
    a, b = _result(), _result()
    a.normalized = np.tile([0.0, 0.5, 1.0], (TASKS, 1))
    b.normalized = a.normalized.copy()
    b.normalized[0] = np.nan  # task 0 of seed 2 has no score: the pair goes
    s = summarize({"m": [a, b]}, num_samples=200)["m"]
    np.testing.assert_allclose(s["curve"]["mean"], [0.0, 0.5, 1.0])
    # the regret curve counts steps from 1 to the last
    assert s["regret_curve"]["step"][0] == 1
    assert s["regret_curve"]["step"][-1] == STEPS
    np.testing.assert_allclose(s["regret_curve"]["mean"][-1], 7.0)


def test_episodes_to_threshold_is_the_median_curve_and_last_k_is_capped():
    r = _result()
    r.normalized = np.tile([0.6, 0.6, 0.6], (TASKS, 1))
    r.normalized[:2] = 0.0  # two of eight curves never reach it (censored at 4)
    s = summarize({"m": r}, last_k=10, num_samples=200, threshold=0.5)["m"]
    reach = s["episodes_to_threshold"]
    assert (reach["median"], reach["reached"]) == (1.0, 0.75)
    # the mean curve (0.45) never reaches 0.5, where the median one (0.6)
    # does at once: censored at episodes + 1
    assert reach["mean_curve"] == EPISODES + 1
    assert s["curve"]["episode"] == list(range(1, EPISODES + 1))  # 1-based
    assert s["last_k"] == EPISODES and "return last 3" in _row({"m": s})
