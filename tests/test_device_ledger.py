"""benchmarks/device_ledger.py: a device check's files filed into the GPU
ledger (run-*/ folders, the records, the ledger's summary), and what it
refuses: a smoke or CPU summary, a worse entry over a better one, a step
whose records did not come back counted as done."""

from __future__ import annotations

import json
import stat
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import device_ledger  # noqa: E402


def _check_folder(
    folder: Path,
    date: str,
    status: str,
    record: str,
    mode: str = "gpu",
    gpu: list | None = None,
    archive: bool = True,
) -> Path:
    """A check's files as the run tool brings them back (summary + archive)."""
    folder.mkdir(parents=True)
    step = {"name": "reproduce:dpt_bandit", "status": status, "date": date}
    step["records"] = [record]
    summary = {
        "mode": mode,
        "date": date,
        "device": {"gpu": ["H200"] if gpu is None else gpu},
        "budget_s": 300.0,
        "seconds": 200.0,
        "steps": [step, {"name": "bench:x", "status": "skipped"}],
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "summary.md").write_text("# check\n")
    work = folder / "work"
    (work / "results" / f"{record}").mkdir(parents=True)
    (work / "results" / f"{record}.json").write_text(json.dumps({"date": date}))
    (work / "results" / f"{record}" / "results.md").write_text(date)
    (work / "results" / "xla_flags_probe.json").write_text(json.dumps({"d": date}))
    if archive:
        with tarfile.open(folder / "archive.tar.gz", "w:gz") as tar:
            tar.add(work / "results", arcname="results")
    return folder


def _ledger(tmp_path: Path) -> tuple[Path, Path]:
    gpu, results = tmp_path / "gpu", tmp_path / "results"
    gpu.mkdir(exist_ok=True)
    results.mkdir(exist_ok=True)
    return gpu, results


def _file(gpu: Path, results: Path, *checks: Path, extra=()) -> dict:
    argv = [*map(str, checks), "--gpu", str(gpu), "--results", str(results)]
    device_ledger.main([*argv, *extra])
    ledger = json.loads((gpu / "summary.json").read_text())
    return {s["name"]: s for s in ledger["steps"]} | {"": ledger}


def test_the_ledger_files_each_check_and_keeps_a_pass_over_a_later_failure(
    tmp_path,
):
    first = _check_folder(
        tmp_path / "1", "2026-11-28T16:49:08+00:00", "ok", "repro_dpt_bandit_gpu"
    )
    second = _check_folder(
        tmp_path / "2", "2026-11-28T16:56:38+00:00", "timeout", "repro_other_gpu"
    )
    gpu, results = _ledger(tmp_path)
    old = {"name": "bench:data_generation", "status": "ok", "date": "earlier"}
    (gpu / "summary.json").write_text(json.dumps({"steps": [old]}))
    by_name = _file(gpu, results, first, second)
    ledger = by_name.pop("")
    assert set(by_name) == {"bench:data_generation", "reproduce:dpt_bandit"}
    assert by_name["reproduce:dpt_bandit"]["status"] == "ok"  # not the timeout
    assert by_name["reproduce:dpt_bandit"]["date"].startswith("2026-11-28T16:49")
    assert ledger["date"].startswith("2026-11-28T16:56")  # the latest check's
    assert (gpu / "run-2026-11-28T1649" / "summary.json").is_file()
    assert (gpu / "run-2026-11-28T1656" / "archive.tar.gz").is_file()
    assert (results / "repro_dpt_bandit_gpu" / "results.md").is_file()
    assert (results / "repro_other_gpu.json").is_file()
    assert json.loads((gpu / "xla_flags_probe.json").read_text())["d"].startswith(
        "2026-11-28T16:56"
    )
    assert "## Ledger" in (gpu / "summary.md").read_text()
    # a later ok replaces an earlier ok
    again = _check_folder(
        tmp_path / "3", "2026-11-29T10:00:00+00:00", "ok", "repro_dpt_bandit_gpu"
    )
    dates = {n: s.get("date") for n, s in _file(gpu, results, again).items()}
    assert dates["reproduce:dpt_bandit"].startswith("2026-11-29")


def test_the_ledger_refuses_a_folder_without_a_summary(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        device_ledger.main([str(tmp_path)])
    assert exit_info.value.code == 2
    assert "no summary.json" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("mode", "gpu", "said"),
    [("smoke", ["H200"], "--smoke"), ("gpu", [], "no GPU")],
)
def test_the_ledger_refuses_a_smoke_or_cpu_check_unless_told(
    tmp_path, capsys, mode, gpu, said
):
    check = _check_folder(
        tmp_path / "c", "2026-11-30T10:00:00+00:00", "ok", "repro_x", mode, gpu
    )
    ledger, results = tmp_path / "gpu", tmp_path / "results"
    argv = [str(check), "--gpu", str(ledger), "--results", str(results)]
    with pytest.raises(SystemExit) as exit_info:
        device_ledger.main(argv)
    assert exit_info.value.code == 2
    assert said in capsys.readouterr().err
    assert not ledger.exists() and not results.exists()  # nothing written
    device_ledger.main([*argv, "--any-device"])  # a test ledger, say
    assert (ledger / "summary.json").is_file()


def test_a_worse_entry_never_replaces_a_better_one(tmp_path):
    def step(status, date):
        return {"name": "s", "status": status, "date": date}

    merge = device_ledger.merge_steps
    ok, partial = step("ok", "1"), step("partial", "2")
    assert merge([ok], [partial]) == [ok]
    assert merge([partial], [step("failed", "3")]) == [partial]
    assert merge([partial], [step("timeout", "3")]) == [partial]
    assert merge([step("failed", "1")], [partial]) == [partial]
    assert merge([partial], [step("partial", "4")]) == [step("partial", "4")]
    assert merge([step("timeout", "1")], [step("failed", "5")]) == [step("failed", "5")]
    assert merge([ok], [step("ok", "6")]) == [step("ok", "6")]
    assert merge([ok], [{**step("skipped", "7")}]) == [ok]


def test_a_step_whose_records_did_not_come_back_is_partial(tmp_path):
    """A check killed before its end brings back its summary alone: its ok
    steps are filed with their seconds, as partial (the next check runs
    them again), and never replace an earlier ok."""
    gpu, results = _ledger(tmp_path)
    cut = _check_folder(
        tmp_path / "1",
        "2026-11-30T10:00:00+00:00",
        "ok",
        "repro_dpt_bandit_gpu",
        archive=False,
    )
    step = _file(gpu, results, cut)["reproduce:dpt_bandit"]
    assert step["status"] == "partial"
    assert "did not come back" in step["reason"]
    whole = _check_folder(
        tmp_path / "2", "2026-11-30T11:00:00+00:00", "ok", "repro_dpt_bandit_gpu"
    )
    assert _file(gpu, results, whole)["reproduce:dpt_bandit"]["status"] == "ok"
    later_cut = _check_folder(
        tmp_path / "3",
        "2026-11-30T12:00:00+00:00",
        "ok",
        "repro_dpt_bandit_gpu",
        archive=False,
    )
    kept = _file(gpu, results, later_cut)["reproduce:dpt_bandit"]
    assert kept["status"] == "ok" and kept["date"].startswith("2026-11-30T11")


def test_files_are_copied_writable_from_read_only_ones(tmp_path):
    """The run tool's files_at are read-only: the ledger's copies are not,
    and the same check filed again replaces them."""
    check = _check_folder(
        tmp_path / "1", "2026-11-30T10:00:00+00:00", "ok", "repro_dpt_bandit_gpu"
    )
    for path in check.iterdir():
        if path.is_file():
            path.chmod(0o444)
    gpu, results = _ledger(tmp_path)
    _file(gpu, results, check)
    _file(gpu, results, check)
    for path in (gpu / "run-2026-11-30T1000").iterdir():
        assert path.stat().st_mode & stat.S_IWUSR, path
    assert (results / "repro_dpt_bandit_gpu.json").stat().st_mode & stat.S_IWUSR


def test_a_seeds5_check_goes_to_its_own_ledger_by_default(tmp_path, monkeypatch):
    """Where ``device_check.sh --seeds5 NAME`` reads its ``--previous``."""
    monkeypatch.setattr(device_ledger, "ROOT", tmp_path)
    check = _check_folder(
        tmp_path / "c",
        "2026-11-30T10:00:00+00:00",
        "ok",
        "repro_dpt_bandit_gpu",
        mode="seeds5 dpt_bandit",
    )
    results = tmp_path / "benchmarks" / "results"
    device_ledger.main([str(check), "--results", str(results)])
    seeds5 = results / "gpu_seeds5_dpt_bandit"
    assert (seeds5 / "summary.json").is_file()
    assert (seeds5 / "run-2026-11-30T1000" / "summary.json").is_file()
    assert not (results / "gpu").exists()


def test_filing_warns_when_the_tree_outgrows_its_share(monkeypatch, capsys):
    import travel_size

    monkeypatch.setattr(travel_size, "tree_bytes", lambda: 40 * 2**20)
    device_ledger.warn_if_too_big()
    assert "over its 36 MiB share" in capsys.readouterr().err
    monkeypatch.setattr(travel_size, "tree_bytes", lambda: 30 * 2**20)
    device_ledger.warn_if_too_big()
    assert capsys.readouterr().err == ""
