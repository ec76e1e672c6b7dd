"""The ``agentrl`` command line: a thin layer over the library.

``agentrl [--debug] [--import MODULE ...] <command> [args]``; each command
lives in its own module
and is imported only when it runs, so ``agentrl --help`` and ``agentrl
--version`` are instant. A command module defines

- ``Args``: a dataclass of its options (see :mod:`agentrl.cliargs`; tyro
  builds the flags, types and ``--help`` from it), optionally ``parse(argv)
  -> args`` when it takes more (``train``: the experiment's config fields);
- ``run(args) -> int``.

A pass-through command (``bench``, whose benchmarks parse their own
arguments) defines ``add_arguments(parser)`` for argparse instead.

Plug-ins (:mod:`agentrl.plugins`): before any command runs, the modules of
the ``agentrl.plugins`` entry-point group and every ``--import MODULE``
(repeatable; before the command, or after it for a command that is not
pass-through) are imported, with the current directory importable, so a
task family, source, algorithm or baseline registered there works in every
command. A run records the plug-ins it used and reading it imports them.

Errors: bad input (a :class:`~agentrl.configtools.ConfigError`, or a
``ValueError`` that agentrl raised to refuse a value, a file or a directory,
and a missing file) is one line, ``agentrl <command>: error: ...``, exit code
2, no traceback; a full disk or unwritable directory one line and exit code
1; any other exception, a ``ValueError`` from inside JAX or Flax included,
keeps its traceback. ``--debug`` (anywhere on the line, or
``AGENTRL_DEBUG=1``) shows the traceback of every error.

Stops: a command that stops cleanly on SIGINT (Ctrl-C) or SIGTERM
(:mod:`agentrl.train.stop`; ``train``, ``data generate``) prints where it
stopped and the command that resumes it, and exits with ``128 + signal``:
130 for SIGINT, 143 for SIGTERM.
"""

from __future__ import annotations

import argparse
import importlib
import linecache
import os
import sys
from pathlib import Path

from agentrl.plugins import load_plugins
from agentrl.train.stop import Stopped
from agentrl.version import __version__

#: command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "agentrl.demo",
        "run Dark Room AD end to end: data, training, evaluation (its demo preset)",
    ),
    "envs": ("agentrl.envs.cli", "list task families (NAMES: random/oracle returns)"),
    "data": ("agentrl.data.cli", "generate and inspect learning-history datasets"),
    "train": ("agentrl.train.cli", "train an in-context learner from an experiment"),
    "eval": ("agentrl.evaluate.cli", "evaluate a run in context on held-out tasks"),
    "sweep": ("agentrl.sweep.cli", "vectorized sweeps over seeds and settings"),
    "reproduce": (
        "agentrl.evaluate.reproduce",
        "reproduce a paper's result: seeds, validation choice, test once",
    ),
    "bench": ("agentrl.bench", "run a benchmark; without a name, list them"),
}

#: commands whose remaining arguments belong to someone else (a benchmark)
PASS_THROUGH = frozenset({"bench"})

_PACKAGE = Path(__file__).resolve().parent


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentrl",
        description="In-context RL research in JAX. "
        "`agentrl COMMAND --help` shows a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"agentrl {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of every error"
    )
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        metavar="MODULE",
        help="import MODULE (a dotted module name; the current directory is "
        "importable) before the command: a plug-in that registers task "
        "families, sources, algorithms or baselines; repeatable. Plug-ins "
        "installed under the entry-point group 'agentrl.plugins' are "
        "imported too",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, description=help_text)
    return parser


def is_input_error(err: BaseException) -> bool:
    """Whether ``err`` refuses the user's input (one line) or is a bug (traceback).

    Input errors: :class:`~agentrl.configtools.ConfigError`, a missing file,
    and a ``ValueError`` raised by a ``raise`` statement in agentrl's own
    code (its checks of values, datasets, run directories; they name what
    is wrong). A ``ValueError`` raised inside JAX, Flax or NumPy is not one:
    its innermost frame is theirs (or, with JAX's traceback filtering, an
    agentrl line that calls them, not a ``raise``).
    """
    from agentrl.configtools import ConfigError

    if isinstance(err, ConfigError | FileNotFoundError):
        return True
    if not isinstance(err, ValueError):
        return False
    tb = err.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    path = Path(tb.tb_frame.f_code.co_filename)
    try:
        path.resolve().relative_to(_PACKAGE)
    except ValueError:
        return False
    line = linecache.getline(str(path), tb.tb_lineno).strip()
    return line.startswith("raise")


def _parse_bench(module, rest: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="agentrl bench", description=COMMANDS["bench"][1]
    )
    module.add_arguments(parser)
    return parser.parse_args(rest)


def _take_imports(args: list[str]) -> tuple[list[str], list[str]]:
    """``(args without their --import options, the modules those name)``."""
    rest, modules = [], []
    i = 0
    while i < len(args):
        if args[i] == "--import":
            if i + 1 == len(args):
                build_parser().error("argument --import: expected one MODULE")
            modules.append(args[i + 1])
            i += 2
            continue
        if args[i].startswith("--import="):
            modules.append(args[i].partition("=")[2])
        else:
            rest.append(args[i])
        i += 1
    return rest, modules


def _first_positional(argv: list[str]) -> int | None:
    """Index of the command: the first argument that is no option (or its value)."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] == "--import" else 1
    return i if i < len(argv) else None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = os.environ.get("AGENTRL_DEBUG", "") not in ("", "0")
    first = _first_positional(argv)
    head, imports = _take_imports(argv if first is None else argv[:first])
    if "--debug" in head:
        debug = True
        head = [a for a in head if a != "--debug"]
    if head:  # options before the command: --help, --version exit; a typo errs
        build_parser().parse_args(head)
    if first is None:
        build_parser().print_help()
        return 2
    command, rest = argv[first], argv[first + 1 :]
    if command not in COMMANDS:
        build_parser().error(
            f"unknown command {command!r}; choose from {', '.join(COMMANDS)}"
        )
    if command not in PASS_THROUGH and "--debug" in rest:
        debug = True
        rest = [a for a in rest if a != "--debug"]
    if command not in PASS_THROUGH:
        rest, more = _take_imports(rest)
        imports += more
    prog = f"agentrl {command}"
    try:
        # before any JAX computation starts XLA's threads (host_memory says why)
        from agentrl.host_memory import configure_malloc

        configure_malloc()
        load_plugins(imports)  # entry points, then --import MODULE
        module = importlib.import_module(COMMANDS[command][0])
        if command in PASS_THROUGH:
            args = _parse_bench(module, rest)
        elif hasattr(module, "parse"):
            args = module.parse(rest)
        else:
            import agentrl.cliargs as cliargs

            args = cliargs.parse(module.Args, rest, prog)
        return int(module.run(args) or 0)
    except Stopped as stop:  # SIGINT/SIGTERM: stopped cleanly
        print(f"{prog}: {stop}", file=sys.stderr)
        print(f"{stop.rerun}: {stop.command(argv)}", file=sys.stderr)
        return stop.exit_code
    except Exception as err:
        if debug:
            raise
        if is_input_error(err):
            print(f"{prog}: error: {err}", file=sys.stderr)
            return 2
        if isinstance(err, OSError):
            # A full disk or an unwritable directory (agentrl.safeio.StorageError
            # names the path and what was kept): one line, no traceback.
            print(f"{prog}: error: {err}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    raise SystemExit(main())
