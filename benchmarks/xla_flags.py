"""Compile time and update time of the training call under XLA flag variants.

Run: ``agentrl bench xla_flags [--cases NAME:PRESET[:FIELD=VALUE...],...]
[--variants V,...] [--budget S] [--calls N] [--tasks N] [--profile] [--quick]``

A case may set config fields after its preset, to compare model choices
under the same flags: ``dpt_bandit:gpu:model.attention_block=512`` (one
query block over its 501 tokens, a quarter of the attention's kernels), or
the weight-gradient split's limits (:mod:`agentrl.models.precision`):
``dpt_bandit:gpu:precision.SPLIT_MAX_CHUNKS=1`` is the unsplit reference.

Why (issue 34, the first GPU run, one H200, 2026-11-28): compiling
``dpt_bandit``'s gpu-preset training call (``fit``'s ``lax.fori_loop`` of
100 updates) took 90 s, and one update of ``ad_darkroom``'s width-512 step
75 s, against 17 s for ``dt_darkroom``'s step of the same shapes compiled
just after it in the same process: the time goes to what XLA:GPU caches per
kernel shape within a process, its autotuning of GEMMs and fusions. The
update itself ran at ~2.5 ms (~400 updates/s) for a model whose arithmetic
takes a few microseconds at the device's peak: launch- and loop-bound.

Each variant of :data:`VARIANTS` (XLA flags) runs in its own subprocess
(flags are read once per process; an unknown flag aborts only that
subprocess, recorded as failed), with no persistent compilation cache (a
cached program would hide the compile). Per case (an experiment's preset):
the preset's histories at ``--tasks`` tasks (the call's shapes do not
depend on the count), its model, and ``fit``'s training call at the
platform's updates per call ``K`` (:func:`agentrl.train.config.
steps_per_call`), each update drawing its batch on the device. Timed: the
call's ``lower().compile()`` (``compile_s``), then ``--calls`` calls after
one untimed call (``s_per_update``); the optimized HLO's kernel counts
(fusions, library calls, while loops, command-buffer regions) are recorded
and its text kept gzipped beside the record. That count does not see
every CUDA graph: on the H200 (2026-11-28) ``command_buffers`` read 0 for
``fast_compile_graph_while`` while its trace saw 6 kernel events per update
instead of 631 (the graphs ran, formed where the HLO text does not show
them), and the profiler does not see the kernels inside a graph, so such a
variant's device busy time reads near 0: its wall time is the measure. Each
variant's estimate for the preset, ``compile_s + train.steps x
s_per_update``, ranks them;
:func:`choose` names the best variant measured in every case that the
default was measured in too (or, without the default, in every case).

Variants run in :data:`VARIANTS` order, the default last (the slowest to
compile), each case's variants before the next case, until ``--budget``
seconds are spent: a subprocess is killed at what is left.

Writes ``xla_flags.{json,md}`` (``--name``: another record name; the
device check's probe writes ``xla_flags_probe``); ``--profile``: two more
calls per variant under the profiler (:mod:`gpu_trace`: kernels, device
busy time and wall time per update, the costliest kernels); ``--quick``:
``dpt_bandit`` smoke, two calls, on the CPU (the GPU flags are parsed, and
do nothing there).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common as bench

#: name -> XLA flags (added to ``XLA_FLAGS``), in the order they run
VARIANTS = {
    # matmuls on cuBLAS (heuristic algorithms), not Triton, and no autotuning:
    # the second GPU run (2026-11-28) traced fast_compile's update of
    # dpt_bandit's gpu preset: the device busy 78% of 5.0 ms, half of it in
    # Triton gemm fusions on Dh = 32 operands at 20-40 us each (a tenth of
    # their memory bound) under untuned tilings; with autotuning the update
    # took 2.5 ms but compiling it 90 s
    "cublas": (
        "--xla_gpu_enable_triton_gemm=false "
        "--xla_gpu_autotune_level=0 "
        "--xla_gpu_experimental_enable_fusion_autotuner=false"
    ),
    # no GEMM autotuning and no fusion-emitter autotuning: the compile-time
    # suspects
    "fast_compile": (
        "--xla_gpu_autotune_level=0 "
        "--xla_gpu_experimental_enable_fusion_autotuner=false"
    ),
    # the same, and the whole update loop as one CUDA graph (while loops in
    # command buffers, conditional nodes): the launch-bound update's suspect
    "fast_compile_graph_while": (
        "--xla_gpu_autotune_level=0 "
        "--xla_gpu_experimental_enable_fusion_autotuner=false "
        "--xla_gpu_enable_command_buffer="
        "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,CONDITIONAL,WHILE"
    ),
    "no_gemm_autotune": "--xla_gpu_autotune_level=0",
    "no_fusion_autotuner": "--xla_gpu_experimental_enable_fusion_autotuner=false",
    "default": "",
}
DEFAULT_CASES = "dpt_bandit:gpu,ad_darkroom:gpu"
#: the optimized module of the training call (``jax.jit`` of ``call``)
MODULE_RE = r"jit_call"
#: the HLO of a variant kept beside the record up to this many gzipped bytes
HLO_KEEP_BYTES = 1 << 20


def run_child(
    case: str, tasks: int, calls: int, dump: Path, profile: bool = False
) -> dict:
    """Measure one case in this process (its flags already set); with
    ``profile``, two more calls traced (:mod:`gpu_trace`)."""
    import jax
    import numpy as np
    from host_bound import setup

    from agentrl.train import parallel
    from agentrl.train.batches import make_batches
    from agentrl.train.config import steps_per_call
    from agentrl.train.step import make_train_call

    experiment, preset, overrides = parse_case(case, tasks)
    _set_precision_limits(overrides)
    with tempfile.TemporaryDirectory() as tmp:
        s = setup(experiment, preset, overrides, Path(tmp))
    config, mesh = s["config"], s["mesh"]
    k = steps_per_call(config.train, jax.default_backend())
    batches = make_batches(s["sampler"], mesh)
    call = make_train_call(s["step"], batches.draw, parallel.data_sharding(mesh))
    call = jax.jit(call, donate_argnums=0)
    state, hp = s["state"], s["hparams"]

    def args(c: int):
        return (state, hp, batches.call_data(c * k, k), np.int32(c * k), np.int32(k))

    start = time.perf_counter()
    compiled = call.lower(*args(0)).compile()
    compile_s = time.perf_counter() - start
    state = jax.block_until_ready(compiled(*args(0)))[0]
    start = time.perf_counter()
    for c in range(1, calls + 1):
        state = compiled(*args(c))[0]
    jax.block_until_ready(state)
    seconds = time.perf_counter() - start
    traced = {}
    if profile:
        from gpu_trace import profile_calls

        def two_calls():
            nonlocal state
            for c in range(calls + 1, calls + 3):
                state = compiled(*args(c))[0]
            jax.block_until_ready(state)

        traced = {"profile": profile_calls(two_calls, 2 * k, dump / "trace")}
    return {
        "case": case,
        "backend": jax.default_backend(),
        "steps_per_call": k,
        "train_steps": config.train.steps,
        "compile_s": compile_s,
        "s_per_update": seconds / (calls * k),
        "hlo": hlo_counts(dump),
        **traced,
    }


def parse_case(case: str, tasks: int) -> tuple[str, str, dict]:
    """``"NAME:PRESET[:FIELD=VALUE]..."`` -> ``(NAME, PRESET, overrides)``:
    the preset at ``tasks`` histories, with config fields set (e.g.
    ``dpt_bandit:gpu:model.attention_block=512``, one query block)."""
    experiment, preset, *sets = case.split(":")
    overrides: dict = {"data.num_tasks": tasks}
    for item in sets:
        field, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"case {case!r}: {item!r} is not FIELD=VALUE")
        overrides[field] = value
    return experiment, preset, overrides


def _set_precision_limits(overrides: dict) -> None:
    """Move the case's ``precision.NAME=VALUE`` items out of ``overrides``
    into :mod:`agentrl.models.precision`'s module constants, in this child
    process: ``precision.SPLIT_MAX_CHUNKS=1`` measures the unsplit weight
    gradients against the split ones under the same flags."""
    from agentrl.models import precision

    for field in [f for f in overrides if f.startswith("precision.")]:
        name = field.removeprefix("precision.")
        if not name.startswith("SPLIT_") or not hasattr(precision, name):
            raise ValueError(f"case field {field!r}: not a precision.SPLIT_* limit")
        setattr(precision, name, int(overrides.pop(field)))


def hlo_counts(dump: Path) -> dict:
    """Kernel counts of the optimized training call in an XLA dump folder."""
    texts = sorted(dump.glob(f"*{MODULE_RE}*after_optimizations.txt"))
    if not texts:
        return {}
    text = texts[-1].read_text(errors="replace")
    return {
        "fusions": len(re.findall(r" fusion\(", text)),
        "custom_calls": len(re.findall(r" custom-call\(", text)),
        "whiles": len(re.findall(r" while\(", text)),
        "command_buffers": len(re.findall(r"command_buffer", text)),
        "lines": text.count("\n"),
        "file": texts[-1].name,
    }


def measure_variant(
    name: str, case: str, args: argparse.Namespace, limit: float, keep: Path
) -> dict:
    """One variant of one case in a subprocess, killed after ``limit`` s."""
    with tempfile.TemporaryDirectory() as dump:
        env = dict(os.environ)
        env.pop("JAX_COMPILATION_CACHE_DIR", None)  # the compile is measured
        flags = f"{VARIANTS[name]} --xla_dump_to={dump} "
        flags += f"--xla_dump_hlo_module_re={MODULE_RE}"
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flags}".strip()
        here = Path(__file__).resolve().parent
        env["PYTHONPATH"] = os.pathsep.join([str(here), env.get("PYTHONPATH", "")])
        cmd = [sys.executable, __file__, "--child", case, "--dump", dump]
        cmd += ["--tasks", str(args.tasks), "--calls", str(args.calls)]
        cmd += ["--profile"] if args.profile else []
        entry = {"variant": name, "case": case, "flags": VARIANTS[name]}
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd, env=env, capture_output=True, text=True, timeout=limit
            )
        except subprocess.TimeoutExpired:
            return {**entry, "status": "timeout", "seconds": limit}
        entry["seconds"] = time.perf_counter() - start
        if proc.returncode:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-6:]
            return {**entry, "status": "failed", "error": tail}
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        case_name = re.sub(r"[^A-Za-z0-9_.-]", "_", case)
        stem = keep / f"{args.name}_hlo_{name}_{case_name}"
        _keep_hlo(Path(dump), result.get("hlo", {}), stem)
        return {**entry, "status": "ok", **result}


def _keep_hlo(dump: Path, counts: dict, stem: Path) -> None:
    """The optimized HLO text, gzipped, beside the record (if small enough)."""
    if not counts.get("file"):
        return
    data = gzip.compress((dump / counts["file"]).read_bytes())
    if len(data) <= HLO_KEEP_BYTES:
        stem.with_name(f"{stem.name}.txt.gz").write_bytes(data)


def estimate_s(row: dict) -> float:
    """The preset's compile plus its training updates at this variant's rate."""
    return row["compile_s"] + row["train_steps"] * row["s_per_update"]


def choose(rows: list[dict]) -> str | None:
    """The variant with the least summed estimate over the cases it must
    cover: every case the default was measured in (every measured case if
    the default never was); None if no variant covers them."""
    ok = [r for r in rows if r.get("status") == "ok"]
    default_cases = {r["case"] for r in ok if r["variant"] == "default"}
    cases = default_cases or {r["case"] for r in ok}
    totals: dict[str, float] = {}
    for name in VARIANTS:
        mine = {r["case"]: estimate_s(r) for r in ok if r["variant"] == name}
        if cases and cases <= set(mine):
            totals[name] = sum(mine[c] for c in cases)
    return min(totals, key=totals.get) if totals else None


def _table(rows: list[dict]) -> list[dict]:
    out = []
    for r in rows:
        ok = r.get("status") == "ok"
        out.append(
            {
                "case": r["case"],
                "variant": r["variant"],
                "status": r["status"],
                "compile_s": f"{r['compile_s']:.1f}" if ok else "",
                "ms_per_update": f"{1e3 * r['s_per_update']:.3f}" if ok else "",
                "estimate_s": f"{estimate_s(r):.0f}" if ok else "",
                "fusions": r.get("hlo", {}).get("fusions", "") if ok else "",
                "command_buffers": r.get("hlo", {}).get("command_buffers", "")
                if ok
                else "",
                **_profile_columns(r.get("profile") if ok else None),
            }
        )
    return out


def _profile_columns(profile: dict | None) -> dict:
    """The trace's per-update kernels and device time (``--profile``)."""
    keys = ("kernels_per_update", "device_busy_us_per_update", "wall_us_per_update")
    if not profile or "busy_us_per_update" not in profile:
        return dict.fromkeys(keys, "")
    return {
        "kernels_per_update": f"{profile['events_per_update']:.0f}",
        "device_busy_us_per_update": f"{profile['busy_us_per_update']:.0f}",
        "wall_us_per_update": f"{profile['wall_us_per_update']:.0f}",
    }


def _targets(rows: list[dict]) -> list[dict]:
    """Compile-time ratio of each variant to the default, per case (<= 1)."""
    ok = {(r["case"], r["variant"]): r for r in rows if r.get("status") == "ok"}
    out = []
    for (case, name), r in ok.items():
        base = ok.get((case, "default"))
        if name == "default" or base is None:
            continue
        out.append(
            bench.target(
                f"{case} {name}: compile time / default's",
                r["compile_s"] / base["compile_s"],
                1.0,
                higher_is_better=False,
            )
        )
    return out


def run_all(args: argparse.Namespace, keep: Path) -> list[dict]:
    deadline = time.monotonic() + args.budget
    rows = []
    for case in args.cases.split(","):
        for name in args.variants.split(","):
            left = deadline - time.monotonic()
            if left < 15:
                rows.append(
                    {"variant": name, "case": case, "status": "not run: budget"}
                )
                continue
            rows.append(measure_variant(name, case, args, left, keep))
            print(json.dumps(rows[-1])[:400], flush=True)
    return rows


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=DEFAULT_CASES)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--budget", type=float, default=400.0)
    parser.add_argument("--calls", type=int, default=10, help="timed calls")
    parser.add_argument("--tasks", type=int, default=2000, help="histories")
    parser.add_argument("--quick", action="store_true", help="smoke, CPU")
    parser.add_argument("--name", default="xla_flags", help="the record's name")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="trace two more calls per variant: kernels and device time per update",
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--dump", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = set(args.variants.split(",")) - set(VARIANTS)
    if unknown:
        parser.error(f"--variants: unknown {sorted(unknown)}; known: {list(VARIANTS)}")
    if args.quick:
        args.cases, args.calls, args.tasks = "dpt_bandit:smoke", 2, 64
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.child:
        result = run_child(
            args.child, args.tasks, args.calls, Path(args.dump), args.profile
        )
        print(json.dumps(result))
        return
    keep = bench.results_dir()
    keep.mkdir(parents=True, exist_ok=True)
    rows = run_all(args, keep)
    best = choose(rows)
    results = {"rows": rows, "best": best, "variants": VARIANTS}
    notes = (
        f"Each variant in its own process, no persistent compile cache; "
        f"{args.tasks} histories per case, {args.calls} timed calls. "
        f"Chosen (least compile + preset's updates): {best}. command_buffers "
        "counts command-buffer regions in the optimized HLO text, which does "
        "not show every CUDA graph that runs (graph_while variants), and the "
        "profiler does not see kernels inside graphs (their device busy time "
        "reads near 0): compare wall times."
    )
    table = _table(rows)
    path = bench.write_record(args.name, results, _targets(rows), table, notes)
    print(bench.markdown_table(table))
    print(f"best: {best}; wrote {path}")


if __name__ == "__main__":
    main()
