"""benchmarks/selection_margins.py: a survey of the committed reproductions'
acting-rule choices (chosen rule against the runner-up on validation)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import selection_margins  # noqa: E402


def _selection(values: dict, field: str = "score_last", margin=None, ids=(1, 2)):
    chosen = max(
        values, key=lambda n: values[n][0] * (-1 if field == "regret_final" else 1)
    )
    return {
        "field": field,
        "choice": {"name": chosen},
        "validation": {n: {"mean": m, "ci": list(ci)} for n, (m, ci) in values.items()},
        "validation_task_ids": list(ids) if ids else None,
        "margin": margin,
    }


def test_survey_separates_clear_choices_from_overlapping_ones(tmp_path, monkeypatch):
    clear = _selection({"sample": (0.8, (0.7, 0.9)), "greedy": (0.2, (0.1, 0.3))})
    close = _selection(
        {"sample": (0.5, (0.3, 0.7)), "greedy": (0.45, (0.3, 0.6))},
        margin={"resolved": True, "tasks": 16},
    )
    # an older record's "resolved" over 2 tasks is judged again: not resolved
    two = _selection(
        {"sample": (0.5, (0.3, 0.7)), "greedy": (0.45, (0.3, 0.6))},
        margin={"resolved": True, "tasks": 2},
    )
    regret = _selection(
        {"sample": (9.0, (8.0, 10.0)), "greedy": (20.0, (18.0, 22.0))},
        field="regret_final",
        ids=None,
    )
    protocol = {
        "ad": [
            {
                "seed": 0,
                "selection": clear,
                "expert_distillation": {"selection": close},
            },
            {"seed": 1, "selection": close},
            {"seed": 2, "selection": two},
        ],
        "dpt": [{"seed": 0, "selection": regret}],
    }
    record = {"results": {"protocol": protocol}}
    (tmp_path / "repro_x_cpu.json").write_text(json.dumps(record))
    (tmp_path / "paired_y.json").write_text(json.dumps(record))  # not a reproduction
    (row,) = selection_margins.survey(tmp_path)
    assert row["record"] == "repro_x_cpu" and row["choices"] == 5
    # the clear choice and the regret one (lower is better) are separated
    assert row["separated"] == 2
    assert row["with_margin"] == 3 and row["resolved"] == 2
    assert row["validation_tasks"] == ["2", "drawn"]
    learners = [(c["learner"], c["seed"]) for c in row["choices_detail"]]
    assert ("ad/expert_distillation", 0) in learners
    detail = {(c["learner"], c["seed"]): c for c in row["choices_detail"]}
    assert (
        detail[("dpt", 0)]["chosen"] == "sample" and detail[("dpt", 0)]["gap"] == 11.0
    )
    monkeypatch.setenv("AGENTRL_BENCH_RESULTS", str(tmp_path))
    selection_margins.main(["--name", "margins"])
    md = (tmp_path / "margins.md").read_text()
    assert "| repro_x_cpu | 5 | 2 | 2 of 3 | 2, drawn |" in md
    assert "in 2 (40%)" in md  # of 5 choices


def test_drawn_validation_tasks_are_counted_from_the_margin():
    count = selection_margins._task_count
    assert count([3, 5], None) == 2
    assert count(None, {"tasks": 30, "dropped": 2}) == "32 drawn"
    assert count(None, None) == "drawn"  # no rival, no count (bandits' draws)


def test_a_rule_that_scored_as_the_chosen_one_is_no_rival():
    """``sample_then_greedy`` that never turned greedy scores as ``sample``:
    judged against it (gap 0) a choice could never be separated, and 114
    of the committed choices once were."""
    twin = (0.8, (0.7, 0.9))
    values = {"sample": twin, "sample_then_greedy": twin, "greedy": (0.2, (0.1, 0.3))}
    judged = selection_margins.judge(_selection(values))
    assert judged["runner_up"] == "greedy" and judged["separated"]
    assert abs(judged["gap"] - 0.6) < 1e-12
    alone = selection_margins.judge(_selection({"sample": twin, "twin": twin}))
    assert alone is None  # no rival: no choice to judge
    # the recorded margin (paired per task) names the runner-up where it has one
    three = {**values, "temperature": (0.5, (0.4, 0.6))}
    margin = {"runner_up": "greedy", "resolved": True, "tasks": 8}
    assert selection_margins.judge(_selection(three))["runner_up"] == "temperature"
    recorded = selection_margins.judge(_selection(three, margin=margin))
    assert recorded["runner_up"] == "greedy"
