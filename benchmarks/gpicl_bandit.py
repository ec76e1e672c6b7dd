"""The GPICL study's record: one sweep of ``experiments/gpicl_bandit.py``.

Runs the sweep the experiment's docstring names (``run_sweep`` with
``eval_train_tasks``: a static grid of ``data.num_train_tasks`` x
``model.d_model``, the seeds of a cell vmapped in one program), then writes
``benchmarks/results/gpicl_bandit.{json,md}`` (every cell's held-out and
training-task score with their CIs, the seconds each cell took, the
machine and its load) and ``gpicl_transition.png`` (both scores against
the number of training tasks, one colour per width).

Targets (the GPICL claim, on this family), each judged by a 95% bootstrap
CI, never by a point estimate alone: at the smallest ``N`` the widest model
scores higher on its training tasks than on held-out ones (memorisation:
the CI of ``train_score - score`` lies above 0.1); at the largest ``N`` the
two agree (generalisation: that CI lies inside [-0.05, 0.05], an
equivalence judgement: a gap near 0 whose CI is wider is "not shown", not
"met"); the gap's CI resamples the training tasks and the held-out tasks
independently (each task's score averaged over seeds; :func:`_gap_ci`; a
row without per-task scores falls back to the point estimate and its target
says so; records before session 56 judged both on the point estimate); and
the held-out score rises from the smallest ``N`` to the largest: judged
paired, the two cells' difference per (seed, held-out bandit) with a
bootstrap CI over bandits above 0 (every cell faces the same held-out
bandits with the same key;
:func:`agentrl.sweep.paired.paired_row_difference`), or, for rows without
per-task scores (a sweep record from before they were kept), the largest
``N``'s CI above the smallest's.

    agentrl bench gpicl_bandit --preset cpu --seeds 3
    agentrl bench gpicl_bandit --preset gpu --seeds 5 \\
        --tasks 4,16,64,256,1024,4096,16384,65536 --widths 32,64,128
    agentrl bench gpicl_bandit --preset smoke --seeds 2 --tasks 2,8 --widths 16
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

import common as bench
import numpy as np

from agentrl.configtools import parse_value
from agentrl.sweep.paired import paired_row_difference
from agentrl.sweep.run import run_sweep
from agentrl.train.experiments import load_experiment

#: the grid that fits the cpu preset on 2 cores (~45 min loaded); the gpu
#: preset's: --tasks 4,16,64,256,1024,4096,16384,65536 --widths 32,64,128
TASKS = "4,256,16384"
WIDTHS = "16,64"


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="cpu")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--tasks", default=TASKS, help="values of data.num_train_tasks")
    p.add_argument("--widths", default=WIDTHS, help="values of model.d_model")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a config override (repeatable), e.g. train.steps=1000",
    )
    p.add_argument("--sweep-dir", default=None, help="the sweep's directory")
    p.add_argument("--name", default="gpicl_bandit", help="record name")
    return p.parse_args(argv)


def _targets(rows: list[dict]) -> list[dict]:
    widest = max(r["model.d_model"] for r in rows)
    mine = sorted(
        (r for r in rows if r["model.d_model"] == widest),
        key=lambda r: r["data.num_train_tasks"],
    )
    small, large = mine[0], mine[-1]
    return [
        _memorisation(small, widest),
        _generalisation(large, widest),
        _rise(small, large, widest),
    ]


#: bootstrap resamples of the gap's CI
GAP_SAMPLES = 4000


def _gap_ci(row: dict, seed: int = 0) -> dict:
    """Mean and 95% CI of ``train_score - score`` from a row's per-task
    scores (``[seed][task]``, each task averaged over seeds; the training
    and held-out tasks are different tasks, so each side's tasks are
    resampled on their own), or ``None`` for a row without them."""
    if "train_task_scores" not in row or "task_scores" not in row:
        return None
    train = np.nanmean(np.asarray(row["train_task_scores"], np.float64), axis=0)
    held = np.nanmean(np.asarray(row["task_scores"], np.float64), axis=0)
    train, held = train[np.isfinite(train)], held[np.isfinite(held)]
    rng = np.random.default_rng(seed)
    pick = lambda x: x[rng.integers(0, x.size, (GAP_SAMPLES, x.size))].mean(-1)  # noqa: E731
    low, high = np.quantile(pick(train) - pick(held), [0.025, 0.975])
    return {"mean": float(train.mean() - held.mean()), "ci": [float(low), float(high)]}


def _gap_name(what: str, judged: str, row: dict, widest: int, gap: dict | None) -> str:
    where = f"{what} at N={row['data.num_train_tasks']} (width {widest})"
    if gap is None:
        return f"{where} (point estimate: no per-task scores)"
    low, high = gap["ci"]
    return f"{where}: {gap['mean']:+.3f} [{low:+.3f}, {high:+.3f}] ({judged})"


def _memorisation(row: dict, widest: int) -> dict:
    """Met when the gap's CI lies above 0.1 (value: its low end)."""
    gap = _gap_ci(row)
    what = "memorisation: train - held-out score"
    name = _gap_name(what, "the CI's low end", row, widest, gap)
    value = row["generalization_gap"] if gap is None else gap["ci"][0]
    return {**bench.target(name, value, 0.1), "gap": gap}


def _generalisation(row: dict, widest: int) -> dict:
    """Met when the gap's CI lies inside [-0.05, 0.05] (value: the CI's
    end farthest from 0)."""
    gap = _gap_ci(row)
    what = "generalisation: abs(train - held-out)"
    name = _gap_name(what, "the CI's end farther from 0", row, widest, gap)
    value = abs(row["generalization_gap"]) if gap is None else max(map(abs, gap["ci"]))
    return {**bench.target(name, value, 0.05, higher_is_better=False), "gap": gap}


def _rise(small: dict, large: dict, widest: int) -> dict:
    """The held-out rise target: a rise within the noise is no rise.

    Paired when both rows keep per-task scores on the same held-out tasks
    (value: the low end of the paired CI of largest minus smallest N, > 0
    resolved; the entry's ``paired`` holds the mean, CI and pairs); else
    the largest N's CI must lie above the smallest N's (value: their gap,
    > 0 when apart; ``unpaired_because`` says why).
    """
    try:
        paired = paired_row_difference(large, small)
    except ValueError as err:
        entry = bench.target(
            "held-out score rise from the smallest N to the largest, CI to CI "
            f"(largest's low minus smallest's high, width {widest})",
            large["score_ci_low"] - small["score_ci_high"],
            0.0,
        )
        return {**entry, "paired": None, "unpaired_because": str(err)}
    low, high = paired["ci"]
    entry = bench.target(
        "held-out score rise from the smallest N to the largest, paired over "
        f"{paired['pairs']} (seed, task) pairs: {paired['mean']:+.3f} "
        f"[{low:+.3f}, {high:+.3f}] (the CI's low end, width {widest})",
        low,
        0.0,
    )
    return {**entry, "met": paired["resolved"], "paired": paired}  # CI above 0


def _table(rows: list[dict]) -> list[dict]:
    def ci(r, stem):
        return f"{r[stem]:.3f} [{r[stem + '_ci_low']:.3f}, {r[stem + '_ci_high']:.3f}]"

    return [
        {
            "N": r["data.num_train_tasks"],
            "d_model": r["model.d_model"],
            "held-out score": ci(r, "score"),
            "train-task score": ci(r, "train_score"),
            "gap": f"{r['generalization_gap']:+.3f}",
            "apart": r["train_score_ci_low"] > r["score_ci_high"]
            or r["score_ci_low"] > r["train_score_ci_high"],
            "final loss": f"{r['final_loss']:.3f}",
        }
        for r in rows
    ]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    overrides = {}
    for item in args.set:
        key, value = item.split("=", 1)
        overrides[key] = value
    config = load_experiment(
        "gpicl_bandit",
        args.preset,
        {k: parse_value(k, v, None) for k, v in overrides.items()} or None,
    )
    grid = {"num_train_tasks": _ints(args.tasks), "d_model": _ints(args.widths)}
    out = Path(args.sweep_dir or f"sweeps/gpicl_bandit-{args.preset}")
    load_start, start = os.getloadavg()[0], time.perf_counter()
    outcome = run_sweep(
        config,
        list(range(config.train.seed, config.train.seed + args.seeds)),
        grid,
        out,
        eval_train_tasks=True,
        tasks="test",  # a reported measurement, no setting chosen from it
    )
    seconds = time.perf_counter() - start
    rows = outcome.rows
    timings = outcome.info["timings"]
    # a resumed sweep reuses finished cells: quote the time they took to make
    cells = sum(t["train_seconds"] + t["eval_seconds"] for t in timings)
    resumed = sum(bool(t.get("resumed")) for t in timings)
    results_dir = bench.results_dir()
    plot = results_dir / f"{args.name.replace('_bandit', '')}_transition.png"
    shutil.copyfile(outcome.paths["transition"], plot)
    results = {
        "preset": args.preset,
        "seeds": args.seeds,
        "grid": grid,
        "overrides": overrides,
        "rows": rows,
        "timings": timings,
        "total_seconds": round(seconds, 1),
        "cell_seconds": round(cells, 1),
        "cells_resumed": resumed,
        "load": bench.load_note(load_start),
        "plot": plot.name,
    }
    made = (
        f"{cells / 60:.1f} min of training and evaluation in the cells "
        f"({resumed} reused from an earlier invocation, this one "
        f"{seconds / 60:.1f} min)"
        if resumed
        else f"{seconds / 60:.1f} min"
    )
    notes = (
        f"One sweep of {len(rows)} cells x {args.seeds} seeds in {made}; "
        f"{results['load']}. Scores: normalized "
        "in-context return of one episode (random 0, oracle 1), mean over "
        "seeds x evaluation bandits with 95% bootstrap CIs; `apart`: the two "
        "CIs do not overlap. The rise target pairs the smallest and largest N "
        "per (seed, held-out bandit), the same bandits in every cell. Plot: "
        + plot.name
        + "."
    )
    path = bench.write_record(args.name, results, _targets(rows), _table(rows), notes)
    print(path.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
