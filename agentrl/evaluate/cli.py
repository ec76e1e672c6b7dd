"""``agentrl eval RUN_DIR``: evaluate a trained run in context on held-out tasks.

A thin layer over :func:`agentrl.evaluate.run.evaluate_run`, which reads the
run directory written by :func:`agentrl.train.fit` (config, task split,
latest checkpoint) and writes ``RUN_DIR/eval/results.{json,md}`` and plots.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agentrl.cliargs import check_output_path, nonnegative_int, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, help="training run directory")
    parser.add_argument(
        "--episodes", type=positive_int, default=None, help="episodes/task"
    )
    parser.add_argument(
        "--tasks", type=positive_int, default=None, help="held-out tasks"
    )
    parser.add_argument(
        "--seed", type=nonnegative_int, default=None, help="evaluation seed"
    )
    parser.add_argument("--out", type=Path, default=None, help="default RUN_DIR/eval")
    parser.add_argument(
        "--baselines",
        default=None,
        help="comma-separated (default: random, oracle, UCB/Thompson on bandits, "
        "the data's source algorithm)",
    )
    parser.add_argument("--greedy", action="store_true", help="argmax actions")
    parser.add_argument(
        "--split",
        choices=("test", "validation"),
        default="test",
        help="held-out split to evaluate on (choose settings on validation)",
    )
    parser.add_argument(
        "--control",
        choices=("zero_rewards", "shuffle_rewards", "empty_context"),
        default=None,
        help="also evaluate the model under this in-context-learning control",
    )
    parser.add_argument(
        "--step", type=nonnegative_int, default=None, help="checkpoint step"
    )


def run(args: argparse.Namespace) -> int:
    baselines = (
        None
        if args.baselines is None
        else [b.strip() for b in args.baselines.split(",") if b.strip()]
    )
    check_output_path(args.out, "--out")
    from agentrl.evaluate.run import evaluate_run

    paths = evaluate_run(
        args.run_dir,
        num_episodes=args.episodes,
        num_tasks=args.tasks,
        seed=args.seed,
        out_dir=args.out,
        baselines=baselines,
        greedy=args.greedy or None,
        tasks=args.split,
        control=args.control,
        step=args.step,
    )
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0
