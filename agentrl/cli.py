"""The ``agentrl`` command line: a thin layer over the library.

``agentrl <command> [args]``; each command lives in its own module, which
defines ``add_arguments(parser)`` and ``run(args) -> int``. Modules are
imported only when their command runs, so ``agentrl --help`` and
``agentrl --version`` are instant.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from agentrl import __version__

#: command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("agentrl.demo", "run the main end-to-end job at smoke size"),
    "envs": ("agentrl.envs.cli", "list task families and their oracle/random returns"),
    "data": ("agentrl.data.cli", "generate and inspect learning-history datasets"),
    "train": ("agentrl.train.cli", "train an in-context learner from an experiment"),
    "eval": ("agentrl.evaluate.cli", "evaluate a run in context on held-out tasks"),
    "sweep": ("agentrl.sweep.cli", "vectorized sweeps over seeds and settings"),
    "bench": ("agentrl.benchmarks.cli", "run a benchmark; without a name, list them"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentrl", description="In-context RL research in JAX."
    )
    parser.add_argument("--version", action="version", version=f"agentrl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)
    if command is not None and command not in COMMANDS:
        build_parser().error(
            f"unknown command {command!r}; choose from {', '.join(COMMANDS)}"
        )
    parser = build_parser(command)
    args, extra = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    module = importlib.import_module(COMMANDS[args.command][0])
    # Commands that take config overrides (--field value) declare it.
    if extra and not getattr(module, "ACCEPTS_OVERRIDES", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.overrides = extra
    try:
        return int(module.run(args) or 0)
    except (ValueError, FileNotFoundError) as err:
        # Bad input: a one-line message naming the field, no traceback.
        print(f"agentrl {args.command}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        # A full disk or an unwritable directory (agentrl.safeio.StorageError
        # names the path and what was kept): one line, no traceback.
        print(f"agentrl {args.command}: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
