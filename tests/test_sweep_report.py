"""Sweep reports: the IQM has its interval, and overlapping intervals or too
few seeds are said under the table (NumPy only, no training)."""

from __future__ import annotations

import numpy as np

from agentrl.sweep.report import interval_warnings, setting_rows, write_sweep_results


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
