"""Evaluation protocol compiled once: compilations and wall time, before and after.

Run: ``agentrl bench eval_compile [--experiments ad_darkroom dpt_bandit]
[--preset smoke] [--seeds 2] [--rounds 3]``

For each experiment it trains ``--seeds`` runs of the preset (the
reproduction's seeds: each its own data, split and evaluation key), then
times the evaluation protocol ``agentrl reproduce --controls`` runs on each
seed's run: choose the acting rule on validation tasks (three rules), test
the chosen rule once with the default baselines and the three context
controls (:func:`agentrl.evaluate.selection.select`, ``evaluate_choice``).
Two ways, in the same process, alternating order from round to round:

- ``before``: every evaluation builds its own programs
  (``agentrl.evaluate.programs.sharing(False)``, the behaviour before
  issue 34 item 4): the model's program compiles once per rule and control;
- ``after``: programs are kept and shared (the default), starting empty
  (``programs.clear()``) in each round: rules and controls are lanes of one
  program, and the seeds' runs share it and the baselines'.

Recorded per experiment and way: wall seconds of all seeds' protocols,
XLA compilations in all and of the model's program (counted with
:func:`agentrl.evaluate.programs.count_compiles`, by function name: ``go``
before, ``evaluate_model_lanes`` after), and whether every result (returns
of every method and seed) is identical between the two ways. The
persistent compilation cache is off for the measurement.

The speedup (before / after seconds within a round) is the median over
rounds, with a bootstrap 95% CI only from :data:`MIN_CI_ROUNDS` rounds on
(fewer give the per-round values alone). The target, at most 2
compilations of the model's program in all, is about the seeds' runs
sharing one program: with one seed it is not exercised, and not met.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import common as bench
import jax
import numpy as np

import agentrl.evaluate.controls as ctl
import agentrl.evaluate.programs as programs
from agentrl.cliargs import positive_int
from agentrl.evaluate.reproduce import seed_config
from agentrl.evaluate.selection import acting_candidates, evaluate_choice, select
from agentrl.train.loop import fit

#: the old path's model program (``agentrl.agents.driver.run_policy``)
OLD_MODEL_PROGRAM = "go"

#: the fewest rounds whose speedups get a bootstrap CI
MIN_CI_ROUNDS = 3


def protocol(run_dirs: list[Path]) -> dict[str, np.ndarray]:
    """The reproduction's evaluation of every run: ``{seed/method: returns}``."""
    out = {}
    for i, run_dir in enumerate(run_dirs):
        sel = select(acting_candidates(run_dir))
        results, _ = evaluate_choice(sel, control=list(ctl.CONTEXT_CONTROLS))
        for name, result in results.items():
            out[f"{i}/{name}"] = np.asarray(result.returns)
    return out


def measure(run_dirs: list[Path], share: bool) -> tuple[dict, dict]:
    """``(record, returns)`` of one way (``share``: the kept programs).

    Both ways start from cold caches: agentrl's kept programs and JAX's own
    (its compiled eager operations and traces of module-level jitted
    functions, which a first way in the process would otherwise pay alone)."""
    programs.clear()
    jax.clear_caches()
    with programs.sharing(share), programs.count_compiles() as counts:
        start = time.perf_counter()
        returns = protocol(run_dirs)
        seconds = time.perf_counter() - start
    model = counts[programs.MODEL_PROGRAM if share else OLD_MODEL_PROGRAM]
    record = {
        "seconds": round(seconds, 2),
        "compiles": int(sum(counts.values())),
        "model_program_compiles": int(model),
    }
    return record, returns


def train_runs(name: str, preset: str, seeds: int, root: Path) -> list[Path]:
    """The reproduction's runs of ``name`` (seeds ``0 .. seeds - 1``)."""
    dirs = []
    for seed in range(seeds):
        config = seed_config(name, preset, seed, None)
        dirs.append(fit(config, root / f"{name}-{preset}-seed{seed}", progress=False))
    return dirs


def compare(name: str, run_dirs: list[Path], rounds: int) -> dict:
    """Both ways, ``rounds`` times in alternating order, on ``run_dirs``."""
    ways: dict[str, list[dict]] = {"before": [], "after": []}
    same = True
    for r in range(rounds):
        got = {}
        for way in bench.round_order(["before", "after"], r):
            record, got[way] = measure(run_dirs, share=way == "after")
            ways[way].append(record)
            print(f"{name} round {r + 1} {way}: {record}")
        same = same and all(
            np.array_equal(got["before"][k], got["after"][k]) for k in got["before"]
        )
        same = same and got["before"].keys() == got["after"].keys()
    ratios = [b["seconds"] / a["seconds"] for b, a in zip(*ways.values(), strict=True)]
    return {
        "ways": ways,
        "speedup": speedup(ratios),
        "identical_results": bool(same),
    }


def speedup(ratios: list[float]) -> dict:
    """The median of the per-round speedups ``ratios``, with a bootstrap 95%
    CI (``low``, ``high``) from :data:`MIN_CI_ROUNDS` rounds on, else
    ``None`` for both (a CI of one or two values says nothing)."""
    median, low, high = bench.median_ci(ratios)
    if len(ratios) < MIN_CI_ROUNDS:
        low = high = None
    return {"median": median, "low": low, "high": high, "rounds": ratios}


def speedup_text(name: str, s: dict) -> str:
    """``name median x [low, high]``, or its per-round values without a CI."""
    if s["low"] is None:
        values = ", ".join(f"{r:.2f}" for r in s["rounds"])
        return f"{name} {s['median']:.2f}x (rounds: {values}; no CI)"
    return f"{name} {s['median']:.2f}x [{s['low']:.2f}, {s['high']:.2f}]"


def notes_of(results: dict, preset: str, seeds: int, rounds: int, load: str) -> str:
    """The record's notes: what ran (seeds, rounds, order) and the speedups."""
    order = (
        "order alternating from round to round"
        if rounds > 1
        else "before, then after (one round: no alternation)"
    )
    summary = (
        "median [95% bootstrap CI] over rounds"
        if rounds >= MIN_CI_ROUNDS
        else f"median over rounds, no CI (fewer than {MIN_CI_ROUNDS} rounds)"
    )
    sharing = (
        f"the {seeds} seeds' runs evaluated in one process, so the target "
        "covers their sharing"
        if seeds > 1
        else "one seed: sharing across seeds is not exercised, and the target "
        "is not met"
    )
    return (
        f"Per experiment: {seeds} run{'s' if seeds > 1 else ''} of the {preset} "
        "preset, each evaluated by the reproduction's protocol (3 acting rules on "
        "validation, the chosen rule with the default baselines and 3 context "
        f"controls on test); {sharing}. {rounds} round{'s' if rounds > 1 else ''}, "
        f"{order}; speedup = before / after seconds within a round ({summary}: "
        + "; ".join(speedup_text(n, r["speedup"]) for n, r in results.items())
        + "). Persistent compilation cache off. Target: at most 2 compilations "
        "of the model's program (one per distinct number of validation and test "
        f"tasks) in all. {load}."
    )


def compile_target(name: str, after: dict, seeds: int) -> dict:
    """At most 2 compilations of the model's program over all ``seeds``
    runs; not met with one seed (no sharing across seeds to check)."""
    row = bench.target(
        f"{name}: model program compiles, {seeds} seeds x (3 rules "
        "+ 1 test + 3 controls)",
        after["model_program_compiles"],
        2,
        higher_is_better=False,
    )
    if seeds < 2:
        row["met"] = False
    return row


def _rows(results: dict, preset: str, seeds: int) -> list[dict]:
    rows = []
    for name, r in results.items():
        for way, records in r["ways"].items():
            seconds = [x["seconds"] for x in records]
            rows.append(
                {
                    "experiment": f"{name} {preset} x {seeds} seeds",
                    "way": way,
                    "seconds (median)": f"{np.median(seconds):.1f}",
                    "compiles": records[-1]["compiles"],
                    "model program compiles": records[-1]["model_program_compiles"],
                    "identical results": r["identical_results"],
                }
            )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--experiments", nargs="+", default=["ad_darkroom", "dpt_bandit"]
    )
    parser.add_argument("--preset", default="smoke")
    parser.add_argument("--seeds", type=positive_int, default=2)
    parser.add_argument("--rounds", type=positive_int, default=MIN_CI_ROUNDS)
    parser.add_argument("--runs", default=None, help="where to train (default: temp)")
    args = parser.parse_args(argv)
    jax.config.update("jax_enable_compilation_cache", False)
    load = os.getloadavg()[0]
    results, targets = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.runs or tmp)
        for name in args.experiments:
            dirs = train_runs(name, args.preset, args.seeds, root)
            results[name] = compare(name, dirs, args.rounds)
            after = results[name]["ways"]["after"][-1]
            targets.append(compile_target(name, after, args.seeds))
            print(speedup_text(f"{name} speedup", results[name]["speedup"]))
    rows = _rows(results, args.preset, args.seeds)
    notes = notes_of(
        results, args.preset, args.seeds, args.rounds, bench.load_note(load)
    )
    path = bench.write_record("eval_compile", results, targets, rows, notes)
    print(bench.markdown_table(rows))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
