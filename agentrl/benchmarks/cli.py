"""``agentrl bench NAME [args...]``: run one benchmark; without NAME, list them.

The arguments after NAME go to the benchmark's own ``main(argv)``, so
``agentrl bench NAME --help`` shows its options. Benchmarks are found as the
modules of :mod:`agentrl.benchmarks`; listing reads their docstrings without
importing them (importing one pulls in JAX and its models).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import pkgutil
import sys
from pathlib import Path

from agentrl import benchmarks
from agentrl.benchmarks import RESULTS_ENV
from agentrl.cliargs import check_output_path

#: Modules of the package that are not benchmarks.
NOT_BENCHMARKS = frozenset({"cli", "common"})


def available() -> dict[str, str]:
    """``{name: first docstring line}`` of every benchmark, sorted by name."""
    out = {}
    for info in sorted(pkgutil.iter_modules(benchmarks.__path__), key=lambda i: i.name):
        if info.name in NOT_BENCHMARKS or info.name.startswith("_"):
            continue
        source = Path(info.module_finder.path, f"{info.name}.py").read_text()
        doc = ast.get_docstring(ast.parse(source)) or ""
        out[info.name] = doc.strip().split("\n", 1)[0]
    return out


def listing() -> str:
    names = available()
    width = max(map(len, names), default=0)
    lines = ["benchmarks (agentrl bench NAME [args...]; NAME --help for options):"]
    lines += [f"  {name:<{width}}  {doc}" for name, doc in names.items()]
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", metavar="NAME", help="the benchmark")
    parser.add_argument(
        "args", nargs=argparse.REMAINDER, help="arguments of the benchmark"
    )
    parser.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help=f"results folder (default ${RESULTS_ENV} or ./benchmarks/results)",
    )


def run(args: argparse.Namespace) -> int:
    if args.name not in available():
        if args.name is not None:
            print(
                f"agentrl bench: error: unknown benchmark {args.name!r}",
                file=sys.stderr,
            )
        print(listing(), file=sys.stderr if args.name is not None else sys.stdout)
        return 2
    if args.out is not None:
        check_output_path(args.out, "--out")
        # The environment, not an argument: the benchmarks (and the workers
        # some of them start) all ask common.results_dir().
        os.environ[RESULTS_ENV] = args.out
    module = importlib.import_module(f"{benchmarks.__name__}.{args.name}")
    return int(module.main(list(args.args)) or 0)
