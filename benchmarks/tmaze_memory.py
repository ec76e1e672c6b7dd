"""The T-Maze memory probe: how long a gap AMAGO's memory bridges.

Trains ``experiments/amago_tmaze.py``'s preset at each corridor length
``L`` (its ``length_overrides``: the epsilon anneal kept at the same number
of updates) for each seed, one run directory each, evaluates every run
greedily on its test episodes (the preset's ``eval``: 200 episodes whose
goal sides come from an evaluation-only key, ``eval.seed + seed``), and
writes ``benchmarks/results/tmaze_memory.{json,md}`` (``_<preset>`` for a
preset other than cpu): per length the success rate (the fraction of test
episodes that reach the goal, ``TMaze.success``) against the memoryless
ceiling (0.5: a policy without memory walks to the junction and turns the
right way half the time) and the oracle (1.0), the share of episodes that
walked the corridor without a wasted step (success needs that, and a
memoryless walker has it too), the training time, the machine and its load.

    agentrl bench tmaze_memory --lengths 10,25,50,100 --seeds 1
    agentrl bench tmaze_memory --preset smoke --lengths 2,4 --seeds 1

A run directory that already holds a finished run of the same config is
reused (``fit`` resumes it), so an interrupted probe picks up where it
stopped. Targets: for each length, the lower end of the success rate's 95%
interval above the memoryless ceiling (the length is bridged).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import common as bench
import numpy as np

from agentrl.configtools import parse_value
from agentrl.envs.tmaze import TMaze
from agentrl.evaluate.run import run_results
from agentrl.train.experiments import load_experiment, load_module
from agentrl.train.loop import fit

EXPERIMENT = "amago_tmaze"
#: the memoryless policy's success rate, and the oracle's
CEILING, ORACLE = 0.5, 1.0


def _ints(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"lengths must be integers >= 1: {text!r}")
    return values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="cpu")
    p.add_argument(
        "--lengths", type=_ints, default=[10, 25, 50, 100], help="corridor lengths"
    )
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a config override (repeatable), e.g. train.steps=800",
    )
    p.add_argument("--runs-dir", default=None, help="default runs/tmaze_memory-PRESET")
    p.add_argument("--name", default=None, help="record name")
    args = p.parse_args(argv)
    if args.seeds < 1 or args.first_seed < 0:
        p.error("--seeds must be >= 1 and --first-seed >= 0")
    return args


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson interval of a binomial rate (episodes, not seeds)."""
    if n == 0:
        return float("nan"), float("nan")
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(centre - half, 0.0), min(centre + half, 1.0)


def _config(preset: str, length: int, seed: int, overrides: dict):
    module = load_module(EXPERIMENT)
    changes = {
        **module.length_overrides(length, _anneal_updates(preset)),
        "train.seed": seed,
        **overrides,
    }
    return load_experiment(EXPERIMENT, preset, changes)


def _anneal_updates(preset: str) -> int:
    """The preset's anneal in updates (its explore_steps over its horizon)."""
    config = load_experiment(EXPERIMENT, preset)
    horizon = dict(config.data.env_args)["corridor_length"] + 1
    return max(round(config.algo.explore_steps / horizon), 1)


def _last_metrics(run_dir: Path) -> dict:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    logs = [json.loads(x) for x in lines if '"trial_return"' in x]
    return logs[-1] if logs else {}


def run_one(preset: str, length: int, seed: int, overrides: dict, runs: Path):
    """Train and evaluate one (length, seed): its row of per-run results."""
    config = _config(preset, length, seed, overrides)
    run_dir = runs / f"L{length}-seed{seed}"
    start = time.perf_counter()
    fit(config, run_dir, progress=False)
    train_s = time.perf_counter() - start
    start = time.perf_counter()
    results, _ = run_results(run_dir, baselines=["random", "oracle"])
    eval_s = time.perf_counter() - start
    returns = np.asarray(results[config.algo.label].returns, np.float64).ravel()
    last = _last_metrics(run_dir)
    return {
        "length": length,
        "seed": seed,
        "episodes": int(returns.size),
        "successes": int(TMaze.success(returns).sum()),
        "success": float(TMaze.success(returns).mean()),
        "walked": float((returns > -1e-6).mean()),
        "mean_return": float(returns.mean()),
        "oracle_success": float(TMaze.success(results["oracle"].returns).mean()),
        "random_success": float(TMaze.success(results["random"].returns).mean()),
        "final_trial_return": last.get("trial_return"),
        "train_seconds": round(train_s, 1),
        "eval_seconds": round(eval_s, 1),
        "updates": config.train.steps,
        "explore_steps": config.algo.explore_steps,
        "run_dir": str(run_dir),
    }


def summarize(runs: list[dict]) -> list[dict]:
    """One row per length: the runs' episodes pooled."""
    rows = []
    for length in sorted({r["length"] for r in runs}):
        mine = [r for r in runs if r["length"] == length]
        wins = sum(r["successes"] for r in mine)
        n = sum(r["episodes"] for r in mine)
        low, high = wilson(wins, n)
        rows.append(
            {
                "length": length,
                "seeds": len(mine),
                "success": wins / n,
                "ci_low": low,
                "ci_high": high,
                "per_seed": [r["success"] for r in mine],
                "walked": float(np.mean([r["walked"] for r in mine])),
                "bridged": low > CEILING,
                "train_minutes": [round(r["train_seconds"] / 60, 1) for r in mine],
            }
        )
    return rows


def _table(rows: list[dict]) -> list[dict]:
    return [
        {
            "L": r["length"],
            "seeds": r["seeds"],
            "success": f"{r['success']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]",
            "per seed": ", ".join(f"{v:.3f}" for v in r["per_seed"]),
            "memoryless": f"{CEILING:.1f}",
            "oracle": f"{ORACLE:.1f}",
            "walked the corridor": f"{r['walked']:.3f}",
            "above the ceiling": r["bridged"],
            "train min / seed": ", ".join(str(m) for m in r["train_minutes"]),
        }
        for r in rows
    ]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    overrides = {}
    for item in args.set:
        key, value = item.split("=", 1)
        overrides[key] = parse_value(key, value, None)
    runs_dir = Path(args.runs_dir or f"runs/tmaze_memory-{args.preset}")
    name = args.name or (
        "tmaze_memory" if args.preset == "cpu" else f"tmaze_memory_{args.preset}"
    )
    load_start, start = os.getloadavg()[0], time.perf_counter()
    runs = []
    for length in args.lengths:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            row = run_one(args.preset, length, seed, overrides, runs_dir)
            print(
                f"L={length} seed={seed}: success {row['success']:.3f} "
                f"(walked {row['walked']:.3f}) in {row['train_seconds']:.0f} s",
                flush=True,
            )
            runs.append(row)
    seconds = time.perf_counter() - start
    rows = summarize(runs)
    bridged = [r["length"] for r in rows if r["bridged"]]
    results = {
        "experiment": EXPERIMENT,
        "preset": args.preset,
        "overrides": {k: str(v) for k, v in overrides.items()},
        "memoryless_ceiling": CEILING,
        "oracle": ORACLE,
        "lengths": rows,
        "runs": runs,
        "longest_bridged": max(bridged) if bridged else None,
        "total_seconds": round(seconds, 1),
        "load": bench.load_note(load_start),
    }
    targets = [
        bench.target(
            f"L={r['length']}: success rate's 95% low end above the memoryless "
            f"ceiling {CEILING}",
            r["ci_low"],
            CEILING,
        )
        for r in rows
    ]
    notes = (
        f"AMAGO (`experiments/{EXPERIMENT}.py`, preset `{args.preset}`) on the "
        "passive T-Maze at each corridor length L, trained from scratch per "
        "(L, seed) and evaluated greedily on its test episodes (one episode "
        "each, goal sides from an evaluation-only key). Success: the fraction "
        "of test episodes that reach the goal; intervals are 95% Wilson "
        "intervals over the pooled episodes (they do not carry the seeds' "
        "spread: see per seed). `walked the corridor`: episodes without a "
        "wasted step (success needs it; a memoryless walker has it too, and "
        f"then succeeds half the time). {len(runs)} runs in "
        f"{seconds / 60:.1f} min; {results['load']}."
    )
    path = bench.write_record(name, results, targets, _table(rows), notes)
    print(path.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
