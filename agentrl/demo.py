"""``make demo`` / ``agentrl demo``: the Dark Room AD pipeline, end to end.

1. generate Q-learning learning histories on the training goals of Dark Room
   9x9 (TFDS ArrayRecord dataset inside the run directory);
2. train Algorithm Distillation on them (the ``ad_darkroom`` ``demo`` preset:
   the smallest that generalises to held-out goals; ``smoke`` only checks
   plumbing in seconds);
3. evaluate in context on the held-out goals against random, oracle and
   Q-learning run online on the same goals;
4. write ``results.json``, ``results.md`` and ``improvement.png`` and print
   where they are, with the first-episode and last-episodes returns.

A second ``make demo`` resumes: the dataset and the finished checkpoint are
reused, so it only re-evaluates.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from agentrl.cliargs import check_output_path


@dataclasses.dataclass
class Args:
    """Run the Dark Room AD pipeline end to end: data, training, evaluation."""

    preset: str = "demo"
    """demo (default), smoke, cpu or full: a preset of ad_darkroom"""
    out: str = "runs/demo"
    """the run directory"""
    progress: bool = True
    """show progress bars"""


def run(args: Args) -> int:
    from agentrl.evaluate.run import evaluate_run
    from agentrl.train.experiments import load_experiment
    from agentrl.train.loop import fit

    start = time.time()
    config = load_experiment("ad_darkroom", args.preset)
    check_output_path(args.out, "--out")
    print(f"[1-2/3] histories + AD training ({config.train.steps} steps) -> {args.out}")
    run_dir = fit(config, args.out, progress=args.progress)
    print(f"[3/3] in-context evaluation on held-out goals ({time.time() - start:.0f}s)")
    paths = evaluate_run(run_dir)
    summary = json.loads(Path(paths["json"]).read_text())["summary"]
    print()
    print(f"{'method':12s} {'return ep 1':>12s} {'return last':>12s}")
    for name, s in summary.items():
        first, last = s["return_first"]["mean"], s["return_last"]["mean"]
        print(f"{name:12s} {first:12.2f} {last:12.2f}")
    ad = summary[config.algo.label]
    gain = ad["return_last"]["mean"] - ad["return_first"]["mean"]
    print(
        f"\nlast = mean of the last {ad['last_k']} of {config.eval.num_episodes} "
        f"episodes on {ad['tasks']} held-out goals (never in the training data). "
        f"AD acts with frozen weights; its return changed by {gain:+.2f} from "
        "episode 1 by learning in context alone. improvement.png shows the curve."
    )
    for kind, path in paths.items():
        print(f"{kind:12s} {path}")
    print(f"done in {time.time() - start:.0f}s")
    return 0
