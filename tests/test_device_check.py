"""benchmarks/device_check.sh: its plan, its time limits, its files, and a
smoke-size run of the same script on the CPU.

`make test` runs the script once, with ``--smoke`` on one quick benchmark
(``--only bench:xla_flags``: the preflight, then ``xla_flags --quick
--variants default``, under a minute on 2 cores). ``make test-long`` runs it
on ``train_throughput --gpu --quick``, on the XLA-flags probe
(``--xla-flags auto``) before ``sweep_members``, and on two reproductions
and a benchmark (5+ minutes each for ``dpt_bandit`` and ``ad_darkroom`` at
load 15, most of it in evaluation). Every smoke step (33 reproductions and 8
benchmarks, most of an hour here) is a manual check: ``bash
benchmarks/device_check.sh --smoke --out /tmp/check``. The planning, the
time limits, the XLA flags each step gets, the expected durations, the
summary written after every step and the preflight's verdict are checked in
fast tests with a fake step runner and a fake clock. The ledger
(``device_ledger.py``) is tested in tests/test_device_ledger.py.
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
    preflight, *steps = check.plan_steps(_args(), tmp_path)
    assert preflight.name == preflight.kind == "preflight"
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
    # the sweep target (never measured on a GPU) before train_throughput,
    # whose limit leaves the later benchmarks time
    names = [b[0] for b in check.BENCHMARKS]
    assert names.index("sweep_members") < names.index("train_throughput")
    assert dict((b[0], b[3]) for b in check.BENCHMARKS)["train_throughput"] <= 120
    smoke = check.plan_steps(_args("--smoke"), tmp_path)
    assert all(
        "gpu" not in s.argv[s.argv.index("--preset") + 1]
        for s in smoke
        if s.kind == "reproduce"
    )


def test_seeds5_mode_runs_each_seed_then_reports(tmp_path):
    preflight, *steps = check.plan_steps(_args("--seeds5", "dpt_bandit"), tmp_path)
    assert preflight.name == "preflight"
    assert [s.name for s in steps] == [
        *(f"reproduce:dpt_bandit:seed{s}" for s in range(5)),
        "reproduce:dpt_bandit:report",
    ]
    assert all("--controls" in s.argv for s in steps)
    assert steps[3].argv[-4:] == ["--seeds", "1", "--first-seed", "3"]
    assert steps[-1].argv[-2:] == ["--seeds", "5"]


def test_the_xla_flags_probe_runs_first_only_when_auto(tmp_path):
    _, probe, *rest = check.plan_steps(_args("--xla-flags", "auto"), tmp_path)
    assert (probe.name, probe.kind) == ("probe:xla_flags", "probe")
    assert probe.argv[probe.argv.index("--variants") + 1] == check.PROBE_VARIANTS
    assert probe.argv[probe.argv.index("--cases") + 1] == check.PROBE_CASES
    assert len(check.PROBE_VARIANTS.split(",")) > 1  # a choice to make
    only = _args("--xla-flags", "auto", "--only", "reproduce:ad_darkroom")
    assert [s.name for s in check.plan_steps(only, tmp_path)] == [
        "preflight",
        "probe:xla_flags",
        "reproduce:ad_darkroom",
    ]
    assert [s.name for s in rest] == [
        s.name for s in check.plan_steps(_args(), tmp_path)[1:]
    ]


def test_the_default_gives_every_step_the_cublas_flags_without_a_probe(
    tmp_path, monkeypatch
):
    import xla_flags

    assert check.CUBLAS_FLAGS == xla_flags.VARIANTS["cublas"]
    args = check.parse(["--only", "reproduce:dpt_bandit,bench:xla_flags"])
    assert args.xla_flags == "cublas"  # the default: no probe
    seen = {}

    def fake_run(step, limit, log, env):
        seen[step.name] = env.get("XLA_FLAGS", "")
        return "ok", 0, 1.0

    monkeypatch.setattr(check, "run_step", fake_run)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    args.previous = ""
    entries = check.run_all(args, tmp_path)
    assert [e["name"] for e in entries] == [
        "preflight",
        "reproduce:dpt_bandit",
        "bench:xla_flags",
    ]
    assert seen["reproduce:dpt_bandit"] == check.CUBLAS_FLAGS
    assert seen["bench:xla_flags"] == ""  # compares against XLA's defaults


def test_the_weight_gradient_split_is_a_late_benchmark_not_in_the_probe(tmp_path):
    assert "SPLIT" not in check.PROBE_CASES
    assert check.BENCHMARKS[-1][0] == "xla_flags_split"
    step = check.plan_steps(_args("--only", "bench:xla_flags_split"), tmp_path)[-1]
    i = step.argv.index("xla_flags")  # the benchmark it runs
    assert step.argv[i + 1 : i + 3] == ["--name", "xla_flags_split"]
    cases = step.argv[step.argv.index("--cases") + 1]
    assert "dpt_bandit:gpu:precision.SPLIT_MAX_CHUNKS=1" in cases.split(",")


def _write_probe(results: Path, best):
    variants = {"fast_compile": "--xla_gpu_autotune_level=0", "default": ""}
    payload = {"results": {"best": best, "variants": variants}, "targets": []}
    results.mkdir(parents=True, exist_ok=True)
    (results / "xla_flags_probe.json").write_text(json.dumps(payload))


@pytest.mark.parametrize("best", ["fast_compile", None])
def test_the_probes_choice_or_cublas_goes_to_every_later_step(
    tmp_path, monkeypatch, best
):
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
    names = ["preflight", "probe:xla_flags", *only.split(",")]
    assert [e["name"] for e in entries] == names
    assert seen["probe:xla_flags"] == ""
    # no choice (every variant failed, or the probe was killed): cublas,
    # not XLA's defaults (a 90 s compile per program)
    want = "--xla_gpu_autotune_level=0" if best else check.CUBLAS_FLAGS
    assert seen["reproduce:dpt_bandit"] == seen["bench:sweep_members"] == want
    assert seen["bench:xla_flags"] == ""  # compares against XLA's defaults
    assert entries[2]["xla_flags"] == want
    chosen = entries[1]["chosen"]
    assert chosen == ({"variant": best, "flags": want} if best else None)


def test_explicit_xla_flags_reach_every_step_but_the_flags_benchmark(
    tmp_path, monkeypatch
):
    seen = {}

    def fake_run(step, limit, log, env):
        seen[step.name] = env["XLA_FLAGS"]
        return "ok", 0, 1.0

    monkeypatch.setattr(check, "run_step", fake_run)
    monkeypatch.setenv("XLA_FLAGS", "--xla_a=1")
    only = "reproduce:dpt_bandit,bench:xla_flags"
    args = _args("--xla-flags=--xla_b=2", "--only", only, "--previous", "")
    entries = check.run_all(args, tmp_path)
    assert [e["name"] for e in entries] == ["preflight", *only.split(",")]
    assert seen["reproduce:dpt_bandit"] == "--xla_a=1 --xla_b=2"
    # its "default" variant must be XLA's defaults (the environment's own)
    assert seen["bench:xla_flags"] == "--xla_a=1"


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

    def fake_run(step, limit, log, env):  # every step but the preflight: 20 s
        ran.append((step.name, limit))
        clock[0] += 0.0 if step.kind == "preflight" else 20.0
        return "ok", 0, 20.0

    monkeypatch.setattr(check, "run_step", fake_run)
    # dpt_bandit took 10 s last time (expected 11 s); the others, never run,
    # are expected to take EXPECT_REPRO_S and would not fit
    previous = tmp_path / "summary.json"
    earlier = {"name": "reproduce:dpt_bandit", "status": "partial", "seconds": 10}
    previous.write_text(json.dumps({"steps": [earlier]}))
    # 100 s: 15 kept for the files, 60 for the benchmarks: the reproductions
    # end at 25 s, the benchmarks at 85 s
    args = _args("--budget", "100", "--bench-reserve", "60")
    args.previous = str(previous)
    entries = check.run_all(args, tmp_path / "w", now=lambda: clock[0])
    status = {e["name"]: e["status"] for e in entries}
    assert ran[:2] == [("preflight", 85.0), ("reproduce:dpt_bandit", 25.0)]
    assert status["reproduce:ad_darkroom"] == "skipped"  # 5 s left < MIN_STEP_S
    benches = [name for name, _ in ran if name.startswith("bench:")]
    assert [limit for _, limit in ran[2:]] == [65.0, 45.0, 25.0]
    assert benches == [f"bench:{b[0]}" for b in check.BENCHMARKS[:3]]
    assert status[f"bench:{check.BENCHMARKS[3][0]}"] == "skipped"
    assert len(entries) == 1 + len(check.REPRODUCTIONS) + len(check.BENCHMARKS)


def test_a_reproduction_that_would_not_fit_is_skipped_for_one_that_does(
    tmp_path, monkeypatch
):
    clock, ran = [0.0], []

    def fake_run(step, limit, log, env):  # each reproduction: 60 s
        ran.append(step.name)
        clock[0] += 60.0 if step.kind == "reproduce" else 0.0
        return "ok", 0, 60.0

    monkeypatch.setattr(check, "run_step", fake_run)
    previous = tmp_path / "summary.json"
    earlier = [  # a timeout at 240 s: 25% more; an ok of 50 s: 55 s
        {"name": "reproduce:dpt_darkroom", "status": "timeout", "seconds": 241.0}
        | {"limit_s": 240.0},
        {"name": "reproduce:t2mir_ad_darkroom", "status": "ok", "seconds": 50.0}
        | {"records": ["repro_t2mir_ad_darkroom_gpu"]},  # not back: runs again
    ]
    previous.write_text(json.dumps({"steps": earlier}))
    only = "reproduce:dpt_darkroom,reproduce:t2mir_ad_darkroom"
    only += ",reproduce:t2mir_dpt_darkroom"
    # 250 s: 15 for the files, none kept for benchmarks (none is planned):
    # 235 s of reproductions
    args = _args("--budget", "250", "--only", only)
    args.previous = str(previous)
    entries = check.run_all(args, tmp_path / "w", now=lambda: clock[0])
    by_name = {e["name"]: e for e in entries}
    assert ran == ["preflight", "reproduce:t2mir_ad_darkroom"]
    skipped = by_name["reproduce:dpt_darkroom"]
    assert skipped["status"] == "skipped" and skipped["expected_s"] == 301.2
    assert skipped["reason"].startswith("would not fit")
    assert by_name["reproduce:t2mir_ad_darkroom"]["expected_s"] == 55.0
    # 175 s left after it: the default expectation (180 s) does not fit
    last = by_name["reproduce:t2mir_dpt_darkroom"]
    assert last["status"] == "skipped" and last["expected_s"] == check.EXPECT_REPRO_S
    assert check.EXPECT_REPRO_S > 175.0
    # with the time, the one that timed out runs with its expectation as limit
    ran.clear()
    clock[0] = 0.0
    args = _args("--budget", "600", "--only", "reproduce:dpt_darkroom")
    args.previous = str(previous)
    entries = check.run_all(args, tmp_path / "w2", now=lambda: clock[0])
    assert ran == ["preflight", "reproduce:dpt_darkroom"]
    assert entries[1]["limit_s"] == 301.2 > check.REPRO_LIMIT_S


def test_expected_seconds_come_from_the_last_record_of_the_step():
    step = check.Step("reproduce:x", "reproduce", [], 240.0, expect_s=180.0)
    assert check.expected_s(step, None) == 180.0
    assert check.expected_s(step, {"status": "ok", "seconds": 100.0}) == 110.0
    assert check.expected_s(step, {"status": "partial", "seconds": 20.0}) == 22.0
    timeout = {"status": "timeout", "seconds": 201.0, "limit_s": 200.0}
    assert check.expected_s(step, timeout) == 251.2  # a quarter more
    short = {"status": "timeout", "seconds": 37.0, "limit_s": 36.4}
    assert check.expected_s(step, short) == 180.0  # a lower bound, not a time
    assert check.expected_s(step, {"status": "failed", "seconds": 11.0}) == 180.0
    bench = check.Step("bench:x", "bench", [], 90.0)
    assert check.expected_s(bench, {"status": "ok", "seconds": 500.0}) is None


def test_steps_ok_in_the_previous_summary_are_skipped(tmp_path, monkeypatch):
    previous = tmp_path / "summary.json"
    done = {"name": "reproduce:dpt_bandit", "status": "ok", "seconds": 99.0}
    done["records"] = ["repro_dpt_bandit_gpu"]
    (tmp_path / "repro_dpt_bandit_gpu.json").write_text("{}")
    previous.write_text(json.dumps({"steps": [done]}))
    ran = []

    def fake_run(step, limit, log, env):
        ran.append(step.name)
        return "ok", 0, 1.0

    monkeypatch.setattr(check, "run_step", fake_run)
    argv = ["--previous", str(previous), "--only"]
    argv.append("reproduce:dpt_bandit,reproduce:ad_darkroom")
    entries = check.run_all(_args(*argv), tmp_path / "w1")
    assert ran == ["preflight", "reproduce:ad_darkroom"]
    assert entries[1]["seconds"] == 99.0 and entries[1]["skipped_now"]
    ran.clear()
    check.run_all(_args(*argv, "--redo"), tmp_path / "w2")
    assert ran == ["preflight", "reproduce:dpt_bandit", "reproduce:ad_darkroom"]


def test_a_step_is_done_only_when_its_records_came_back(tmp_path):
    ledger = tmp_path / "results" / "gpu"
    ledger.mkdir(parents=True)
    steps = [
        {"name": "bench:a", "status": "ok", "records": ["a"]},  # in the ledger
        {"name": "reproduce:b", "status": "ok", "records": ["repro_b_gpu"]},
        {"name": "bench:c", "status": "ok", "records": ["c"]},  # did not come back
        {"name": "bench:d", "status": "ok", "records": []},  # wrote nothing
        {"name": "bench:e", "status": "partial", "records": ["e"]},
    ]
    (ledger / "summary.json").write_text(json.dumps({"steps": steps}))
    for path in ("gpu/a.json", "repro_b_gpu.json", "gpu/e.json"):
        (ledger.parent / path).write_text("{}")
    done = check._previous(str(ledger / "summary.json"))
    assert set(done) == {"bench:a", "reproduce:b"}


def test_a_benchmark_cut_by_its_budget_is_partial_and_runs_again(tmp_path, monkeypatch):
    def fake_run(step, limit, log, env):  # a record with one row left unrun
        if step.kind == "preflight":
            return "ok", 0, 1.0
        rows = [{"status": "ok"}, {"status": check.BUDGET_CUT}]
        record = {"results": {"rows": rows}, "targets": []}
        (tmp_path / "results" / "cut.json").write_text(json.dumps(record))
        return "ok", 0, 1.0

    monkeypatch.setattr(check, "run_step", fake_run)
    only = "bench:train_throughput"
    entries = check.run_all(_args("--only", only, "--previous", ""), tmp_path)
    entries = entries[1:]  # after the preflight
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
    """Run the script at smoke size; its summary (the preflight ran, ok)."""
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
    assert summary["mode"] == "smoke" and summary["complete"] is True
    preflight = summary["steps"].pop(0)
    assert preflight["name"] == "preflight" and preflight["status"] == "ok", preflight
    assert preflight["preflight"]["backend"] == "cpu"
    with tarfile.open(out / "archive.tar.gz") as tar:
        names = tar.getnames()
    assert any(n.startswith("logs/") for n in names)
    assert not any("checkpoints" in n for n in names)
    # datasets stay out: a run's own and those reproduce keeps (runs/datasets)
    assert not any("/dataset/" in n or "/datasets/" in n for n in names)
    return summary


def test_smoke_run_of_the_preflight_and_one_quick_benchmark(tmp_path):
    """The one run of the script in `make test` (under a minute on 2 cores)."""
    summary = _smoke(tmp_path, "bench:xla_flags")
    (step,) = summary["steps"]
    assert step["status"] == "ok", step
    assert step["records"] == ["xla_flags"]
    assert "## xla_flags" in (tmp_path / "out" / "benchmarks.md").read_text()
    assert "(none written)" in (tmp_path / "out" / "reproductions.md").read_text()


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


def _fake_main(tmp_path, monkeypatch, fake_run, *argv):
    """``main`` at smoke size with ``fake_run`` for every step: its exit
    status and summary."""
    monkeypatch.setattr(check, "run_step", fake_run)
    out, work = tmp_path / "out", tmp_path / "work"
    rc = check.main(["--smoke", "--out", str(out), "--work", str(work), *argv])
    return rc, json.loads((out / "summary.json").read_text())


def test_the_summary_is_written_after_every_step(tmp_path, monkeypatch):
    seen = []

    def fake_run(step, limit, log, env):
        path = tmp_path / "out" / "summary.json"
        seen.append(json.loads(path.read_text()) if path.is_file() else None)
        if path.is_file():
            seen[-1]["md"] = path.with_suffix(".md").read_text()
        return "ok", 0, 1.0

    only = "bench:eval_throughput,bench:xla_flags"
    rc, summary = _fake_main(tmp_path, monkeypatch, fake_run, "--only", only)
    assert rc == 0
    # before the second benchmark: the preflight and the first, not complete
    before = seen[2]
    assert before is not None, "no summary.json in --out after a step"
    assert [s["name"] for s in before["steps"]] == [
        "preflight",
        "bench:eval_throughput",
    ]
    assert before["complete"] is False
    assert "Still running" in before["md"]
    assert summary["complete"] is True and len(summary["steps"]) == 3
    assert {p.name for p in (tmp_path / "out").iterdir()} == FILES


def test_a_failed_preflight_stops_the_check_and_says_why(tmp_path, monkeypatch):
    ran = []

    def fake_run(step, limit, log, env):  # JAX on the CPU, tyro missing
        ran.append(step.name)
        report = {"want": "gpu", "backend": "cpu", "missing": {"tyro": "No module"}}
        log.write_text("PREFLIGHT " + json.dumps(report) + "\n")
        return "failed", 3, 1.0

    rc, summary = _fake_main(
        tmp_path, monkeypatch, fake_run, "--only", "bench:xla_flags"
    )
    assert rc == 3 and ran == ["preflight"]
    (step,) = summary["steps"]
    assert step["status"] == "failed"
    assert "'cpu', not 'gpu'" in step["reason"] and "tyro" in step["reason"]
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "**Stopped**: preflight failed" in md


def test_the_preflight_refuses_jax_on_the_cpu_for_a_gpu_check(tmp_path):
    step = check.preflight_step(_args())  # a GPU check, here on the CPU
    log = tmp_path / "preflight.log"
    env = check.step_env(False, tmp_path)
    status, rc, _ = check.run_step(step, 120.0, log, env)
    assert (status, rc) == ("failed", 3)
    found = check.preflight_report(log)
    assert found["backend"] == "cpu" and found["ok"] is False
    assert found["missing"] == {}  # this venv has every required module


def test_gpu_steps_run_on_cuda_only_and_with_the_systems_malloc(tmp_path):
    env = check.step_env(False, tmp_path)
    assert env["JAX_PLATFORMS"] == "cuda,cpu"
    assert env["AGENTRL_MALLOC"] == "system"
    smoke = check.step_env(True, tmp_path)
    assert smoke["JAX_PLATFORMS"] == "cpu"


def test_the_default_out_is_not_the_ledger_the_check_reads():
    import device_ledger

    args = check.parse([])
    ledger = check.ROOT / "benchmarks" / "results" / "gpu"
    assert Path(args.previous) == ledger / "summary.json"
    assert Path(args.out).resolve() != ledger.resolve()
    seeds5 = check.parse(["--seeds5", "dpt_bandit"])
    folder = Path(seeds5.previous).parent
    assert folder.name == "gpu_seeds5_dpt_bandit"
    assert Path(seeds5.out).resolve() != folder.resolve()
    # the ledger files a --seeds5 check where the next one reads it
    assert device_ledger.ledger_of({"mode": "seeds5 dpt_bandit"}) == folder
    assert device_ledger.ledger_of({"mode": "gpu"}) == ledger


def test_a_resume_of_one_reproduction_gets_the_budget_no_benchmark_needs(
    tmp_path, monkeypatch
):
    """device_check.sh's resume call, --only reproduce:NAME --budget 300 on
    a step the ledger has no time for: nothing is kept back for benchmarks
    none of which is planned, so the default expectation fits and it runs."""
    clock, ran = [0.0], []

    def fake_run(step, limit, log, env):
        ran.append((step.name, limit))
        return "ok", 0, 1.0

    monkeypatch.setattr(check, "run_step", fake_run)
    args = _args("--budget", "300", "--only", "reproduce:dpt_darkroom")
    args.previous = ""
    check.run_all(args, tmp_path / "w", now=lambda: clock[0])
    assert ran[1] == ("reproduce:dpt_darkroom", check.REPRO_LIMIT_S)


def test_the_seeds5_report_waits_for_every_seed(tmp_path, monkeypatch):
    """Seeds skipped for time: the report step would train them itself
    past its limit, so it is skipped too."""
    clock = [0.0]

    def fake_run(step, limit, log, env):  # a seed takes 250 s
        clock[0] += 250.0 if ":seed" in step.name else 0.0
        return "ok", 0, 250.0

    monkeypatch.setattr(check, "run_step", fake_run)
    args = _args("--seeds5", "dpt_bandit", "--budget", "510")
    args.previous = ""
    entries = check.run_all(args, tmp_path / "w", now=lambda: clock[0])
    by_name = {e["name"]: e for e in entries}
    assert by_name["reproduce:dpt_bandit:seed0"]["status"] == "ok"
    assert by_name["reproduce:dpt_bandit:seed1"]["status"] == "skipped"
    report = by_name["reproduce:dpt_bandit:report"]
    assert report["status"] == "skipped" and report["reason"] == "seeds not all done"
    # with time for every seed, the report runs
    clock[0] = 0.0
    args = _args("--seeds5", "dpt_bandit", "--budget", "2000")
    args.previous = ""
    entries = check.run_all(args, tmp_path / "w2", now=lambda: clock[0])
    status = {e["name"]: e["status"] for e in entries}
    assert status["reproduce:dpt_bandit:report"] == "ok"


def test_a_plan_that_cannot_be_made_still_leaves_a_summary(tmp_path, monkeypatch):
    """The experiments cannot be listed (a broken install): the check stops
    with exit 3 and says why in the summary it writes, as a failed
    preflight does."""

    def no_plan(args, work):
        raise SystemExit("could not list the experiments: ImportError")

    monkeypatch.setattr(check, "plan_steps", no_plan)
    out = tmp_path / "out"
    rc = check.main(["--out", str(out), "--budget", "100", "--xla-flags", "none"])
    assert rc == 3
    saved = json.loads((out / "summary.json").read_text())
    assert "could not list the experiments" in saved["steps"][0]["reason"]
