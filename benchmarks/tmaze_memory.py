"""The T-Maze memory probe: how long a gap AMAGO's memory bridges.

Trains ``experiments/amago_tmaze.py``'s preset at each corridor length
``L`` (its ``length_overrides``: the epsilon anneal kept at the same number
of updates) for each seed, one run directory each, evaluates every run
greedily on its test episodes (the preset's ``eval``: 200 episodes whose
goal sides come from the evaluation-only key of ``eval.seed``, the same for
every seed and length), and writes ``benchmarks/results/tmaze_memory.
{json,md}`` (``_<preset>`` added for a preset other than cpu, and
``_<field><value>`` for each ``--set``, as ``agentrl reproduce`` names an
ablation): per length the success rate (the fraction of test episodes
that reach the goal, ``TMaze.success``), balanced over the two goal sides
(the mean of the two sides' rates: a policy without memory turns the same
way whatever the cue, so it scores exactly 0.5 however many episodes each
side drew, where the raw rate of an always-up policy is the share of up
goals), against the memoryless ceiling (0.5) and the oracle (1.0); the
share of episodes that walked the corridor without a wasted step (success
needs that, and a memoryless walker has it too), the training time and
load of each run, the machine.

    agentrl bench tmaze_memory --lengths 10,25,50,100 --seeds 1
    agentrl bench tmaze_memory --lengths 50,100 --seeds 1 --set train.steps=1500
    agentrl bench tmaze_memory --preset smoke --lengths 2,4 --seeds 1

A run directory keeps its row of results (``tmaze_memory_row.json``, with
its config): a later probe with the same config reuses it, so an
interrupted probe picks up where it stopped and ``--seeds 2`` after a run
of ``--seeds 1`` trains only the new seed (an unfinished run resumes from
its checkpoint). Targets: for each length, every seed's balanced success
above the memoryless ceiling (the low end of the seed's 95% interval above
0.5: the length is bridged).
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

from agentrl.configtools import parse_value, to_dict
from agentrl.envs.tmaze import TMaze
from agentrl.evaluate.reproduce_report import ablation_suffix
from agentrl.evaluate.run import run_results
from agentrl.train.experiments import load_experiment, load_module
from agentrl.train.loop import fit
from agentrl.train.rundir import load_run

EXPERIMENT = "amago_tmaze"
#: the memoryless policy's success rate, and the oracle's
CEILING, ORACLE = 0.5, 1.0
#: a run's row, kept in its directory (reused while its config is the same)
ROW_FILE = "tmaze_memory_row.json"


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
    p.add_argument(
        "--runs-dir", default=None, help="default runs/tmaze_memory[_PRESET][_SET]"
    )
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


def _fingerprint(config) -> str:
    return json.dumps(to_dict(config), sort_keys=True, default=str)


def run_one(preset: str, length: int, seed: int, overrides: dict, runs: Path):
    """Train and evaluate one (length, seed): its row of per-run results.

    The row is kept in the run directory (``ROW_FILE``, with the config it
    was measured with) and reused while the config is the same, so the
    probe resumes, and more seeds or lengths add to the runs already made;
    a kept row without per-episode results (an older probe's) is evaluated
    again, keeping its training time.
    """
    config = _config(preset, length, seed, overrides)
    run_dir = runs / f"L{length}-seed{seed}"
    kept = run_dir / ROW_FILE
    row = None
    if kept.exists():
        saved = json.loads(kept.read_text())
        if saved.get("config") == _fingerprint(config):
            row = saved["row"]
            if "goals" in row:
                return {**row, "reused": True}
    trained = row is None
    if trained:
        row = _train(config, length, seed, run_dir)
    row = {**row, **_evaluate(config, run_dir), "reused": not trained}
    kept.write_text(json.dumps({"config": _fingerprint(config), "row": row}))
    return row


def _train(config, length: int, seed: int, run_dir: Path) -> dict:
    load_start = os.getloadavg()[0]
    start = time.perf_counter()
    fit(config, run_dir, progress=False)
    train_s = time.perf_counter() - start
    return {
        "length": length,
        "seed": seed,
        "final_trial_return": _last_metrics(run_dir).get("trial_return"),
        "train_seconds": round(train_s, 1),
        "load_average": [round(load_start, 1), round(os.getloadavg()[0], 1)],
        "updates": config.train.steps,
        "explore_steps": config.algo.explore_steps,
        "run_dir": str(run_dir),
    }


def _evaluate(config, run_dir: Path) -> dict:
    """The run's test episodes: returns, goal sides, success (raw and
    balanced over the two sides), the walked share, random and oracle."""
    start = time.perf_counter()
    run = load_run(run_dir)
    results, _ = run_results(run_dir, baselines=["random", "oracle"], run=run)
    learner = results[config.algo.label]
    returns = np.asarray(learner.returns, np.float64)
    # each task's side as evaluated (TMaze.task_parameter)
    sides = np.asarray(learner.metadata["task_parameter"]["values"])
    goals = sides.repeat(returns.shape[1])
    returns = returns.ravel()
    counts = side_counts(returns, goals)
    return {
        "episodes": int(returns.size),
        "successes": int(TMaze.success(returns).sum()),
        "success": float(TMaze.success(returns).mean()),
        "sides": counts,
        "balanced_success": balanced(counts)[0],
        "walked": float((returns > -1e-6).mean()),
        "mean_return": float(returns.mean()),
        "oracle_success": float(TMaze.success(results["oracle"].returns).mean()),
        "random_success": float(TMaze.success(results["random"].returns).mean()),
        "eval_seconds": round(time.perf_counter() - start, 1),
        "returns": returns.tolist(),
        "goals": goals.astype(int).tolist(),
    }


def side_counts(returns, goals) -> dict[str, list[int]]:
    """``{"up": [successes, episodes], "down": [...]}`` by the goal's side."""
    ok = TMaze.success(np.asarray(returns))
    goals = np.asarray(goals)
    return {
        side: [int(ok[goals == g].sum()), int((goals == g).sum())]
        for side, g in (("up", 1), ("down", -1))
    }


def balanced(counts: dict[str, list[int]]) -> tuple[float, float, float]:
    """``(rate, low, high)``: the mean of the two sides' success rates, and
    the mean of their 95% Wilson bounds (conservative). Any policy without
    memory turns the same way whatever the side, so its expected balanced
    rate is exactly 0.5 (a policy that always turns up scores 1 and 0)."""
    rates, lows, highs = [], [], []
    for wins, n in counts.values():
        rates.append(wins / n if n else float("nan"))
        low, high = wilson(wins, n)
        lows.append(low)
        highs.append(high)
    return float(np.mean(rates)), float(np.mean(lows)), float(np.mean(highs))


def summarize(runs: list[dict]) -> list[dict]:
    """One row per length: the runs' episodes pooled, by side."""
    rows = []
    for length in sorted({r["length"] for r in runs}):
        mine = [r for r in runs if r["length"] == length]
        counts = {
            side: [sum(r["sides"][side][i] for r in mine) for i in (0, 1)]
            for side in ("up", "down")
        }
        rate, low, high = balanced(counts)
        lows = [balanced(r["sides"])[1] for r in mine]
        rows.append(
            {
                "length": length,
                "seeds": len(mine),
                "success": rate,
                "ci_low": low,
                "ci_high": high,
                "sides": counts,
                "per_seed": [r["balanced_success"] for r in mine],
                "raw_success": sum(r["successes"] for r in mine)
                / sum(r["episodes"] for r in mine),
                "walked": float(np.mean([r["walked"] for r in mine])),
                "per_seed_low": lows,
                "seeds_above": sum(x > CEILING for x in lows),
                "bridged": min(lows) > CEILING,
                "train_minutes": [round(r["train_seconds"] / 60, 1) for r in mine],
            }
        )
    return rows


def _table(rows: list[dict]) -> list[dict]:
    def side(r, name):
        wins, n = r["sides"][name]
        return f"{wins}/{n}"

    return [
        {
            "L": r["length"],
            "seeds": r["seeds"],
            "success (balanced)": (
                f"{r['success']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
            ),
            "per seed": ", ".join(f"{v:.3f}" for v in r["per_seed"]),
            "goal up": side(r, "up"),
            "goal down": side(r, "down"),
            "memoryless": f"{CEILING:.1f}",
            "oracle": f"{ORACLE:.1f}",
            "walked the corridor": f"{r['walked']:.3f}",
            "seeds above the ceiling": f"{r['seeds_above']}/{r['seeds']}",
            "train min / seed": ", ".join(str(m) for m in r["train_minutes"]),
        }
        for r in rows
    ]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    raw = dict(item.split("=", 1) for item in args.set)
    overrides = {key: parse_value(key, value, None) for key, value in raw.items()}
    # an ablation (--set) gets runs and a record of its own, as reproduce's
    suffix = ("" if args.preset == "cpu" else f"_{args.preset}") + ablation_suffix(raw)
    runs_dir = Path(args.runs_dir or f"runs/tmaze_memory{suffix}")
    name = args.name or f"tmaze_memory{suffix}"
    load_start, start = os.getloadavg()[0], time.perf_counter()
    runs = []
    for length in args.lengths:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            row = run_one(args.preset, length, seed, overrides, runs_dir)
            up, down = row["sides"]["up"], row["sides"]["down"]
            print(
                f"L={length} seed={seed}: success {row['balanced_success']:.3f} "
                f"(goal up {up[0]}/{up[1]}, down {down[0]}/{down[1]}; walked "
                f"{row['walked']:.3f}) in {row['train_seconds']:.0f} s"
                + (" (kept from an earlier probe)" if row.get("reused") else ""),
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
            f"L={r['length']}: every seed's balanced success above the memoryless "
            f"ceiling {CEILING} (the lowest seed's 95% low end)",
            min(r["per_seed_low"]),
            CEILING,
        )
        for r in rows
    ]
    notes = (
        f"AMAGO (`experiments/{EXPERIMENT}.py`, preset `{args.preset}`) on the "
        "passive T-Maze at each corridor length L, trained from scratch per "
        "(L, seed) and evaluated greedily on its test episodes (one episode "
        "each, goal sides from an evaluation-only key, the same for every run). "
        "Success (balanced): the mean over the two goal sides of the fraction "
        "of test episodes that reach the goal, so that every policy without "
        "memory (one that turns the same way whatever the cue, e.g. always up: "
        "1 on one side, 0 on the other) scores 0.5 however many test episodes "
        "each side drew; the interval is the mean of the two sides' 95% Wilson "
        "intervals over the pooled episodes (conservative; it does not carry "
        "the seeds' spread: see per seed). A seed is above the ceiling when "
        "the low end of its own interval is above 0.5; a length is bridged "
        "when every seed is. `walked the corridor`: episodes "
        "without a wasted step (success needs it; a memoryless walker has it "
        f"too). {len(runs)} runs ({sum(bool(r.get('reused')) for r in runs)} "
        "kept from earlier probes, with their own training times and loads) in "
        f"{seconds / 60:.1f} min; {results['load']}."
    )
    path = bench.write_record(name, results, targets, _table(rows), notes)
    print(path.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
