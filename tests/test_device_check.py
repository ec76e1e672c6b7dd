"""benchmarks/device_check.sh: its plan, its time limits, its files, and a
smoke-size run of the same script on the CPU.

The default test runs the script with ``--smoke`` on one small benchmark
(``train_throughput --gpu --quick``: about a minute of CPU). A reproduction
step at smoke size takes minutes on the shared 2-core machine (5+ minutes
each for ``dpt_bandit`` and ``ad_darkroom`` at load 15, most of it in
evaluation), so the run of two experiments is ``@pytest.mark.long``. Every
smoke step (15 reproductions and 5 benchmarks, most of an hour here) is a
manual check: ``bash benchmarks/device_check.sh --smoke --out /tmp/check``.
The XLA-flags probe (``--xla-flags auto``, the default) is planned and its
choice passed on in fast tests with a fake step runner, and run for real
before one benchmark in a long test; the other runs pass ``none``.
``device_ledger.py`` files two checks' files into a ledger (an ``ok`` step
stays ``ok`` when a later check fails it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "device_check.sh"
sys.path.insert(0, str(ROOT / "benchmarks"))

import _device_check as check  # noqa: E402
import device_ledger  # noqa: E402

FILES = {
    "summary.json",
    "summary.md",
    "reproductions.md",
    "benchmarks.md",
    "archive.tar.gz",
}


def _args(*argv: str):
    """The check's arguments; XLA's default flags (no probe) unless given."""
    if not any(a.startswith("--xla-flags") for a in argv):
        argv = (*argv, "--xla-flags", "none")
    return check.parse(list(argv))


def test_every_experiment_with_a_gpu_preset_is_reproduced_in_a_known_order():
    from agentrl.train.experiments import known_experiments, load_module

    with_gpu = {n for n in known_experiments() if "gpu" in load_module(n).PRESETS}
    assert set(check.REPRODUCTIONS) == with_gpu
    assert set(check.experiments_with("gpu")) == with_gpu
    assert check.reproduction_order("gpu") == list(check.REPRODUCTIONS)


def test_plan_runs_reproductions_then_benchmarks(tmp_path):
    steps = check.plan_steps(_args(), tmp_path)
    kinds = [s.kind for s in steps]
    assert kinds == sorted(kinds, key=lambda k: k != "reproduce")
    first = steps[0]
    assert first.name == "reproduce:dpt_bandit"
    assert first.argv[:2] == ["reproduce", "dpt_bandit"]
    assert (
        "--preset" in first.argv
        and first.argv[first.argv.index("--preset") + 1] == "gpu"
    )
    assert first.argv[-3:] == ["--controls", "--seeds", "1"]  # the target's
    assert all("--controls" not in s.argv for s in steps[1:])
    assert [s.name for s in steps if s.kind == "bench"] == [
        f"bench:{b[0]}" for b in check.BENCHMARKS
    ]
    smoke = check.plan_steps(_args("--smoke"), tmp_path)
    assert all(
        "gpu" not in s.argv[s.argv.index("--preset") + 1]
        for s in smoke
        if s.kind == "reproduce"
    )


def test_seeds5_mode_runs_each_seed_then_reports(tmp_path):
    steps = check.plan_steps(_args("--seeds5", "dpt_bandit"), tmp_path)
    assert [s.name for s in steps] == [
        *(f"reproduce:dpt_bandit:seed{s}" for s in range(5)),
        "reproduce:dpt_bandit:report",
    ]
    assert all("--controls" in s.argv for s in steps)
    assert steps[3].argv[-4:] == ["--seeds", "1", "--first-seed", "3"]
    assert steps[-1].argv[-2:] == ["--seeds", "5"]


def test_the_xla_flags_probe_runs_first_only_when_auto(tmp_path):
    probe, *rest = check.plan_steps(_args("--xla-flags", "auto"), tmp_path)
    assert (probe.name, probe.kind) == ("probe:xla_flags", "probe")
    assert probe.argv[probe.argv.index("--variants") + 1] == check.PROBE_VARIANTS
    assert probe.argv[probe.argv.index("--cases") + 1] == check.PROBE_CASES
    only = _args("--xla-flags", "auto", "--only", "reproduce:ad_darkroom")
    assert [s.name for s in check.plan_steps(only, tmp_path)] == [
        "probe:xla_flags",
        "reproduce:ad_darkroom",
    ]
    assert [s.name for s in rest] == [
        s.name for s in check.plan_steps(_args(), tmp_path)
    ]
    assert check.parse([]).xla_flags == "auto"  # the default


def _write_probe(results: Path, best):
    variants = {"fast_compile": "--xla_gpu_autotune_level=0", "default": ""}
    payload = {"results": {"best": best, "variants": variants}, "targets": []}
    results.mkdir(parents=True, exist_ok=True)
    (results / "xla_flags_probe.json").write_text(json.dumps(payload))


@pytest.mark.parametrize("best", ["fast_compile", None])
def test_the_probes_choice_goes_to_every_later_step(tmp_path, monkeypatch, best):
    seen = {}

    def fake_run(step, limit, log, env):
        if step.kind == "probe":
            _write_probe(tmp_path / "results", best)
        seen[step.name] = env.get("XLA_FLAGS", "")
        return "ok", 0, 1.0

    monkeypatch.setattr(check, "run_step", fake_run)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    only = "reproduce:dpt_bandit,bench:sweep_members,bench:xla_flags"
    args = _args("--xla-flags", "auto", "--only", only, "--previous", "")
    entries = check.run_all(args, tmp_path)
    assert [e["name"] for e in entries] == ["probe:xla_flags", *only.split(",")]
    assert seen["probe:xla_flags"] == ""
    want = "--xla_gpu_autotune_level=0" if best else ""
    assert seen["reproduce:dpt_bandit"] == seen["bench:sweep_members"] == want
    assert seen["bench:xla_flags"] == ""  # compares against XLA's defaults
    assert entries[1]["xla_flags"] == want
    chosen = entries[0]["chosen"]
    assert chosen == ({"variant": best, "flags": want} if best else None)


def test_explicit_xla_flags_reach_every_step_without_a_probe(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(
        check,
        "run_step",
        lambda step, limit, log, env: seen.append(env["XLA_FLAGS"]) or ("ok", 0, 1.0),
    )
    monkeypatch.setenv("XLA_FLAGS", "--xla_a=1")
    only = "reproduce:dpt_bandit"
    args = _args("--xla-flags=--xla_b=2", "--only", only, "--previous", "")
    entries = check.run_all(args, tmp_path)
    assert [e["name"] for e in entries] == [only]
    assert seen == ["--xla_a=1 --xla_b=2"]


def test_only_names_unknown_steps():
    with pytest.raises(SystemExit, match="unknown step"):
        check.plan_steps(_args("--only", "reproduce:nope"), Path("/tmp"))


def _running(pid: int) -> bool:
    """Whether ``pid`` lives (a zombie, killed but not yet reaped, does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def test_a_step_past_its_limit_is_killed_with_its_children(tmp_path):
    pidfile = tmp_path / "child.pid"
    sleeper = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; "
        "time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    step = check.Step("sleep", "bench", ["-c", sleeper], 3.0, (sys.executable,))
    start = time.monotonic()
    status, _, seconds = check.run_step(step, 3.0, tmp_path / "log", dict(os.environ))
    assert status == "timeout"
    assert time.monotonic() - start < 20 and seconds < 20
    child = int(pidfile.read_text())
    time.sleep(0.5)
    assert not _running(child)


def test_budget_cuts_limits_and_skips_steps_with_no_time(tmp_path, monkeypatch):
    clock, ran = [0.0], []

    def fake_run(step, limit, log, env):  # every step takes 20 s
        ran.append((step.name, limit))
        clock[0] += 20.0
        return "ok", 0, 20.0

    monkeypatch.setattr(check, "run_step", fake_run)
    # 100 s: 15 kept for the files, 60 for the benchmarks: the reproductions
    # end at 25 s, the benchmarks at 85 s
    args = _args("--budget", "100", "--bench-reserve", "60", "--previous", "")
    entries = check.run_all(args, tmp_path, now=lambda: clock[0])
    status = {e["name"]: e["status"] for e in entries}
    assert ran[0] == ("reproduce:dpt_bandit", 25.0)
    assert status["reproduce:ad_darkroom"] == "skipped"  # 5 s left < MIN_STEP_S
    benches = [name for name, _ in ran if name.startswith("bench:")]
    assert [limit for _, limit in ran[1:]] == [65.0, 45.0, 25.0]
    assert benches == [f"bench:{b[0]}" for b in check.BENCHMARKS[:3]]
    assert status[f"bench:{check.BENCHMARKS[3][0]}"] == "skipped"
    assert len(entries) == len(check.REPRODUCTIONS) + len(check.BENCHMARKS)


def test_steps_ok_in_the_previous_summary_are_skipped(tmp_path, monkeypatch):
    previous = tmp_path / "summary.json"
    done = {"name": "reproduce:dpt_bandit", "status": "ok", "seconds": 99.0}
    previous.write_text(json.dumps({"steps": [done]}))
    ran = []

    def fake_run(step, limit, log, env):
        ran.append(step.name)
        return "ok", 0, 1.0

    monkeypatch.setattr(check, "run_step", fake_run)
    argv = ["--previous", str(previous), "--only"]
    argv.append("reproduce:dpt_bandit,reproduce:ad_darkroom")
    entries = check.run_all(_args(*argv), tmp_path / "w1")
    assert ran == ["reproduce:ad_darkroom"]
    assert entries[0]["seconds"] == 99.0 and entries[0]["skipped_now"]
    ran.clear()
    check.run_all(_args(*argv, "--redo"), tmp_path / "w2")
    assert ran == ["reproduce:dpt_bandit", "reproduce:ad_darkroom"]


def test_a_benchmark_cut_by_its_budget_is_partial_and_runs_again(tmp_path, monkeypatch):
    def fake_run(step, limit, log, env):  # a record with one row left unrun
        rows = [{"status": "ok"}, {"status": check.BUDGET_CUT}]
        record = {"results": {"rows": rows}, "targets": []}
        (tmp_path / "results" / "cut.json").write_text(json.dumps(record))
        return "ok", 0, 1.0

    monkeypatch.setattr(check, "run_step", fake_run)
    only = "bench:train_throughput"
    entries = check.run_all(_args("--only", only, "--previous", ""), tmp_path)
    assert entries[0]["status"] == "partial" and entries[0]["records"] == ["cut"]
    previous = tmp_path / "summary.json"
    previous.write_text(json.dumps({"steps": entries}))
    assert check._previous(str(previous)) == {}  # the next check runs it


def test_wheels_helper_names_a_locked_version_for_every_package():
    out = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "device_wheels.sh"), "--list"],
        capture_output=True,
        text=True,
        check=True,
    )
    pins = dict(line.split("==") for line in out.stdout.split())
    for name in ("tensorflow-datasets", "grain", "array-record", "gymnax", "tyro"):
        assert pins[name]
    assert pins["promise"] == "2.3"
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", ".whl/x.whl"], cwd=ROOT, check=False
    )
    assert ignored.returncode == 0, ".whl/ must be git-ignored"


def _smoke(tmp_path: Path, only: str | None, xla_flags: str = "none") -> dict:
    out = tmp_path / "out"
    cmd = ["bash", str(SCRIPT), "--smoke", "--out", str(out)]
    cmd += ["--xla-flags", xla_flags]
    if only:
        cmd += ["--only", only]
    env = {**os.environ, "PYTHON": sys.executable}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert {p.name for p in out.iterdir()} == FILES
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mode"] == "smoke"
    with tarfile.open(out / "archive.tar.gz") as tar:
        names = tar.getnames()
    assert any(n.startswith("logs/") for n in names)
    assert not any("checkpoints" in n for n in names)
    # datasets stay out: a run's own and those reproduce keeps (runs/datasets)
    assert not any("/dataset/" in n or "/datasets/" in n for n in names)
    return summary


@pytest.mark.long
def test_smoke_run_of_a_benchmark(tmp_path):
    summary = _smoke(tmp_path, "bench:train_throughput")
    (step,) = summary["steps"]
    assert step["status"] == "ok", step
    assert step["records"] == ["train_throughput_gpu"]
    assert any("bf16 FLOP/s fraction" in t["name"] for t in step["targets"])
    md = (tmp_path / "out" / "benchmarks.md").read_text()
    assert "## train_throughput_gpu" in md
    assert "(none written)" in (tmp_path / "out" / "reproductions.md").read_text()


@pytest.mark.long
def test_smoke_run_of_the_xla_flags_probe_then_the_sweep_benchmark(tmp_path):
    summary = _smoke(tmp_path, "bench:sweep_members", xla_flags="auto")
    probe, step = summary["steps"]
    assert probe["status"] == "ok", probe
    assert probe["records"] == ["xla_flags_probe"]
    assert probe["chosen"]["variant"] in check.PROBE_VARIANTS.split(",")
    assert step["xla_flags"].endswith(probe["chosen"]["flags"])
    assert step["status"] == "ok", step
    assert step["records"] == ["sweep_members"]
    assert any("members vs 1" in t["name"] for t in step["targets"])


SMALL = "reproduce:dpt_bandit,reproduce:ad_darkroom,bench:train_throughput"


@pytest.mark.long
def test_smoke_run_of_two_experiments_and_a_benchmark(tmp_path):
    summary = _smoke(tmp_path, SMALL)
    steps = {s["name"]: s for s in summary["steps"]}
    assert set(steps) == set(SMALL.split(","))
    assert all(s["status"] == "ok" for s in steps.values()), steps
    assert steps["reproduce:dpt_bandit"]["records"] == ["repro_dpt_bandit_smoke"]
    assert steps["bench:train_throughput"]["records"] == ["train_throughput_gpu"]
    md = (tmp_path / "out" / "reproductions.md").read_text()
    assert "repro_dpt_bandit_smoke" in md and "repro_ad_darkroom_smoke" in md
    assert "train_throughput_gpu" in (tmp_path / "out" / "benchmarks.md").read_text()


def test_a_benchmarks_budget_is_cut_to_its_steps_limit():
    argv = ["bench", "train_throughput", "--gpu", "--budget", "140"]
    assert check.fit_budget(argv, 180.0) == [*argv[:-1], "140"]
    assert check.fit_budget(argv, 100.0) == [*argv[:-1], "60"]
    assert check.fit_budget(argv, 30.0) == [*argv[:-1], "10"]
    assert check.fit_budget(["bench", "x"], 5.0) == ["bench", "x"]


def test_long_logs_keep_their_end_in_the_archive(tmp_path):
    import _device_report as report

    log = tmp_path / "a.log"
    log.write_bytes(b"x" * 5000 + b"THE END\n")
    report._keep_tail(log, 1000)
    text = log.read_text()
    assert text.startswith("[... first") and text.endswith("THE END\n")
    assert len(text) < 1100


def _check_folder(folder: Path, date: str, status: str, record: str) -> Path:
    """A check's files as the run tool brings them back (summary + archive)."""
    folder.mkdir(parents=True)
    step = {"name": "reproduce:dpt_bandit", "status": status, "date": date}
    summary = {
        "mode": "gpu",
        "date": date,
        "device": {"gpu": ["H200"]},
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
    with tarfile.open(folder / "archive.tar.gz", "w:gz") as tar:
        tar.add(work / "results", arcname="results")
    return folder


def test_the_ledger_files_each_check_and_keeps_a_pass_over_a_later_failure(
    tmp_path,
):
    first = _check_folder(
        tmp_path / "1", "2026-11-28T16:49:08+00:00", "ok", "repro_dpt_bandit_gpu"
    )
    second = _check_folder(
        tmp_path / "2", "2026-11-28T16:56:38+00:00", "timeout", "repro_other_gpu"
    )
    gpu, results = tmp_path / "gpu", tmp_path / "results"
    gpu.mkdir()
    results.mkdir()
    old = {"name": "bench:data_generation", "status": "ok", "date": "earlier"}
    (gpu / "summary.json").write_text(json.dumps({"steps": [old]}))
    args = [str(first), str(second), "--gpu", str(gpu), "--results", str(results)]
    device_ledger.main(args)
    ledger = json.loads((gpu / "summary.json").read_text())
    by_name = {s["name"]: s for s in ledger["steps"]}
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
    device_ledger.main([str(again), "--gpu", str(gpu), "--results", str(results)])
    ledger = json.loads((gpu / "summary.json").read_text())
    dates = {s["name"]: s["date"] for s in ledger["steps"]}
    assert dates["reproduce:dpt_bandit"].startswith("2026-11-29")


def test_the_ledger_refuses_a_folder_without_a_summary(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        device_ledger.main([str(tmp_path)])
    assert exit_info.value.code == 2
    assert "no summary.json" in capsys.readouterr().err
