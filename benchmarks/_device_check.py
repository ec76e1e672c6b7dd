"""The device check's steps: reproductions and benchmarks, each with a time limit.

Run by ``benchmarks/device_check.sh`` (which installs the carried wheels
first; its header says how to start it on a GPU machine):

    python benchmarks/_device_check.py [--out DIR] [--smoke] [--budget S]
        [--only STEP,...] [--redo] [--seeds5 EXPERIMENT]

Default mode: every experiment's ``gpu`` preset reproduction for one seed
(``agentrl reproduce NAME --preset gpu --seeds 1``), in :data:`REPRODUCTIONS`
order (most valuable first), then the GPU benchmarks of :data:`BENCHMARKS`,
also by value. ``--seeds5 NAME``: five seeds of ``NAME`` with the controls,
one step per seed (``--first-seed s --seeds 1``), then one step that only
reports over all five (each seed's results are reused from its run).

Each step is a subprocess in its own process group with its own limit
(``timeout``): the step's own, cut to what is left of its phase (the
reproductions stop ``--bench-reserve`` seconds before the end, so the
benchmarks always get their share) and of the whole ``--budget``; a step
with under :data:`MIN_STEP_S` seconds left is skipped, not started. Steps
already ``ok`` in ``--previous`` (by default the committed
``benchmarks/results/gpu/summary.json``) are skipped unless ``--redo``, so
successive sessions work down the list; a benchmark whose own ``--budget``
left rows unrun (``not run: budget``) is ``partial``, not ``ok``, and runs
again.

Writes into ``--out`` (default ``benchmarks/results/gpu``, or
``benchmarks/results/gpu_smoke`` with ``--smoke``) exactly five files:
``summary.json`` (every step: status, limit, seconds, return code, the
targets its records hold, the log's last lines; steps skipped as done
earlier keep their earlier entry), ``summary.md`` (the steps and the
targets as tables), ``reproductions.md`` and ``benchmarks.md`` (the
markdown records the steps wrote) and ``archive.tar.gz`` (every step's
log, every record, plot and per-seed result, the runs' small files; no
checkpoint or dataset).

``--smoke`` runs the same steps at the ``smoke`` presets and the benchmarks'
quick sizes on the CPU (``JAX_PLATFORMS=cpu``): the check of this script
that ``make test`` runs (tests/test_device_check.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _device_report import write_outputs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

#: the experiments whose ``gpu`` preset is reproduced, most valuable first:
#: the issue's headline (DPT on bandits), AD and DPT on Dark Room, T2MIR
#: against them, AD-eps and DT, Point-Robot, MuJoCo (SAC histories on MJX:
#: needs the carried agentrl[mujoco] wheels), the online learners, XLand
#: (the largest data) last; then the later additions, by value among
#: themselves: DPT, RL² and transformer PPO on HalfCheetah-Vel (issue 36:
#: DPT first, a distilled learner with SAC's final-policy labels; the
#: online learners after it, RL² the cheaper); DT on Point-Robot. An
#: experiment with a ``gpu`` preset missing here is appended
#: (tests/test_device_check.py keeps the list complete).
REPRODUCTIONS = (
    "dpt_bandit",
    "ad_darkroom",
    "dpt_darkroom",
    "t2mir_ad_darkroom",
    "t2mir_dpt_darkroom",
    "ad_eps_darkroom",
    "dt_darkroom",
    "meta_dt_darkroom",
    "ad_point_robot",
    "dpt_point_robot",
    "t2mir_ad_point_robot",
    "meta_dt_point_robot",
    "ad_halfcheetah_vel",
    "t2mir_ad_halfcheetah_vel",
    "ad_walker_params",
    "radt_darkroom",
    "ad_eps_key_to_door",
    "radt_key_to_door",
    "rl2_bandit",
    "transformer_ppo_bandit",
    "rl2_darkroom",
    "transformer_ppo_darkroom",
    "xland_ad",
    "rl2_xland",
    "amago_darkroom",
    "amago_bandit",
    "amago_key_to_door",
    "amago_tmaze",
    "gpicl_bandit",  # one cell (all tasks); the study itself is a sweep
    "dpt_halfcheetah_vel",
    "rl2_halfcheetah_vel",
    "transformer_ppo_halfcheetah_vel",
    "dt_point_robot",  # the Meta-DT claim's DT at equal data
)

#: the reproductions run with ``--controls`` in the default mode too: the
#: issue's headline target times ``dpt_bandit``'s whole reproduction, its
#: in-context-learning controls included
WITH_CONTROLS = ("dpt_bandit",)

#: ``(benchmark, gpu arguments, smoke arguments, gpu limit s)`` by value
#: (a benchmark killed at its limit writes nothing: ``--budget`` makes
#: train_throughput stop starting shapes in time to write its record):
#: training FLOP utilisation at the gpu and full presets' shapes (issue 34.8),
#: 16 ``dpt_bandit`` gpu-preset members in one sweep against one (34.7's
#: target), history generation (34.3), vmapped sweeps at the smoke shapes,
#: the model and the evaluation loop, and last the XLA flag variants in full.
BENCHMARKS = (
    ("train_throughput", ["--gpu", "--budget", "140"], ["--gpu", "--quick"], 180),
    ("sweep_members", [], ["--quick"], 120),
    ("data_generation", ["--gpu", "--no-rss"], ["--quick", "--no-rss"], 120),
    ("sweep_vmap", [], ["--repeats", "1", "--widths", "8"], 120),
    ("model_throughput", ["--full"], [], 90),
    ("eval_throughput", [], ["--repeats", "1"], 90),
    # every flag variant, XLA's defaults included, at dpt_bandit's and
    # ad_darkroom's gpu shapes: the probe's choice checked against the default
    ("xla_flags", ["--budget", "260"], ["--quick", "--variants", "default"], 300),
)

#: ``--xla-flags auto``: a probe runs first, the training calls of
#: ``dpt_bandit``'s and ``ad_darkroom``'s gpu presets (width 32 and 512)
#: under these XLA flag variants (``benchmarks/xla_flags.py --profile``);
#: the one with the least compile + the presets' updates is set in
#: ``XLA_FLAGS`` for every later step (a variant that fails is not chosen).
#: The evidence (one H200, 2026-11-28, ``benchmarks/results/gpu/``): XLA's
#: defaults spent 90 s compiling dpt_bandit's call and 75 s one width-512
#: update, most of it autotuning, for updates of 2.5 ms and 23 ms;
#: autotuning off (``fast_compile``) compiled in 14 s and ran 5.0 ms and
#: ~185 ms; cuBLAS without autotuning (``cublas``) 9-10 s and 7.7 ms and 30
#: ms; the update loop as one CUDA graph changed nothing (the device was busy
#: 78-95% of the update: not launch-bound). The traces put most of that time
#: in float32 GEMMs: every backward matmul of the bfloat16 models, fixed
#: since (``agentrl.models.precision.mixed_dot_general``). After the fix
#: (2026-11-28, fourth check) ``cublas`` ran dpt_bandit's update in 3.1 ms
#: and ad_darkroom's in 17.7 ms, ``fast_compile`` 4.2 ms and past its limit
#: at width 512: so ``cublas`` alone, with dpt_bandit's case also without
#: the weight-gradient split (``precision.SPLIT_MAX_CHUNKS=1``, the
#: reference the split is measured against; traces put ~1.15 of its 3.05
#: busy ms in unsplit weight gradients).
PROBE_VARIANTS = "cublas"
PROBE_CASES = (
    "dpt_bandit:gpu,dpt_bandit:gpu:precision.SPLIT_MAX_CHUNKS=1,ad_darkroom:gpu"
)
PROBE_LIMIT_S = 200

#: steps that set XLA's flags themselves: they run without the probe's choice
#: (the full comparison's "default" variant must be XLA's defaults)
OWN_XLA_FLAGS = frozenset({"bench:xla_flags"})

#: the limit of one reproduction on the GPU (seconds); the smoke presets' own
REPRO_LIMIT_S = 240
SMOKE_LIMIT_S = 900  # a guard: a smoke reproduction took 5+ min at load 15
#: a step is not started with less than this left of its phase
MIN_STEP_S = 20
#: seconds kept at the end for writing the five files
PACK_S = 15
#: lines of a step's log kept in summary.json
TAIL_LINES = 15


@dataclasses.dataclass
class Step:
    """One subprocess of the check: ``argv`` after ``python -m agentrl.cli``."""

    name: str
    kind: str  # "probe", "reproduce" or "bench"
    argv: list[str]
    limit_s: float
    #: the program ``argv`` goes to (tests run others)
    program: tuple[str, ...] = (sys.executable, "-m", "agentrl.cli")

    def command(self) -> list[str]:
        return [*self.program, *self.argv]


@functools.cache
def experiments_with(preset: str) -> list[str]:
    """The experiments of this checkout's ``experiments/`` that have ``preset``.

    Asked of a subprocess on the CPU (the configs only): this process starts
    no JAX backend, so it holds no device memory the steps need.
    """
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from agentrl.train.experiments import load_module\n"
        "paths = sorted(Path(sys.argv[1]).glob('*.py'))\n"
        "print(json.dumps([p.stem for p in paths if not p.stem.startswith('_')\n"
        "                  and sys.argv[2] in load_module(str(p)).PRESETS]))\n"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "experiments"), preset],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    if proc.returncode:
        raise SystemExit(f"could not list the experiments:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def reproduction_order(preset: str) -> list[str]:
    """:data:`REPRODUCTIONS` followed by any other experiment with ``preset``."""
    found = list(experiments_with(preset))  # a copy of the cached list
    known = [n for n in REPRODUCTIONS if n in found]
    return known + [n for n in found if n not in REPRODUCTIONS]


def plan_steps(args: argparse.Namespace, work: Path) -> list[Step]:
    """The steps of this invocation, in order."""
    preset = "smoke" if args.smoke else "gpu"
    runs = str(work / "runs")
    results = str(work / "results")
    common = ["--preset", preset, "--runs", runs, "--out", results]
    limit = SMOKE_LIMIT_S if args.smoke else REPRO_LIMIT_S
    if args.seeds5:
        name = args.seeds5
        steps = [
            Step(
                f"reproduce:{name}:seed{s}",
                "reproduce",
                ["reproduce", name, *common, "--controls"]
                + ["--seeds", "1", "--first-seed", str(s)],
                limit * 2,  # the expert-distillation control trains again
            )
            for s in range(5)
        ]
        report = ["reproduce", name, *common, "--controls", "--seeds", "5"]
        return steps + [Step(f"reproduce:{name}:report", "reproduce", report, 120)]
    steps = [
        Step(
            f"reproduce:{n}",
            "reproduce",
            ["reproduce", n, *common]
            + (["--controls"] if n in WITH_CONTROLS else [])
            + ["--seeds", "1"],
            limit,
        )
        for n in reproduction_order(preset)
    ]
    for name, gpu_args, smoke_args, gpu_limit in BENCHMARKS:
        bench_args = smoke_args if args.smoke else gpu_args
        steps.append(
            Step(
                f"bench:{name}",
                "bench",
                ["bench", "--out", results, name, *bench_args],
                SMOKE_LIMIT_S if args.smoke else gpu_limit,
            )
        )
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        unknown = sorted(set(wanted) - {s.name for s in steps})
        if unknown:
            raise SystemExit(
                f"--only: unknown step(s) {', '.join(unknown)}; the steps are "
                + ", ".join(s.name for s in steps)
            )
        steps = [s for s in steps if s.name in wanted]
    return probe_steps(args, results) + steps


def probe_steps(args: argparse.Namespace, results: str) -> list[Step]:
    """The XLA-flags probe (``--xla-flags auto``), before every other step."""
    if args.xla_flags != "auto":
        return []
    sizes = ["--quick"] if args.smoke else ["--cases", PROBE_CASES, "--calls", "5"]
    argv = ["bench", "--out", results, "xla_flags", "--name", "xla_flags_probe"]
    argv += ["--variants", PROBE_VARIANTS, *sizes, "--profile"]
    argv += ["--budget", str(PROBE_LIMIT_S)]
    limit = SMOKE_LIMIT_S if args.smoke else PROBE_LIMIT_S
    return [Step("probe:xla_flags", "probe", argv, limit)]


def probe_choice(results: Path) -> dict | None:
    """``{"variant", "flags"}`` the probe chose (its record in ``results``),
    None when it wrote none or no variant ran."""
    try:
        payload = json.loads((results / "xla_flags_probe.json").read_text())
        found = payload["results"]
        best = found["best"]
        flags = None if best is None else found["variants"][best]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return None if best is None else {"variant": best, "flags": flags}


def with_xla_flags(env: dict, flags: str) -> dict:
    """``env`` with ``flags`` appended to its ``XLA_FLAGS``."""
    joined = f"{env.get('XLA_FLAGS', '')} {flags}".strip()
    return {**env, "XLA_FLAGS": joined} if joined else env


def fit_budget(argv: list[str], limit: float, margin: float = 40.0) -> list[str]:
    """``argv`` with its ``--budget S`` cut to ``limit - margin`` (at least
    10 s): a benchmark that stops starting work in time writes its record
    before the step's limit kills it."""
    if "--budget" not in argv:
        return argv
    i = argv.index("--budget") + 1
    budget = max(10.0, min(float(argv[i]), limit - margin))
    return [*argv[:i], f"{budget:.0f}", *argv[i + 1 :]]


def run_step(step: Step, limit: float, log: Path, env: dict) -> tuple[str, int, float]:
    """Run ``step`` for at most ``limit`` seconds: ``(status, rc, seconds)``.

    The step runs in its own session (process group), so a timeout kills
    every process it started (data workers, benchmark subprocesses).
    """
    cmd = step.command()
    start = time.perf_counter()
    with open(log, "w") as out:
        out.write(f"$ {' '.join(cmd)}\n# limit {limit:.0f} s\n")
        out.flush()
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=limit)
            status = "ok" if rc == 0 else "failed"
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            rc, status = proc.returncode, "timeout"
    return status, rc, time.perf_counter() - start


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the step's process group, then SIGKILL what is left after 5 s."""
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    """The last ``lines`` lines of ``path``, progress bars' carriage returns cut."""
    text = path.read_text(errors="replace") if path.is_file() else ""
    rows = [row.rsplit("\r", 1)[-1] for row in text.splitlines()]
    return [row[-300:] for row in rows if row.strip()][-lines:]


def _new_records(results: Path, before: dict[Path, int]) -> list[Path]:
    """The record JSONs (``name``, ``targets``) a step wrote (or rewrote) into
    ``results``; ``before``: each file's modification time before it."""
    out = []
    for path in sorted(results.glob("*.json")):
        if before.get(path) == path.stat().st_mtime_ns:
            continue
        try:
            payload = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(payload, dict) and "targets" in payload:
            out.append(path)
    return out


#: a benchmark row's status when its ``--budget`` ran out before it
BUDGET_CUT = "not run: budget"


def _cut_by_budget(record: Path) -> bool:
    """Whether a record's ``results.rows`` has a row its budget left unrun."""
    results = json.loads(record.read_text()).get("results")
    rows = results.get("rows", []) if isinstance(results, dict) else []
    return any(isinstance(r, dict) and r.get("status") == BUDGET_CUT for r in rows)


def _targets(record: Path) -> list[dict]:
    payload = json.loads(record.read_text())
    return [
        {k: t.get(k) for k in ("name", "value", "target", "met")}
        for t in payload.get("targets", [])
    ]


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="benchmarks/device_check.sh", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", default=None, help="where the five files go")
    parser.add_argument("--smoke", action="store_true", help="smoke presets, CPU")
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds for the whole check (default 540 on the GPU, none in smoke)",
    )
    parser.add_argument(
        "--bench-reserve",
        type=float,
        default=150.0,
        help="seconds of the budget kept for the benchmarks (default 150)",
    )
    parser.add_argument("--only", default="", help="comma-separated step names")
    parser.add_argument("--redo", action="store_true", help="rerun steps done earlier")
    parser.add_argument(
        "--previous",
        default=None,
        help="a summary.json whose ok steps are skipped (default: the committed "
        "benchmarks/results/gpu/summary.json; none in smoke)",
    )
    parser.add_argument(
        "--seeds5",
        default=None,
        metavar="EXPERIMENT",
        help="five seeds of EXPERIMENT's gpu preset with the controls",
    )
    parser.add_argument(
        "--xla-flags",
        default="auto",
        help="auto: probe XLA flag variants first and set the best for the "
        "later steps; none: XLA's defaults; anything else: these XLA flags "
        "(--xla-flags='--xla_a=1 --xla_b=2')",
    )
    parser.add_argument(
        "--work",
        default=None,
        help="keep the work folder (runs, logs, results) here, not in a "
        "temporary one: a second call on the still-warm machine with the same "
        "--work resumes the runs a limit stopped from their checkpoints",
    )
    args = parser.parse_args(argv)
    if args.budget is None and not args.smoke:
        args.budget = 540.0
    started = os.environ.get("AGENTRL_CHECK_STARTED")  # the wrapper's wheel install
    if args.budget is not None and started:
        args.budget -= max(0.0, time.time() - float(started))
    if args.seeds5:  # no benchmarks to keep time for
        args.bench_reserve = 0.0
    if args.previous is None and not args.smoke:
        args.previous = str(_default_out(args) / "summary.json")
    if args.out is None:
        args.out = str(_default_out(args))
    return args


def _default_out(args: argparse.Namespace) -> Path:
    """``benchmarks/results/gpu`` (``gpu_smoke``, ``gpu_seeds5_NAME``)."""
    name = "gpu_smoke" if args.smoke else "gpu"
    if args.seeds5:
        name += f"_seeds5_{args.seeds5}"
    return ROOT / "benchmarks" / "results" / name


def restore_runs(previous: str | None, work: Path) -> int:
    """Unpack the ``runs/`` files (each seed's results, the runs' small files)
    of the archive beside ``previous`` (or of the ledger's ``run-*/``
    archives, :mod:`device_ledger`) into ``work``: the seeds an earlier
    session finished are reused, not trained again. Returns how many."""
    if not previous:
        return 0
    folder = Path(previous).parent
    # beside the summary, or the ledger's checks (run-*/), later ones last
    archives = [folder / "archive.tar.gz", *sorted(folder.glob("run-*/archive.tar.gz"))]
    count = 0
    for archive in (a for a in archives if a.is_file()):
        with tarfile.open(archive) as tar:
            members = [
                m
                for m in tar.getmembers()
                if m.isfile() and m.name.startswith("runs/") and ".." not in m.name
            ]
            tar.extractall(work, members=members, filter="data")
        count += len(members)
    return count


def _previous(path: str | None) -> dict[str, dict]:
    """``{step name: entry}`` of the ``ok`` steps of an earlier summary."""
    if not path or not Path(path).is_file():
        return {}
    try:
        steps = json.loads(Path(path).read_text()).get("steps", [])
    except (OSError, ValueError):
        return {}
    return {s["name"]: s for s in steps if s.get("status") == "ok"}


def step_env(smoke: bool, work: Path) -> dict[str, str]:
    """The steps' environment: the checkout importable, output unbuffered."""
    env = dict(os.environ)
    paths = [str(ROOT), str(ROOT / "benchmarks")]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    env["MPLBACKEND"] = "Agg"
    # progress bars redraw every 10 s, not 10 times a second: short logs
    env["TQDM_MININTERVAL"] = "10"
    # steps that start JAX subprocesses (data_generation's RSS runs) must
    # find device memory: no process takes 75% of it up front
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    env["TMPDIR"] = str(work / "tmp")
    # one compile cache for all steps: a program compiled by one step (a seed,
    # a reproduction the benchmarks repeat) is read back by the next
    env["JAX_COMPILATION_CACHE_DIR"] = str(work / "jax_cache")
    if smoke:
        env["JAX_PLATFORMS"] = "cpu"
    return env


class Clock:
    """The budget: the whole check's deadline and the reproductions' earlier one."""

    def __init__(self, budget: float | None, bench_reserve: float, now=time.monotonic):
        self.now = now
        self.start = now()
        self.end = None if budget is None else self.start + budget - PACK_S
        self.repro_end = None if self.end is None else self.end - bench_reserve

    def left(self, kind: str) -> float:
        end = self.repro_end if kind in ("probe", "reproduce") else self.end
        return float("inf") if end is None else end - self.now()


def run_all(args: argparse.Namespace, work: Path, now=time.monotonic) -> list[dict]:
    """Run the planned steps; one summary entry per step (``now``: the clock)."""
    clock = Clock(args.budget, args.bench_reserve, now)
    for d in ("results", "logs", "runs", "tmp"):
        (work / d).mkdir(parents=True, exist_ok=True)
    env = step_env(args.smoke, work)
    if args.xla_flags not in ("auto", "none"):
        env = with_xla_flags(env, args.xla_flags)
    done = {} if args.redo else _previous(args.previous)
    if args.seeds5 and not args.redo:
        print(f"[device check] {restore_runs(args.previous, work)} run files restored")
    base_env, entries = env, []  # base_env: without the probe's choice
    for step in plan_steps(args, work):
        if step.kind != "probe" and step.name in done:
            entries.append({**done[step.name], "skipped_now": "ok in --previous"})
            print(f"[device check] {step.name}: done earlier, skipped", flush=True)
            continue
        limit = min(step.limit_s, clock.left(step.kind))
        step_env_now = base_env if step.name in OWN_XLA_FLAGS else env
        entry = {"name": step.name, "kind": step.kind, "argv": step.argv}
        entry["limit_s"] = round(limit, 1)
        entry["xla_flags"] = step_env_now.get("XLA_FLAGS", "")
        if limit < MIN_STEP_S:
            entries.append({**entry, "status": "skipped", "reason": "no time left"})
            print(f"[device check] {step.name}: no time left, skipped", flush=True)
            continue
        entries.append({**entry, **_run_one(step, limit, work, step_env_now)})
        if step.kind == "probe":
            entries[-1]["chosen"] = choice = probe_choice(work / "results")
            print(f"[device check] XLA flags chosen: {choice}", flush=True)
            if choice:
                env = with_xla_flags(env, choice["flags"])
    return entries


def _run_one(step: Step, limit: float, work: Path, env: dict) -> dict:
    """Run one step; what the summary records of it."""
    step = dataclasses.replace(step, argv=fit_budget(step.argv, limit))
    log = work / "logs" / f"{step.name.replace(':', '_')}.log"
    results = work / "results"
    before = {p: p.stat().st_mtime_ns for p in results.glob("*.json")}
    print(f"[device check] {step.name} (limit {limit:.0f} s)", flush=True)
    status, rc, seconds = run_step(step, limit, log, env)
    records = _new_records(results, before)
    if status == "ok" and any(_cut_by_budget(r) for r in records):
        status = "partial"  # not skipped by the next check, as "ok" would be
    print(f"[device check] {step.name}: {status} in {seconds:.0f} s", flush=True)
    return {
        "status": status,
        "rc": rc,
        "seconds": round(seconds, 1),
        "date": _now(),
        "log": f"logs/{log.name}",
        "records": [r.stem for r in records],
        "targets": [t for r in records for t in _targets(r)],
        "tail": _tail(log),
    }


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _device() -> dict[str, Any]:
    """The accelerator as ``nvidia-smi`` names it (none: the CPU)."""
    try:
        proc = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,memory.total,driver_version",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
        if proc.returncode == 0 and proc.stdout.strip():
            return {"gpu": proc.stdout.strip().splitlines()}
    except (OSError, subprocess.SubprocessError):
        pass
    return {"gpu": None, "cpu_count": os.cpu_count()}


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="agentrl-device-check-"))
    start = time.monotonic()
    entries = run_all(args, work)
    summary = {
        "mode": "smoke"
        if args.smoke
        else ("seeds5 " + args.seeds5 if args.seeds5 else "gpu"),
        "date": _now(),
        "device": _device(),
        "budget_s": args.budget,
        "seconds": round(time.monotonic() - start, 1),
        "python": sys.version.split()[0],
        "steps": entries,
    }
    paths = write_outputs(Path(args.out), work, summary)  # _device_report
    print((Path(args.out) / "summary.md").read_text(), flush=True)  # in the reply
    for path in paths:
        print(f"[device check] wrote {path} ({path.stat().st_size:,} bytes)")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    bad = [e["name"] for e in entries if e.get("status") in ("failed", "timeout")]
    if bad:
        print(f"[device check] not ok: {', '.join(bad)}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
