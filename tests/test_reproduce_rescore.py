"""agentrl reproduce --rescore: tables and targets again from written results."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from agentrl.cli import main

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


def _copy_record(tag: str, out: Path) -> None:
    shutil.copy(RESULTS / f"{tag}.json", out / f"{tag}.json")
    shutil.copytree(RESULTS / tag, out / tag)


def _digests(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_rescore_recomputes_the_same_summary_and_targets(tmp_path):
    tag = "repro_ad_darkroom_demo"
    _copy_record(tag, tmp_path)
    before = json.loads((tmp_path / f"{tag}.json").read_text())
    rc = main(["reproduce", "ad_darkroom", "--preset", "demo", "--rescore",
               "--out", str(tmp_path)])  # fmt: skip
    assert rc == 0
    after = json.loads((tmp_path / f"{tag}.json").read_text())
    assert after["results"]["summary"] == before["results"]["summary"]
    # where and when it was measured stay; the rescore is recorded beside
    for key in ("machine", "date", "agentrl_version"):
        assert after[key] == before[key]
    assert after["rescored"]["date"] >= before["date"]
    assert before["date"] in (tmp_path / f"{tag}.md").read_text()
    assert [(t["name"], t["value"], t["ci"]) for t in after["targets"]] == [
        (t["name"], t["value"], t["ci"]) for t in before["targets"]
    ]


def test_rescore_refuses_a_bandit_record_before_writing_anything(tmp_path, capsys):
    tag = "repro_dpt_bandit_cpu"
    _copy_record(tag, tmp_path)
    before = _digests(tmp_path)
    rc = main(["reproduce", "dpt_bandit", "--rescore", "--out", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--rescore" in err and tag in err and "regret" in err
    assert _digests(tmp_path) == before


def test_a_compared_learner_on_other_tasks_is_refused_before_anything_is_written(
    tmp_path, monkeypatch
):
    import numpy as np

    from agentrl.evaluate.evaluate import EvalResult
    from agentrl.evaluate.reproduce_report import method_labels, report
    from agentrl.project import RESULTS_ENV
    from agentrl.train.experiments import load_experiment

    monkeypatch.setenv(RESULTS_ENV, str(tmp_path))
    names = ("t2mir_ad_darkroom", "ad_darkroom")
    configs = {n: load_experiment(n, "smoke") for n in names}
    a, b = method_labels(list(configs.values()))
    rng = np.random.default_rng(0)

    def runs(ids):  # separate evaluations recording nothing that names their tasks
        return [EvalResult(n, rng.normal(size=(4, 6))) for n in ids]

    combined = {a: runs([a, a]), b: runs([b, b])}
    dirs = {n: [] for n in configs}
    try:
        report(configs, "smoke", combined, dirs)
    except ValueError as err:
        assert "cannot be shown to agree" in str(err)
    else:
        raise AssertionError("tasks never shown to agree were paired")
    assert not any(tmp_path.iterdir())


def _renamed_copy(out: Path, suffix: str) -> tuple[str, str]:
    """The demo record copied into ``out`` as ``..._SUFFIX``: ``(tag, named)``."""
    tag = "repro_ad_darkroom_demo"
    named = f"{tag}_{suffix}"
    record = json.loads((RESULTS / f"{tag}.json").read_text())
    (out / f"{named}.json").write_text(json.dumps({**record, "name": named}))
    shutil.copytree(RESULTS / tag, out / named)
    return tag, named


def test_a_record_suffix_names_the_record_and_finds_it_again(tmp_path):
    """``--record-suffix fresh`` reads and writes ``..._fresh``, never the
    preset's record (a --first-seed run must not replace it)."""
    tag, named = _renamed_copy(tmp_path, "fresh")
    rc = main(["reproduce", "ad_darkroom", "--preset", "demo", "--rescore",
               "--record-suffix", "fresh", "--out", str(tmp_path)])  # fmt: skip
    assert rc == 0
    assert (tmp_path / f"{named}.md").read_text().startswith(f"# {named}\n")
    assert json.loads((tmp_path / f"{named}.json").read_text())["name"] == named
    assert not (tmp_path / f"{tag}.json").exists()
    assert not (tmp_path / tag).exists()


def test_a_first_seed_run_names_its_own_record(tmp_path):
    """Seeds from 3 on read and write ``..._first_seed3`` unless a suffix is
    given: other seeds never replace the preset's record."""
    from agentrl.evaluate.reproduce import record_name_suffix

    assert record_name_suffix(None, 0) == ""
    assert record_name_suffix(None, 3) == "_first_seed3"
    assert record_name_suffix("fresh", 3) == "_fresh"
    tag, named = _renamed_copy(tmp_path, "first_seed3")
    rc = main(["reproduce", "ad_darkroom", "--preset", "demo", "--rescore",
               "--first-seed", "3", "--out", str(tmp_path)])  # fmt: skip
    assert rc == 0
    assert (tmp_path / f"{named}.md").read_text().startswith(f"# {named}\n")
    assert not (tmp_path / f"{tag}.json").exists()
