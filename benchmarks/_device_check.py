"""The device check's steps: reproductions and benchmarks, each with a time limit.

Run by ``benchmarks/device_check.sh`` (which installs the carried wheels
first; its header says how to start it on a GPU machine):

    python benchmarks/_device_check.py [--out DIR] [--smoke] [--budget S]
        [--only STEP,...] [--redo] [--seeds5 EXPERIMENT] [--xla-flags F]

Default mode: a preflight, then every experiment's ``gpu`` preset
reproduction for one seed (``agentrl reproduce NAME --preset gpu --seeds
1``), in :data:`REPRODUCTIONS` order (most valuable first), then the GPU
benchmarks of :data:`BENCHMARKS`, also by value. ``--seeds5 NAME``: five
seeds of ``NAME`` with the controls, one step per seed (``--first-seed s
--seeds 1``), then one step that only reports over all five (each seed's
results are reused from its run).

The preflight (:func:`preflight_step`, seconds) imports what the steps
import and asks JAX for its backend: not the GPU (on the CPU with
``--smoke``), or a module missing, and the check stops there, its reason in
the summary, exit status 3. The steps run with ``JAX_PLATFORMS=cuda,cpu``
(a CUDA start that fails is an error, not a run on the CPU) and
``AGENTRL_MALLOC=system`` (glibc's defaults, not ``agentrl.host_memory``'s
CPU tuning). Every step gets :data:`CUBLAS_FLAGS` in ``XLA_FLAGS`` (but
``bench:xla_flags``, which compares against XLA's defaults);
``--xla-flags auto`` probes variants first (:data:`PROBE_VARIANTS`).

Each step is a subprocess in its own process group with its own limit
(``timeout``): the step's own, cut to what is left of its phase (the
reproductions stop ``--bench-reserve`` seconds before the end, so the
benchmarks always get their share) and of the whole ``--budget``; a step
with under :data:`MIN_STEP_S` seconds left is skipped, not started, and so
is a reproduction whose expected time (:func:`expected_s`: its time in
``--previous``, else :data:`EXPECT_REPRO_S`) does not fit what is left of
its phase (``skipped``, "would not fit"): a reproduction killed at its limit
is lost whole, and the time goes to the steps that can finish. Steps
already ``ok`` in ``--previous`` (by default the committed ledger,
``benchmarks/results/gpu/summary.json``; ``gpu_seeds5_NAME/`` with
``--seeds5``), their records there, are skipped unless ``--redo``, so
successive sessions work down the list; a benchmark whose own ``--budget``
left rows unrun (``not run: budget``) is ``partial``, not ``ok``, and runs
again.

Writes into ``--out`` (default ``$TMPDIR/agentrl-device-check/gpu``, never
the ledger: ``benchmarks/device_ledger.py`` files the files there) exactly
five files: ``summary.json`` (every step: status, limit, expected and
taken seconds, return code, the targets its records hold, the log's last
lines; steps skipped as done earlier keep their earlier entry),
``summary.md`` (the steps and the targets as tables) — these two rewritten
after every step (``"complete": false`` until the end), so a check killed
before its end leaves them — and at the end ``reproductions.md`` and
``benchmarks.md`` (the markdown records the steps wrote) and
``archive.tar.gz`` (every step's log, every record, plot and per-seed
result, the runs' small files; no checkpoint or dataset).

``--smoke`` runs the same steps at the ``smoke`` presets and the benchmarks'
quick sizes on the CPU (``JAX_PLATFORMS=cpu``). tests/test_device_check.py
runs the script that way on one quick benchmark in ``make test`` and on
more steps in ``make test-long``.
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
from _device_report import write_outputs, write_summary  # noqa: E402

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

#: the committed GPU record whose shapes ``train_throughput`` keeps
TRAIN_THROUGHPUT_RECORD = "benchmarks/results/gpu/train_throughput_gpu.json"

#: ``(step, gpu arguments, smoke arguments, gpu limit s)`` by value; the
#: step ``bench:NAME`` runs ``agentrl bench NAME`` (or the benchmark
#: :data:`BENCH_PROGRAM` names). A benchmark killed at its limit writes
#: nothing: ``--budget`` makes train_throughput stop starting shapes in time
#: to write its record. 16 ``dpt_bandit`` gpu-preset members in one sweep
#: against one (34.7's target; never measured on a GPU) first, then training
#: FLOP utilisation at the gpu and full presets' shapes (34.8; its limit is
#: kept short so the later benchmarks get time, and it keeps the shapes the
#: committed record measured on this device kind, ``--skip-done``, so each
#: check goes on where the last one stopped), history generation
#: (34.3), vmapped sweeps at the smoke shapes, the model and the evaluation
#: loop, the XLA flag variants in full, and last the weight-gradient split
#: against the unsplit reference under ``cublas``
#: (``precision.SPLIT_MAX_CHUNKS=1``; the probe measured it until 2026-11-30).
BENCHMARKS = (
    ("sweep_members", [], ["--quick"], 120),
    (
        "train_throughput",
        ["--gpu", "--budget", "80", "--skip-done", TRAIN_THROUGHPUT_RECORD],
        ["--gpu", "--quick"],
        120,
    ),
    ("data_generation", ["--gpu", "--no-rss"], ["--quick", "--no-rss"], 120),
    ("sweep_vmap", [], ["--repeats", "1", "--widths", "8"], 120),
    ("model_throughput", ["--full"], [], 90),
    ("eval_throughput", [], ["--repeats", "1"], 90),
    # every flag variant, XLA's defaults included, at dpt_bandit's and
    # ad_darkroom's gpu shapes: the cublas choice checked against the default
    # (this step runs without the check's XLA flags)
    ("xla_flags", ["--budget", "260"], ["--quick", "--variants", "default"], 300),
    (
        "xla_flags_split",
        ["--name", "xla_flags_split", "--variants", "cublas", "--calls", "5"]
        + ["--cases", "dpt_bandit:gpu,dpt_bandit:gpu:precision.SPLIT_MAX_CHUNKS=1"]
        + ["--profile", "--budget", "100"],
        ["--name", "xla_flags_split", "--quick", "--variants", "default"],
        140,
    ),
)
#: the benchmark a step of :data:`BENCHMARKS` runs when not its own name
BENCH_PROGRAM = {"xla_flags_split": "xla_flags"}

#: the XLA flags every step gets by default (``--xla-flags cublas``): matmuls
#: on cuBLAS, no autotuning (``benchmarks/xla_flags.py``'s ``cublas``
#: variant; tests/test_device_check.py keeps the two equal). The evidence
#: (one H200, 2026-11-28, ``benchmarks/results/gpu/``): XLA's defaults spent
#: 90 s compiling dpt_bandit's call and 75 s one width-512 update, most of it
#: autotuning, for updates of 2.5 ms and 23 ms; autotuning off
#: (``fast_compile``) compiled in 14 s and ran 5.0 ms and ~185 ms; cuBLAS
#: without autotuning (``cublas``) 9-10 s and 7.7 ms and 30 ms; the update
#: loop as one CUDA graph changed nothing (the device was busy 78-95% of the
#: update: not launch-bound). The traces put most of that time in float32
#: GEMMs: every backward matmul of the bfloat16 models, fixed since
#: (``agentrl.models.precision.mixed_dot_general``). After the fix
#: (2026-11-28, fourth check) ``cublas`` ran dpt_bandit's update in 3.1 ms
#: and ad_darkroom's in 17.7 ms, ``fast_compile`` 4.2 ms and past its limit
#: at width 512. The probe that chose it cost 100-165 s of each check; it
#: runs now only with ``--xla-flags auto`` (after a jax upgrade, say).
CUBLAS_FLAGS = (
    "--xla_gpu_enable_triton_gemm=false "
    "--xla_gpu_autotune_level=0 "
    "--xla_gpu_experimental_enable_fusion_autotuner=false"
)
#: ``--xla-flags auto``: a probe runs first, the training calls of
#: ``dpt_bandit``'s and ``ad_darkroom``'s gpu presets (width 32 and 512)
#: under these XLA flag variants (``benchmarks/xla_flags.py --profile``);
#: the one with the least compile + the presets' updates is set in
#: ``XLA_FLAGS`` for every later step; when it chooses none (every variant
#: failed, or it was killed), :data:`CUBLAS_FLAGS`, not XLA's defaults.
PROBE_VARIANTS = "cublas,fast_compile"
PROBE_CASES = "dpt_bandit:gpu,ad_darkroom:gpu"
PROBE_LIMIT_S = 200

#: steps that set XLA's flags themselves: they run without the check's
#: (the full comparison's "default" variant must be XLA's defaults)
OWN_XLA_FLAGS = frozenset({"bench:xla_flags"})

#: the limit of one reproduction on the GPU (seconds); the smoke presets' own
REPRO_LIMIT_S = 240
SMOKE_LIMIT_S = 900  # a guard: a smoke reproduction took 5+ min at load 15
#: a step is not started with less than this left of its phase
MIN_STEP_S = 20
#: a reproduction's expected seconds when the ledger holds no time for it
#: (dpt_bandit's gpu preset with its controls took 160 s and ad_darkroom's
#: 134 s + 78 s resumed on one H200, 2026-11-28, cublas flags); a
#: reproduction starts only when its expectation fits what is left of its
#: phase (:func:`expected_s`): one killed at its limit is lost whole
EXPECT_REPRO_S = 180.0
#: the same for one seed of ``--seeds5`` (the controls train again) and its
#: report (every seed's results reused)
EXPECT_SEED_S = 300.0
EXPECT_REPORT_S = 60.0
#: the preflight's limit: imports and JAX's backend
PREFLIGHT_LIMIT_S = 120
#: seconds kept at the end for writing the five files
PACK_S = 15
#: lines of a step's log kept in summary.json
TAIL_LINES = 15


@dataclasses.dataclass
class Step:
    """One subprocess of the check: ``argv`` after ``python -m agentrl.cli``."""

    name: str
    kind: str  # "preflight", "probe", "reproduce" or "bench"
    argv: list[str]
    limit_s: float
    #: the program ``argv`` goes to (tests run others)
    program: tuple[str, ...] = (sys.executable, "-m", "agentrl.cli")
    #: the seconds it is expected to take when the ledger holds none (None:
    #: not checked, only :data:`MIN_STEP_S`)
    expect_s: float | None = None

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
                expect_s=EXPECT_SEED_S,
            )
            for s in range(5)
        ]
        report = ["reproduce", name, *common, "--controls", "--seeds", "5"]
        steps.append(
            Step(
                f"reproduce:{name}:report",
                "reproduce",
                report,
                120,
                expect_s=EXPECT_REPORT_S,
            )
        )
        return [preflight_step(args), *steps]
    steps = [
        Step(
            f"reproduce:{n}",
            "reproduce",
            ["reproduce", n, *common]
            + (["--controls"] if n in WITH_CONTROLS else [])
            + ["--seeds", "1"],
            limit,
            expect_s=EXPECT_REPRO_S,
        )
        for n in reproduction_order(preset)
    ]
    for name, gpu_args, smoke_args, gpu_limit in BENCHMARKS:
        bench_args = smoke_args if args.smoke else gpu_args
        program = BENCH_PROGRAM.get(name, name)
        steps.append(
            Step(
                f"bench:{name}",
                "bench",
                ["bench", "--out", results, program, *bench_args],
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
    return [preflight_step(args), *probe_steps(args, results), *steps]


#: what the steps import, by module, checked before any step runs: the
#: command line (``agentrl.cli``, tyro through ``agentrl.cliargs``), the
#: dataset format and loaders (tensorflow_datasets, array_record, grain),
#: the environments (gymnax), the logger (tensorboardX)
PREFLIGHT_REQUIRED = (
    "agentrl.cli",
    "agentrl.cliargs",
    "tyro",
    "tensorflow_datasets",
    "array_record.python.array_record_module",
    "grain",
    "gymnax",
    "tensorboardX",
)
#: what only some steps import: the MuJoCo families (agentrl[mujoco]) and
#: XLand (xminigrid); one missing is reported, not fatal (those steps fail)
PREFLIGHT_OPTIONAL = ("brax", "mujoco.mjx", "xminigrid")
#: the preflight's program (``python -c``; argv: the backend JAX must be on,
#: then the modules): one JSON line, exit status 3 when not ready
PREFLIGHT_CODE = """\
import importlib, json, sys, traceback
want, required, optional = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
report = {"want": want, "missing": {}, "optional_missing": {}}
for names, key in ((required, "missing"), (optional, "optional_missing")):
    for name in filter(None, names):
        try:
            importlib.import_module(name)
        except Exception as error:  # an import that fails, whatever its error
            report[key][name] = f"{type(error).__name__}: {error}"[:300]
try:
    import jax
    import jax.numpy as jnp

    report["backend"] = jax.default_backend()
    report["devices"] = [str(d) for d in jax.devices()]
    report["sum"] = float(jnp.arange(8.0).sum().block_until_ready())
except Exception as error:
    report["backend"] = None
    report["jax_error"] = traceback.format_exc()[-1500:]
report["ok"] = report["backend"] == want and not report["missing"]
print("PREFLIGHT " + json.dumps(report), flush=True)
if not report["ok"]:
    print(f"[preflight] not ready: JAX on {report['backend']!r}, not {want!r}; "
          f"missing: {sorted(report['missing'])}", file=sys.stderr)
sys.exit(0 if report["ok"] else 3)
"""


def preflight_step(args: argparse.Namespace) -> Step:
    """The first step: every module the steps import, and JAX on the GPU
    (on the CPU with ``--smoke``), so a machine that is not ready fails in
    seconds rather than running every step on the CPU."""
    argv = ["-c", PREFLIGHT_CODE, "cpu" if args.smoke else "gpu"]
    argv += [",".join(PREFLIGHT_REQUIRED), ",".join(PREFLIGHT_OPTIONAL)]
    return Step("preflight", "preflight", argv, PREFLIGHT_LIMIT_S, (sys.executable,))


def preflight_report(log: Path) -> dict | None:
    """The preflight's JSON line in its log (None: it printed none)."""
    text = log.read_text(errors="replace") if log.is_file() else ""
    for line in reversed(text.splitlines()):
        if line.startswith("PREFLIGHT "):
            try:
                return json.loads(line[len("PREFLIGHT ") :])
            except ValueError:
                return None
    return None


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
        shown = " ".join(cmd).replace("\n", "\\n")  # one line (the preflight's)
        out.write(f"$ {shown}\n# limit {limit:.0f} s\n")
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
    parser.add_argument(
        "--out",
        default=None,
        help="where the five files go (default: a folder under the temporary "
        "directory, never the ledger; device_ledger.py files them)",
    )
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
        help="seconds of the budget kept for the benchmarks (default 150; none "
        "when no benchmark is planned)",
    )
    parser.add_argument("--only", default="", help="comma-separated step names")
    parser.add_argument("--redo", action="store_true", help="rerun steps done earlier")
    parser.add_argument(
        "--previous",
        default=None,
        help="a summary.json whose ok steps are skipped and whose times say "
        "which reproductions fit (default: the committed ledger, "
        "benchmarks/results/gpu/summary.json, or gpu_seeds5_NAME/ with "
        "--seeds5; none in smoke)",
    )
    parser.add_argument(
        "--seeds5",
        default=None,
        metavar="EXPERIMENT",
        help="five seeds of EXPERIMENT's gpu preset with the controls",
    )
    parser.add_argument(
        "--xla-flags",
        default="cublas",
        help="cublas (the default): matmuls on cuBLAS, no autotuning "
        "(CUBLAS_FLAGS); auto: probe XLA flag variants first and set the best "
        "for the later steps; none: XLA's defaults; anything else: these XLA "
        "flags (--xla-flags='--xla_a=1 --xla_b=2')",
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
        args.previous = str(ledger_dir(args.seeds5) / "summary.json")
    if args.out is None:
        args.out = str(_default_out(args))
    return args


def ledger_dir(seeds5: str | None = None, root: Path = ROOT) -> Path:
    """The ledger of a mode: ``benchmarks/results/gpu`` (``gpu_seeds5_NAME``);
    ``device_ledger.py`` files a check's steps there by its summary's mode."""
    name = f"gpu_seeds5_{seeds5}" if seeds5 else "gpu"
    return root / "benchmarks" / "results" / name


def _default_out(args: argparse.Namespace) -> Path:
    """``$TMPDIR/agentrl-device-check/gpu`` (``gpu_smoke``, ``gpu_seeds5_NAME``):
    not the ledger, whose summary the check reads."""
    name = "gpu_smoke" if args.smoke else "gpu"
    if args.seeds5:
        name += f"_seeds5_{args.seeds5}"
    return Path(tempfile.gettempdir()) / "agentrl-device-check" / name


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


def _previous_steps(path: str | None) -> dict[str, dict]:
    """``{step name: entry}`` of every step of an earlier summary."""
    if not path or not Path(path).is_file():
        return {}
    try:
        steps = json.loads(Path(path).read_text()).get("steps", [])
    except (OSError, ValueError, AttributeError):
        return {}
    return {s["name"]: s for s in steps if isinstance(s, dict) and "name" in s}


def _previous(path: str | None) -> dict[str, dict]:
    """``{step name: entry}`` of the steps done in an earlier summary: ``ok``,
    and each record it names found beside the summary (the ledger's records,
    ``NAME.json``) or one folder up (the reproductions', ``repro_*.json``
    in ``benchmarks/results/``). A step whose records did not come back, or
    that names none, runs again."""
    if not path:
        return {}
    folders = (Path(path).parent, Path(path).parent.parent)
    return {
        name: s
        for name, s in _previous_steps(path).items()
        if s.get("status") == "ok"
        and s.get("records")
        and all(any((f / f"{r}.json").is_file() for f in folders) for r in s["records"])
    }


def expected_s(step: Step, earlier: dict | None) -> float | None:
    """The seconds ``step`` is expected to take: an earlier ``ok`` or
    ``partial`` entry's seconds (10% more); after a timeout, a quarter more
    than it ran (a lower bound), at least the step's default; else its
    default, :attr:`Step.expect_s` (None: not checked). The step's limit is
    raised to its expectation where that is above it (:func:`run_all`)."""
    if step.expect_s is None:
        return None
    if not earlier or earlier.get("seconds") is None:
        return step.expect_s
    seconds = float(earlier["seconds"])
    if earlier.get("status") in ("ok", "partial"):
        return round(1.1 * seconds, 1)
    if earlier.get("status") == "timeout":
        limit = float(earlier.get("limit_s") or 0.0)
        return round(max(1.25 * max(seconds, limit), step.expect_s), 1)
    return step.expect_s  # a failure's seconds say nothing of a whole run


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
    else:
        # the GPU or an error: a CUDA start that fails must not fall back to
        # running every step on the CPU
        env["JAX_PLATFORMS"] = "cuda,cpu"
        # glibc's defaults: agentrl.host_memory's tuning (one malloc arena,
        # no mmap) was measured for XLA on a 2-core CPU, not for a GPU
        # machine's 16 cores and its loaders' threads
        env["AGENTRL_MALLOC"] = "system"
    return env


class Clock:
    """The budget: the whole check's deadline and the reproductions' earlier one."""

    def __init__(self, budget: float | None, bench_reserve: float, now=time.monotonic):
        self.now = now
        self.start = now()
        self.end = None if budget is None else self.start + budget - PACK_S
        self.repro_end = None if self.end is None else self.end - bench_reserve

    def left(self, kind: str) -> float:
        early = kind in ("probe", "reproduce")
        end = self.repro_end if early else self.end
        return float("inf") if end is None else end - self.now()


def base_xla_flags(value: str) -> str | None:
    """The XLA flags ``--xla-flags VALUE`` gives every step (None: ``auto``,
    the probe's choice)."""
    if value == "auto":
        return None
    return {"none": "", "cublas": CUBLAS_FLAGS}.get(value, value)


def run_all(
    args: argparse.Namespace, work: Path, now=time.monotonic, report=None
) -> list[dict]:
    """Run the planned steps; one summary entry per step (``now``: the clock;
    ``report``: called with the entries so far after each step)."""
    for d in ("results", "logs", "runs", "tmp"):
        (work / d).mkdir(parents=True, exist_ok=True)
    try:
        steps = plan_steps(args, work)
    except SystemExit as error:  # the experiments could not be listed
        entries = [{"name": "plan", "kind": "preflight", "status": "failed"}]
        entries[0]["reason"] = f"no plan: {error}"
        if report is not None:
            report(entries)
        return entries
    # nothing to keep time for when no benchmark is planned (a resume call
    # with --only reproduce:NAME gets the whole budget)
    benches = any(step.kind == "bench" for step in steps)
    clock = Clock(args.budget, args.bench_reserve if benches else 0.0, now)
    base_env = step_env(args.smoke, work)  # XLA's defaults (bench:xla_flags)
    flags = base_xla_flags(args.xla_flags)
    env = with_xla_flags(base_env, flags or "")
    earlier = _previous_steps(args.previous)  # times, with --redo too
    done = {} if args.redo else _previous(args.previous)
    if args.seeds5 and not args.redo:
        print(f"[device check] {restore_runs(args.previous, work)} run files restored")
    entries: list[dict] = []

    def add(entry: dict) -> None:
        entries.append(entry)
        if report is not None:
            report(entries)

    for step in steps:
        if step.kind not in ("probe", "preflight") and step.name in done:
            add({**done[step.name], "skipped_now": "ok in --previous"})
            print(f"[device check] {step.name}: done earlier, skipped", flush=True)
            continue
        left = clock.left(step.kind)
        expect = expected_s(step, earlier.get(step.name))
        # a step expected to outlast its own limit gets its expectation
        limit = min(max(step.limit_s, expect or 0.0), left)
        step_env_now = base_env if step.name in OWN_XLA_FLAGS else env
        entry = {"name": step.name, "kind": step.kind, "argv": step.argv}
        entry["limit_s"] = round(limit, 1)
        entry["xla_flags"] = step_env_now.get("XLA_FLAGS", "")
        if expect is not None:
            entry["expected_s"] = expect
        if limit < MIN_STEP_S:
            add({**entry, "status": "skipped", "reason": "no time left"})
            print(f"[device check] {step.name}: no time left, skipped", flush=True)
            continue
        if (
            args.seeds5
            and step.name.endswith(":report")
            and not _seeds_done(entries, args.seeds5)
        ):  # it would train the missing seeds itself, past its limit
            add({**entry, "status": "skipped", "reason": "seeds not all done"})
            print(f"[device check] {step.name}: seeds not all done, skipped")
            continue
        if expect is not None and expect > left:
            reason = f"would not fit: expected {expect:.0f} s, {left:.0f} s left"
            add({**entry, "status": "skipped", "reason": reason})
            print(f"[device check] {step.name}: {reason}, skipped", flush=True)
            continue
        add({**entry, **_run_one(step, limit, work, step_env_now)})
        if step.kind == "preflight":
            entries[-1]["preflight"] = found = preflight_report(
                work / "logs" / "preflight.log"
            )
            if entries[-1]["status"] in ("failed", "timeout"):
                entries[-1]["reason"] = _preflight_reason(found)
                print(f"[device check] stopped: {entries[-1]['reason']}", flush=True)
                if report is not None:
                    report(entries)
                break
            if found and found.get("optional_missing"):
                missing = ", ".join(sorted(found["optional_missing"]))
                print(f"[device check] warning: cannot import {missing}", flush=True)
        if step.kind == "probe":
            entries[-1]["chosen"] = choice = probe_choice(work / "results")
            print(f"[device check] XLA flags chosen: {choice}", flush=True)
            if choice is None:  # killed, or no variant ran: cublas, not XLA's
                entries[-1]["fallback"] = "cublas"
            env = with_xla_flags(base_env, choice["flags"] if choice else CUBLAS_FLAGS)
        if report is not None:
            report(entries)
    return entries


def _seeds_done(entries: list[dict], name: str) -> bool:
    """Whether every ``--seeds5`` seed step of ``name`` is ``ok`` (run now,
    or ok in ``--previous``) among ``entries``."""
    seeds = [e for e in entries if e["name"].startswith(f"reproduce:{name}:seed")]
    return len(seeds) == 5 and all(e.get("status") == "ok" for e in seeds)


def _preflight_reason(found: dict | None) -> str:
    """Why the preflight failed, in one line for the summary."""
    if not found:
        return "preflight failed (no report: see its log's last lines)"
    parts = []
    if found.get("backend") and found.get("backend") != found.get("want"):
        parts.append(f"JAX runs on {found['backend']!r}, not {found.get('want')!r}")
    if found.get("jax_error"):
        last = found["jax_error"].strip().splitlines()[-1]
        parts.append(f"JAX did not start: {last}")
    if found.get("missing"):
        parts.append("cannot import " + ", ".join(sorted(found["missing"])))
    return "preflight failed: " + ("; ".join(parts) or "see its log")


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
    out = Path(args.out)
    start = time.monotonic()
    head = {
        "mode": "smoke"
        if args.smoke
        else ("seeds5 " + args.seeds5 if args.seeds5 else "gpu"),
        "device": _device(),
        "budget_s": args.budget,
        "python": sys.version.split()[0],
        "wheels": os.environ.get("AGENTRL_CHECK_WHEELS", "not through the script"),
    }

    def summary(entries: list[dict], complete: bool) -> dict:
        return {
            "mode": head["mode"],
            "date": _now(),
            "device": head["device"],
            "budget_s": args.budget,
            "seconds": round(time.monotonic() - start, 1),
            "python": head["python"],
            "wheels": head["wheels"],
            # False: the check was still running (killed before its end, it
            # left only this summary: no archive, no records)
            "complete": complete,
            "steps": entries,
        }

    def report(entries: list[dict]) -> None:  # after every step: cheap
        write_summary(out, summary(entries, complete=False))

    entries = run_all(args, work, report=report)
    paths = write_outputs(out, work, summary(entries, complete=True))  # _device_report
    print((out / "summary.md").read_text(), flush=True)  # in the reply
    for path in paths:
        print(f"[device check] wrote {path} ({path.stat().st_size:,} bytes)")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    last = entries[-1] if entries else {}
    if last.get("kind") == "preflight" and last.get("status") in ("failed", "timeout"):
        print(f"[device check] {last.get('reason')}", flush=True)
        return 3
    bad = [e["name"] for e in entries if e.get("status") in ("failed", "timeout")]
    if bad:
        print(f"[device check] not ok: {', '.join(bad)}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
