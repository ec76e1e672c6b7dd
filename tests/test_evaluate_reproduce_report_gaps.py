"""Reproduction reports (agentrl.evaluate.reproduce_report): mutants the
tests before let through.

Pass 11 of the hand-made mutation passes. The in-context-learning verdict
counts every control that applies to the learner, run or not: a learner
distilled from learning histories that beats the three context controls
but whose expert-distillation control was not run does not "learn in
context"; a control beaten on too few tasks is no met target; the table
reads each column from its own summary entry; the checkpoint-scan line
keeps only the steps every seed has; the targets read the learner's runs.
"""

from __future__ import annotations

import numpy as np

from agentrl.evaluate.controls import CONTEXT_CONTROLS
from agentrl.evaluate.evaluate import EvalResult
from agentrl.evaluate.report import summarize
from agentrl.evaluate.reproduce_report import _verdict
from agentrl.train.experiments import load_experiment


def _seeds(name: str, level: float, num_seeds: int = 2) -> list[EvalResult]:
    rng = np.random.default_rng(int(level * 100))
    return [
        EvalResult(name, level + rng.uniform(-0.05, 0.05, (12, 6)))
        for _ in range(num_seeds)
    ]


def test_a_control_that_applies_but_was_not_run_withholds_the_verdict():
    config = load_experiment("ad_darkroom", "smoke")  # distilled: 4 controls
    combined = {"AD": _seeds("AD", 5.0)}
    combined |= {f"AD/{c}": _seeds(c, 1.0) for c in CONTEXT_CONTROLS}
    summary = summarize(combined, resample="both")
    targets: list[dict] = []
    verdict, done = _verdict(config, summary, combined, "both", targets)
    assert sorted(done) == sorted(CONTEXT_CONTROLS)
    # every control run is beaten by far, yet one applicable control is missing
    assert all(v["beaten"] for v in verdict["controls"].values())
    assert verdict["missing"] == ["expert_distillation"]
    assert verdict["learns_in_context"] is False
    assert targets[-1]["name"] == "AD learns in context (beats all 4 controls)"
    assert targets[-1]["value"] == 0.0 and not targets[-1]["met"]


def test_a_control_beaten_on_too_few_tasks_is_not_a_met_target():
    # one seed, three tasks: the learner's CI over each control lies above
    # 0, but 3 pairs cannot resolve it (metrics.MIN_RESOLVING_TASKS = 6),
    # so the control is not beaten and its target row is not met
    config = load_experiment("ad_darkroom", "smoke")
    combined = {"AD": [EvalResult("AD", np.full((3, 6), 5.0) + np.arange(3)[:, None])]}
    combined |= {
        f"AD/{c}": [EvalResult(c, np.full((3, 6), 1.0))] for c in CONTEXT_CONTROLS
    }
    summary = summarize(combined, resample="tasks")
    targets: list[dict] = []
    verdict, _ = _verdict(config, summary, combined, "tasks", targets)
    rows = [t for t in targets if " minus control " in t["name"]]
    assert len(rows) == 3
    for row in rows:
        control = row["name"].split(" minus control ")[1].split(",")[0]
        assert verdict["controls"][control]["low"] > 0  # the CI clears 0 ...
        assert not verdict["controls"][control]["beaten"]  # ... on 3 tasks
        assert row["met"] is False


def test_the_table_row_reads_each_column_from_its_own_summary_entry():
    from agentrl.evaluate.reproduce_report import _summary_rows

    summary = {
        "AD": {
            "runs": 3,
            "tasks": 8,
            "return_first": {"mean": 1.0},
            "return_last": {"mean": 9.0, "mean_ci": [8.0, 10.0]},
            "score_last": {"mean": 0.9},
            "auc": {"mean": 0.5},
        }
    }
    (row,) = _summary_rows(summary)
    assert row == {
        "method": "AD",
        "seeds": 3,
        "tasks": 8,
        "return ep1": 1.0,
        "return last": 9.0,
        "return last CI": "[8, 10]",
        "score last": 0.9,
        "AUC": 0.5,
    }


def test_the_checkpoint_scan_line_keeps_only_steps_every_seed_has():
    from agentrl.evaluate.reproduce_report import _scan_note

    def scan(**values):
        return {f"s{s}": {"mean": v, "step": int(s)} for s, v in values.items()}

    records = [
        {"checkpoint_scan": {**scan(**{"100": 0.2}), **scan(**{"200": 0.6})}},
        {"checkpoint_scan": scan(**{"100": 0.4})},  # no step 200 (fewer kept)
    ]
    line = _scan_note("AD", records)
    assert "step 100 0.300 (0.200, 0.400)" in line
    assert "step 200" not in line  # a mean over one seed of two is no mean


def test_the_targets_read_the_learners_runs_not_the_compared_ones(
    tmp_path, monkeypatch
):
    """``reproduce my_ad.py --compare ad_darkroom``: the targets (e.g. a
    learner beating its own data) are computed on the learner's run
    folders, not on those of the experiment it is compared with."""
    from test_reproduce_protocol import _variant

    import agentrl.evaluate.reproduce as reproduce
    import agentrl.evaluate.reproduce_report as reproduce_report
    from agentrl.project import RESULTS_ENV

    def fake_seed(config, root, seed, controls, scan, rules):
        runs = {
            n: EvalResult(n, np.full((2, 3), 10.0), np.full((2, 3), 0.5))
            for n in (config.algo.label, "random")
        }
        for r in runs.values():
            r.metadata["task_ids"] = [3, 5]
        return runs, {"seed": seed, "selection": {"choice": {"name": "sample"}}}

    seen = []
    real = reproduce_report.targets_for

    def targets_for(experiment, summary, combined, run_dirs):
        seen.append([p.name for p in run_dirs])
        return real(experiment, summary, combined, run_dirs)

    monkeypatch.setattr(reproduce, "_seed", fake_seed)
    monkeypatch.setattr(reproduce_report, "targets_for", targets_for)
    # --out sets the results folder's variable: restored after the test
    monkeypatch.setenv(RESULTS_ENV, str(tmp_path / "out"))
    argv = [_variant(tmp_path, "my_ad"), "--compare", "ad_darkroom"]
    argv += ["--preset", "smoke", "--seeds", "2", "--runs", str(tmp_path / "runs")]
    assert reproduce.main(argv + ["--out", str(tmp_path / "out")]) == 0
    assert seen == [["my_ad-smoke-seed0", "my_ad-smoke-seed1"]]
