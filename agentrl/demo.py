"""``make demo`` / ``agentrl demo``: the main job at smoke size.

Until the training pipeline lands this prints, for every registered task
family, the mean one-episode return of a random and an oracle policy.
"""

from __future__ import annotations

import argparse
import time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tasks", type=int, default=256)


def run(args: argparse.Namespace) -> int:
    from agentrl.envs.report import returns_table

    start = time.time()
    print(returns_table(num_tasks=args.tasks))
    print(f"\n(done in {time.time() - start:.1f}s)")
    return 0
