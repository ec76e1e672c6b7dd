"""benchmarks/paired_repro.py: reproductions written apart pair per (seed,
task) only when their test tasks agree; for families whose tasks are drawn
rather than indexed (bandits: no task ids) the oracle's per-task return is
what must agree."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from agentrl.evaluate.evaluate import EvalResult

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import paired_repro  # noqa: E402


def _write(root: Path, tag: str, method: str, oracle: np.ndarray, returns, ids=None):
    runs = [
        EvalResult(
            method,
            np.asarray(r, np.float64)[:, None],
            oracle_return=oracle,
            metadata={"task_ids": ids},
        ).to_json()
        for r in returns
    ]
    (root / tag).mkdir()
    (root / tag / "results.json").write_text(json.dumps({"runs": {method: runs}}))


def test_drawn_tasks_pair_by_their_oracle_returns(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTRL_BENCH_RESULTS", str(tmp_path))
    oracle = np.array([80.0, 90.0, 70.0])
    _write(tmp_path, "a", "amago", oracle, [[76.0, 85.0, 66.0]] * 2)
    _write(tmp_path, "b", "rl2", oracle, [[70.0, 80.0, 60.0]] * 2)
    _write(tmp_path, "c", "ppo", oracle + [0.0, 0.0, 5.0], [[70.0, 80.0, 60.0]] * 2)
    assert paired_repro.main(["a:amago", "b:rl2", "--last", "1"]) == 0
    row = json.loads((tmp_path / "paired_amago_vs_rl2.json").read_text())
    (result,) = row["results"].values()
    assert result["tasks"] == 3 and result["a minus b"] == pytest.approx(5.667, 1e-3)
    with pytest.raises(
        SystemExit,
        match="amago vs ppo: seed 0: amago and ppo were not evaluated on the same",
    ):
        paired_repro.main(["a:amago", "c:ppo", "--last", "1"])


def test_indexed_tasks_pair_by_their_ids(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTRL_BENCH_RESULTS", str(tmp_path))
    oracle = np.array([10.0, 10.0])
    _write(tmp_path, "a", "ad", oracle, [[5.0, 6.0]], ids=[3, 7])
    _write(tmp_path, "b", "dt", oracle, [[4.0, 6.0]], ids=[3, 8])
    with pytest.raises(SystemExit, match=r"task ids \[3, 7\] vs \[3, 8\]"):
        paired_repro.main(["a:ad", "b:dt"])


def test_one_method_of_two_tags_keeps_both_rows_and_episodes_must_agree(
    tmp_path, monkeypatch
):
    """The JSON once keyed rows by the methods' names alone, so comparing
    one method across two reproductions (an ablation) kept the last row."""
    monkeypatch.setenv("AGENTRL_BENCH_RESULTS", str(tmp_path))
    oracle = np.array([10.0, 10.0])
    _write(tmp_path, "a", "q", oracle, [[5.0, 6.0]], ids=[3, 7])
    _write(tmp_path, "b", "ad", oracle, [[4.0, 6.0]], ids=[3, 7])
    _write(tmp_path, "c", "ad", oracle, [[2.0, 2.0]], ids=[3, 7])
    assert paired_repro.main(["a:q", "b:ad", "c:ad", "--name", "x"]) == 0
    rows = json.loads((tmp_path / "x.json").read_text())["results"]
    assert sorted(r["a minus b"] for r in rows.values()) == pytest.approx([0.5, 3.5])
    longer = [np.ones((2, 3))]  # three episodes a task, against one
    runs = [
        EvalResult("ad", r, metadata={"task_ids": [3, 7]}).to_json() for r in longer
    ]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "results.json").write_text(json.dumps({"runs": {"ad": runs}}))
    with pytest.raises(SystemExit, match=r"\(2, 1\) vs \(2, 3\)"):
        paired_repro.main(["a:q", "d:ad"])
    with pytest.raises(SystemExit):
        paired_repro.main(["a:q", "b:ad", "--last", "0"])


def test_results_without_ids_or_oracle_returns_are_not_paired(tmp_path, monkeypatch):
    """Reproductions written apart must show their tasks agree; results of
    one run (a method and its controls) need not."""
    monkeypatch.setenv("AGENTRL_BENCH_RESULTS", str(tmp_path))
    for tag, method in (("a", "ad"), ("b", "dt")):
        runs = [EvalResult(method, np.ones((2, 3))).to_json()]
        (tmp_path / tag).mkdir()
        (tmp_path / tag / "results.json").write_text(
            json.dumps({"runs": {method: runs}})
        )
    with pytest.raises(SystemExit, match="neither ad nor dt records task ids"):
        paired_repro.main(["a:ad", "b:dt"])
