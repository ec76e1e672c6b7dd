"""``make demo``'s pipeline, timed against a reference checkout in the same run.

Run: ``agentrl bench demo_pipeline --baseline PATH [--rounds 2] [--quick]``

Issue 34's target: ``make demo``'s pipeline >= 1.5x faster than before the
device-native work (105 s then, on that session's machine; absolute times
differ between machines, so the reference is timed again here). ``PATH`` is
a checkout of the reference, e.g. ``git worktree add ../base ca65756^``
(the commit before the device-native work) beside this one.

Each round times ``python -m agentrl.cli demo --out TMP --no-progress`` for
this checkout and for the reference (order alternating between rounds), each
in a subprocess with ``PYTHONPATH`` and working directory its checkout, a
fresh run directory and no persistent compilation cache: what a fresh
clone's ``make demo`` does after its venv exists (histories, AD training,
in-context evaluation; the ``ad_darkroom`` ``demo`` preset). Wall time is
measured from outside; the split into "histories + training" and
"evaluation" comes from the ``[3/3] ... (Ns)`` line the command prints, and
this checkout's start-up phases from its ``run.json`` (the reference
predates that record).

Reported: seconds of each checkout per round, the per-round ratio
reference / this (above 1: this checkout is faster), and the AD return the
demo printed (the checkouts draw different batch streams, equally
distributed, so single-seed returns differ: ``tests/test_device_sampler.py``
checks the distribution). ``--quick``: the ``smoke`` preset, one round.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common as bench

TARGET_RATIO = 1.5
HERE = Path(__file__).resolve().parents[1]


def time_demo(tree: Path, preset: str) -> dict:
    """Run ``agentrl demo`` of checkout ``tree`` once; its seconds and output."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["PYTHONPATH"] = str(tree)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "demo"
        cmd = [sys.executable, "-m", "agentrl.cli", "demo", "--out", str(out)]
        cmd += ["--no-progress", "--preset", preset]
        begin = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - begin
        if proc.returncode != 0:
            raise RuntimeError(f"demo of {tree} failed:\n{proc.stderr[-3000:]}")
        run_json = json.loads((out / "run.json").read_text())
    train = re.search(r"\[3/3\][^(]*\((\d+)s\)", proc.stdout)
    ad = re.search(r"^ad\s+([-\d.]+)\s+([-\d.]+)", proc.stdout, re.M)
    return {
        "seconds": seconds,
        "data_and_training_s": float(train.group(1)) if train else None,
        "ad_return_first": float(ad.group(1)) if ad else None,
        "ad_return_last": float(ad.group(2)) if ad else None,
        "startup": run_json.get("startup"),
    }


def measure(baseline: Path, rounds: int, preset: str) -> dict[str, list[dict]]:
    """``{"this": [...], "reference": [...]}``: one :func:`time_demo` a round."""
    trees = {"this": HERE, "reference": baseline}
    out: dict[str, list[dict]] = {name: [] for name in trees}
    for r in range(rounds):
        for name in bench.round_order(trees, r):
            out[name].append(time_demo(trees[name], preset))
            print(f"round {r + 1} {name}: {out[name][-1]['seconds']:.1f} s", flush=True)
    return out


def _rows(runs: dict[str, list[dict]]) -> list[dict]:
    rows = []
    for r, (this, ref) in enumerate(zip(runs["this"], runs["reference"], strict=True)):
        rows.append({
            "round": r + 1,
            "this_s": round(this["seconds"], 1),
            "reference_s": round(ref["seconds"], 1),
            "ratio": round(ref["seconds"] / this["seconds"], 3),
            "this_data_train_s": this["data_and_training_s"],
            "reference_data_train_s": ref["data_and_training_s"],
            "this_ad_last": this["ad_return_last"],
            "reference_ad_last": ref["ad_return_last"],
        })  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the reference checkout")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="smoke preset, 1 round")
    args = parser.parse_args(argv)
    baseline = Path(args.baseline).resolve()
    if not (baseline / "agentrl" / "demo.py").is_file():
        print(f"--baseline: {baseline} is not an agentrl checkout", file=sys.stderr)
        raise SystemExit(2)
    preset, rounds = ("smoke", 1) if args.quick else ("demo", args.rounds)
    load = os.getloadavg()[0]
    runs = measure(baseline, rounds, preset)
    rows = _rows(runs)
    ratios = [row["ratio"] for row in rows]
    median = statistics.median(ratios)
    name = "demo_pipeline_quick" if args.quick else "demo_pipeline"
    path = bench.write_record(
        name,
        {"preset": preset, "baseline": str(baseline), "rounds": rows, "runs": runs},
        [bench.target("make demo pipeline, reference / this", median, TARGET_RATIO)],
        rows,
        notes=bench.load_note(load)
        + f". Reference checkout: {baseline}; preset {preset}.",
    )
    print(f"ratio reference/this per round: {ratios}; wrote {path}")


if __name__ == "__main__":
    main()
