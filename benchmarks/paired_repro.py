"""Paired differences between methods of reproductions already written (no training).

    python benchmarks/paired_repro.py repro_meta_dt_darkroom_cpu:meta_dt \\
        repro_dt_darkroom_vs_ad_darkroom_cpu:ad \\
        repro_dt_darkroom_vs_ad_darkroom_cpu:dt [--last 10]

The first ``TAG:METHOD`` is compared with each of the others. A reproduction
gives training seed ``s`` its own data seed, task split and evaluation key
(``agentrl.evaluate.reproduce``), so two reproductions of experiments with
the same data settings evaluate seed ``s`` on the same test tasks with the
same keys, even when run apart: the difference is then paired per
``[seed, task]`` as ``--compare`` pairs it. This is checked (each seed's test
task ids must agree, else the script stops) and only the seeds both hold are
used. Writes ``paired_<first>_vs_<others>.json`` / ``.md`` (or ``--name``)
into the results folder (``$AGENTRL_BENCH_RESULTS`` or
``benchmarks/results``).
"""

from __future__ import annotations

import argparse

import numpy as np

from agentrl.cliargs import positive_int
from agentrl.evaluate.controls import paired_difference
from agentrl.evaluate.report import read_results
from agentrl.evaluate.reproduce_record import write_record
from agentrl.evaluate.reproduce_report import eval_result
from agentrl.evaluate.targets import resample_for
from agentrl.project import results_dir


def load_runs(spec: str) -> tuple[str, str, list]:
    """``(tag, method, runs)`` of ``TAG:METHOD`` (per-seed evaluation results)."""
    tag, _, method = spec.partition(":")
    saved = read_results(results_dir() / tag)
    if method not in saved["runs"]:
        raise SystemExit(f"{tag} has no method {method!r}: {sorted(saved['runs'])}")
    return tag, method, [eval_result(r) for r in saved["runs"][method]]


def paired(runs_a: list, runs_b: list, names: tuple[str, str], last: int) -> tuple:
    """``(seeds, paired difference)`` over the seeds both hold; stops where a
    seed's tasks are not shown to agree (``controls.tasks_agree``: task ids, or
    for families whose tasks are drawn rather than indexed the oracle's
    return per task)."""
    seeds = min(len(runs_a), len(runs_b))
    a, b = runs_a[:seeds], runs_b[:seeds]
    try:
        d = paired_difference(a, b, last, resample=resample_for(seeds), shown=True)
    except ValueError as err:
        raise SystemExit(f"{names[0]} vs {names[1]}: {err}") from None
    return seeds, d


def last_mean(runs: list, last: int) -> float:
    return float(np.mean([np.asarray(r.returns)[:, -last:].mean() for r in runs]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", help="TAG:METHOD compared with the others")
    parser.add_argument("others", nargs="+", help="TAG:METHOD")
    parser.add_argument(
        "--last", type=positive_int, default=10, help="last episodes scored"
    )
    parser.add_argument(
        "--name", default=None, help="the record's name (default: from the methods)"
    )
    args = parser.parse_args(argv)
    tag_a, method_a, runs_a = load_runs(args.first)
    rows, results = [], {}
    for spec in args.others:
        tag_b, method_b, runs_b = load_runs(spec)
        seeds, d = paired(runs_a, runs_b, (method_a, method_b), args.last)
        row = {
            "a": f"{method_a} ({tag_a})",
            "b": f"{method_b} ({tag_b})",
            "seeds": seeds,
            "tasks": int(np.asarray(runs_a[0].returns).shape[0]),
            f"a last-{args.last} return": last_mean(runs_a[:seeds], args.last),
            f"b last-{args.last} return": last_mean(runs_b[:seeds], args.last),
            "a minus b": d["mean"],
            "CI low": d["low"],
            "CI high": d["high"],
        }
        rows.append(row)
        results[f"{row['a']} vs {row['b']}"] = row  # one method in two tags too
    others = "_".join(s.partition(":")[2] for s in args.others)
    notes = (
        "Paired per [seed, task] over the seeds both reproductions hold (same "
        "data seed, task split and evaluation key per seed); 95% CIs resample "
        "seeds, then tasks. Each method's acting rule is its own reproduction's "
        "validation choice."
    )
    name = args.name or f"paired_{method_a}_vs_{others}"
    path = write_record(name, results, [], rows, notes)
    print(f"wrote {path} and its .md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
