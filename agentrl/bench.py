"""``agentrl bench NAME [args...]``: run one benchmark; without NAME, list them.

Benchmarks are scripts of the project, not of the package: ``NAME`` is
``benchmarks/NAME.py`` in the working directory or the nearest directory
above it that has a ``benchmarks/`` folder, or the path of a benchmark's
``.py`` file (:mod:`agentrl.project`). A benchmark is a file there that
defines ``main(argv)``; the files that do not (``common.py`` and the other
helpers) are modules the benchmarks import by name. The arguments after
NAME go to the benchmark's ``main(argv)``, so ``agentrl bench NAME --help``
shows its options. Listing reads the docstrings without importing anything
(importing a benchmark pulls in JAX and its models).
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
from pathlib import Path

from agentrl.cliargs import check_output_path
from agentrl.project import RESULTS_ENV, find_folder, is_path, load, locate

#: the folder benchmarks are looked up in, by name
FOLDER = "benchmarks"


def _benchmark_doc(path: Path) -> str | None:
    """The first docstring line of ``path`` if it defines ``main``, else ``None``."""
    tree = ast.parse(path.read_text())
    if not any(
        isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body
    ):
        return None
    return (ast.get_docstring(tree) or "").strip().split("\n", 1)[0]


def available(folder: Path | None = None) -> dict[str, str]:
    """``{name: first docstring line}`` of every benchmark in ``folder``
    (default: the nearest ``benchmarks/``), sorted by name."""
    folder = find_folder(FOLDER) if folder is None else folder
    if folder is None:
        return {}
    out = {}
    for path in sorted(folder.glob("*.py")):
        if not path.stem.startswith("_"):
            doc = _benchmark_doc(path)
            if doc is not None:
                out[path.stem] = doc
    return out


def _no_folder() -> str:
    return (
        f"no {FOLDER}/ folder in {Path.cwd()} or above it: run agentrl bench "
        "from a checkout that has one, or give the path of a benchmark's .py file"
    )


def listing() -> str:
    """The benchmarks of the nearest ``benchmarks/`` folder, one a line."""
    folder = find_folder(FOLDER)
    if folder is None:
        return _no_folder()
    names = available(folder)
    width = max(map(len, names), default=0)
    lines = [f"benchmarks in {folder} (agentrl bench NAME [args...]; NAME --help):"]
    lines += [f"  {name:<{width}}  {doc}" for name, doc in names.items()]
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "name", nargs="?", metavar="NAME", help="the benchmark (a name or a path)"
    )
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
    if args.name is None:  # the listing asked for: an error only without one
        if find_folder(FOLDER) is None:
            print(f"agentrl bench: error: {_no_folder()}", file=sys.stderr)
            return 2
        print(listing())
        return 0
    if not is_path(args.name) and args.name not in available():
        print(f"agentrl bench: error: unknown benchmark {args.name!r}", file=sys.stderr)
        print(listing(), file=sys.stderr)
        return 2
    path = locate(args.name, FOLDER, "benchmark")
    if _benchmark_doc(path) is None:
        raise ValueError(f"benchmark {path} defines no main(argv)")
    if args.out is not None:
        check_output_path(args.out, "--out")
        # The environment, not an argument: the benchmarks (and the workers
        # some of them start) all ask agentrl.project.results_dir().
        os.environ[RESULTS_ENV] = args.out
    return int(load(path).main(list(args.args)) or 0)
