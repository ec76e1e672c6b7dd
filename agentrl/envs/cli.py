"""``agentrl envs``: list task families with their random and oracle returns."""

from __future__ import annotations

import argparse

from agentrl.cliargs import positive_int
from agentrl.envs.registry import registered


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="*", help="families (default: all)")
    parser.add_argument(
        "--tasks", type=positive_int, default=256, help="tasks per family"
    )


def run(args: argparse.Namespace) -> int:
    from agentrl.envs.report import returns_table

    unknown = sorted(set(args.names) - set(registered()))
    if unknown:
        raise ValueError(f"unknown families {unknown}; registered: {registered()}")
    print(returns_table(args.names or None, args.tasks))
    return 0
