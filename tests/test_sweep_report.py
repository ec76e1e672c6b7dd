"""Sweep reports: the IQM has its interval, and overlapping intervals or too
few seeds are said under the table; rows keep per-task scores, which pair
two rows on the same tasks (no training)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agentrl.sweep.paired import paired_row_difference, task_set_id
from agentrl.sweep.report import (
    interval_warnings,
    markdown,
    setting_rows,
    to_csv,
    write_sweep_results,
)
from agentrl.tables import json_safe


def _rows(scores: dict[str, np.ndarray]) -> list[dict]:
    loss = {"loss": np.linspace(1.0, 0.5, 20)[None].repeat(2, axis=0)}
    return [setting_rows(label, {}, loss, s) for label, s in scores.items()]


def test_the_iqm_has_an_interval():
    rng = np.random.default_rng(0)
    (row,) = _rows({"a": rng.uniform(size=(2, 16))})
    assert row["score_iqm_ci_low"] <= row["score_iqm"] <= row["score_iqm_ci_high"]
    assert row["score_iqm_ci_low"] < row["score_iqm_ci_high"]


def test_overlapping_intervals_from_two_seeds_are_a_warning(tmp_path):
    rng = np.random.default_rng(1)
    base = rng.uniform(0.4, 0.6, size=(2, 16))  # [seed, task]
    rows = _rows({"lr=1e-4": base, "lr=3e-4": base + 0.01, "lr=1e-3": base - 0.5})
    warnings = interval_warnings(rows)
    overlap = [w for w in warnings if "overlaps" in w]
    assert len(overlap) == 1
    # the best (lr=3e-4) is not told apart from lr=1e-4; lr=1e-3 is far below
    assert "(lr=3e-4) overlaps those of lr=1e-4:" in overlap[0]
    assert "lr=1e-3" not in overlap[0]
    assert any("2 seeds" in w for w in warnings)
    curves = {"lr=1e-4": np.ones((2, 10))}
    text = write_sweep_results(tmp_path, rows, curves, {})["md"].read_text()
    assert "**Warning:**" in text and "2 seeds per setting" in text
    assert "score_iqm" in text and text.count("[") >= 2 * len(rows)


def test_separated_intervals_from_enough_seeds_warn_nothing():
    rng = np.random.default_rng(2)
    base = rng.uniform(0.4, 0.6, size=(6, 32))
    rows = [
        setting_rows(label, {}, {"loss": np.ones((6, 10))}, s)
        for label, s in {"a": base, "b": base + 0.5}.items()
    ]
    assert interval_warnings(rows) == []


def _round_trip(row: dict) -> dict:
    """What a sweep's JSON record gives back."""
    return json.loads(json.dumps(json_safe(row)))


def test_rows_keep_per_task_scores_out_of_the_tables(tmp_path):
    rng = np.random.default_rng(3)
    held, train = rng.uniform(size=(3, 7)), rng.uniform(size=(3, 5))  # [seed, task]
    held[1, 4] = np.nan  # undefined on one task: null in JSON, dropped in means
    loss = {"loss": np.ones((3, 10))}
    row = setting_rows("a", {}, loss, held, train, task_set="h1", train_task_set="t1")
    assert np.asarray(row["train_task_scores"]).shape == (3, 5)
    assert row["task_scores"][1][4] is None and row["task_set"] == "h1"
    kept = np.delete(held, 4, axis=1)  # the row's score drops the undefined task
    np.testing.assert_allclose(row["score"], kept.mean(), rtol=1e-12)
    again = _round_trip(row)
    assert again["task_scores"] == row["task_scores"]
    assert again["train_task_set"] == "t1"
    np.testing.assert_allclose(again["train_task_scores"], train, rtol=1e-12)
    np.testing.assert_allclose(np.mean(again["train_task_scores"]), row["train_score"])
    # the tables stay as they were: no lists, no identities
    for text in (markdown([row]), to_csv([row])):
        assert "score_iqm" in text
        assert "task_scores" not in text and "task_set" not in text and "h1" not in text
    md = write_sweep_results(tmp_path, [row], {"a": np.ones((3, 10))}, {})
    saved = json.loads(md["json"].read_text())["rows"][0]
    assert saved["task_scores"] == row["task_scores"]


def test_task_set_id_names_the_tasks():
    means = np.arange(12, dtype=np.float32).reshape(4, 3)
    same = task_set_id({"means": means.copy()})
    assert same == task_set_id({"means": means}) and len(same) == 16
    assert task_set_id({"means": means[::-1]}) != same  # order matters
    assert task_set_id({"means": means + 1e-6}) != same


def _pair_rows(offset: float, seeds: int = 3, tasks: int = 32):
    """Two rows on the same tasks: a task-to-task spread far wider than a
    constant per-task offset of ``b`` over ``a``."""
    rng = np.random.default_rng(4)
    spread = rng.normal(0.0, 1.0, size=tasks)  # [task]
    a = spread + rng.normal(0.0, 0.01, size=(seeds, tasks))  # [seed, task]
    b = a + offset + rng.normal(0.0, 0.01, size=(seeds, tasks))
    loss = {"loss": np.ones((seeds, 10))}
    return [
        _round_trip(setting_rows(n, {}, loss, s, task_set="same"))
        for n, s in (("a", a), ("b", b))
    ]


def test_a_paired_difference_resolves_what_the_intervals_do_not():
    a, b = _pair_rows(0.1)
    assert a["score_ci_high"] > b["score_ci_low"]  # the intervals overlap
    up = paired_row_difference(b, a)
    assert up["resolved"] and up["ci"][0] > 0.05 and up["ci"][1] < 0.15
    assert up["mean"] == pytest.approx(0.1, abs=0.01)
    assert up["pairs"] == 3 * 32 and up["tasks"] == 32 and up["dropped"] == 0
    down = paired_row_difference(a, b)  # a minus b: the sign turns
    assert down["mean"] == pytest.approx(-up["mean"])
    assert down["ci"][1] < 0 and not down["resolved"]


def test_a_paired_difference_leaves_out_undefined_tasks():
    a, b = _pair_rows(0.1, tasks=8)
    b["task_scores"][2][5] = None  # one seed undefined: the task goes
    diff = paired_row_difference(b, a)
    assert diff["tasks"] == 7 and diff["dropped"] == 1 and diff["pairs"] == 21


def test_a_paired_difference_says_what_is_missing_or_different():
    a, b = _pair_rows(0.1)
    old = {k: v for k, v in a.items() if k not in ("task_scores", "task_set")}
    with pytest.raises(ValueError, match="has no 'task_scores'"):
        paired_row_difference(b, old)
    with pytest.raises(ValueError, match="shapes differ"):
        paired_row_difference(b, {**a, "task_scores": a["task_scores"][:2]})
    with pytest.raises(ValueError, match="different tasks"):
        paired_row_difference(b, {**a, "task_set": "other"})
    with pytest.raises(ValueError, match="has no 'task_set'"):
        paired_row_difference(b, {k: v for k, v in a.items() if k != "task_set"})
    with pytest.raises(ValueError, match="no 'train_task_scores'"):
        paired_row_difference(b, a, field="train_task_scores")


# Mutants the tests above let through (session 56's mutation pass).


def test_a_task_undefined_in_the_second_row_is_left_out_and_counted_once():
    """2 seeds x 4 tasks; ``a`` is ``b`` + 1 wherever both are defined.
    ``b`` (the row subtracted) is undefined at seed 1 of task 2 and at both
    seeds of task 3: tasks 2 and 3 go, ``dropped`` counts tasks (2), not
    undefined cells (3); kept: tasks 0 and 1, ``pairs`` 2 seeds x 2 = 4,
    every kept difference 1."""
    a = {"task_scores": [[1, 2, 3, 4], [1, 2, 3, 4]], "task_set": "same"}
    b = {"task_scores": [[0, 1, 2, None], [0, 1, None, None]], "task_set": "same"}
    d = paired_row_difference(a, b)
    assert (d["tasks"], d["dropped"], d["pairs"]) == (2, 2, 4)
    assert d["mean"] == pytest.approx(1.0)
    # the same from the other side: a task is undefined for either row
    d = paired_row_difference(b, a)
    assert (d["tasks"], d["dropped"], d["pairs"]) == (2, 2, 4)
    assert d["mean"] == pytest.approx(-1.0)
