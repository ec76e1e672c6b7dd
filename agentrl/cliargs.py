"""Command arguments as dataclasses: parsed by tyro, refused with one clear line.

A command's options are one dataclass (``agentrl.evaluate.cli.Args`` ...):
each field is a flag (``run_dir`` -> ``--run-dir``), typed by its
annotation, with its default and the help text written as a docstring under
it. Adding an option is adding a field. :func:`parse` builds the command
line with tyro and turns every refusal into a :class:`ConfigError` in
argparse's words (``argument --episodes: must be an integer >= 1, got '0'``)
that the CLI prints on one line with exit code 2::

    @dataclasses.dataclass
    class Args:
        run_dir: Positional[Path]
        \"\"\"training run directory\"\"\"
        episodes: PositiveInt | None = None
        \"\"\"episodes per task (default: the run's eval.num_episodes)\"\"\"

    args = parse(Args, ["runs/x", "--episodes", "20"], prog="agentrl eval")

Checked value types: :data:`PositiveInt`, :data:`NonNegativeInt`,
:data:`UnitFraction`, :data:`KeyValue` (``KEY=VALUE``). The plain argparse
types (:func:`positive_int` ...) stay for the benchmarks' own parsers, and
:func:`check_output_path` refuses an output path that cannot be created.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

import tyro
from tyro.constructors import PrimitiveConstructorSpec

from agentrl.checks import is_int
from agentrl.configtools import ConfigError

T = TypeVar("T")


def _int(text: str, minimum: int) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise argparse.ArgumentTypeError(
            f"must be an integer >= {minimum}, got {text!r}"
        )
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _int(text, 1)


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0 (seeds, counts that may be zero)."""
    return _int(text, 0)


def unit_fraction(text: str) -> float:
    """argparse type: a number strictly between 0 and 1 (a split fraction)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}")
    return value


def key_value(text: str) -> tuple[str, Any]:
    """``"size=9"`` -> ``("size", 9)``; the value a Python literal or a string."""
    import ast

    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = raw  # a bare string, e.g. start=corner
    return key.strip(), value


def _convert(convert, text: str) -> Any:
    try:
        return convert(text)
    except argparse.ArgumentTypeError as err:  # tyro reports a ValueError
        raise ValueError(str(err)) from None


def _checked(convert, metavar: str, is_instance) -> PrimitiveConstructorSpec:
    """A tyro constructor from an argparse type (its error becomes tyro's)."""
    return PrimitiveConstructorSpec(
        nargs=1,
        metavar=metavar,
        instance_from_str=lambda args: _convert(convert, args[0]),
        is_instance=is_instance,
        str_from_instance=lambda x: [str(x)],
    )


#: an integer >= 1
PositiveInt = Annotated[int, _checked(positive_int, "INT>=1", is_int)]
#: an integer >= 0
NonNegativeInt = Annotated[int, _checked(nonnegative_int, "INT>=0", is_int)]
#: a number in (0, 1)
UnitFraction = Annotated[
    float, _checked(unit_fraction, "(0,1)", lambda x: isinstance(x, float))
]
#: ``KEY=VALUE``: a ``(key, value)`` pair, the value a Python literal or a str
KeyValue = Annotated[
    tuple[str, Any],
    PrimitiveConstructorSpec(
        nargs=1,
        metavar="KEY=VALUE",
        instance_from_str=lambda args: _convert(key_value, args[0]),
        is_instance=lambda x: isinstance(x, tuple),
        str_from_instance=lambda kv: [f"{kv[0]}={kv[1]!r}"],
    ),
]
#: a positional argument (``tyro.conf.Positional``)
Positional = tyro.conf.Positional
#: a repeatable flag: ``--env-arg a=1 --env-arg b=2`` (``tyro.conf.UseAppendAction``)
Repeatable = tyro.conf.UseAppendAction


def default_is(text: str) -> Any:
    """Marker for an option whose ``None`` stands for another value: its
    ``--help`` says ``(default: text)`` instead of ``(default: None)``.

    ``episodes: Annotated[PositiveInt | None, default_is("the run's
    eval.num_episodes")] = None``.
    """
    return tyro.conf.arg(help_behavior_hint=f"(default: {text})")


def check_output_path(path: str | Path | None, argument: str) -> Path | None:
    """``path`` as a ``Path`` if a directory can be made there, else ``ConfigError``.

    Refused: an empty path, an existing file (not a directory), and a path
    whose existing ancestor is a file. Permissions and free space are the
    writer's to report (it names the path and what was kept).
    """
    if path is None:
        return None
    if not str(path).strip():
        raise ConfigError(f"{argument} must be a directory path, got {str(path)!r}")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{argument} {path} is a file, not a directory")
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(
                    f"{argument} {path} cannot be created: {parent} is a file, "
                    "not a directory"
                )
            break
    return path


# ------------------------------------------------------------ parsing


def _flag(argument: Any) -> str:
    """The option's flag; a positional's metavar (``RUN_DIR``), as ``--help``
    names it."""
    try:
        name = argument.lowered.name_or_flags[-1]
        if not name.startswith("-") and argument.lowered.metavar:
            return argument.lowered.metavar
        return name
    except Exception:  # an internal tyro type changed: still one clear line
        return "an argument"


def _refuse(event: Any) -> None:
    """Raise the :class:`ConfigError` for tyro's parse-failure ``event``."""
    from tyro import _errors

    if isinstance(event, _errors.UnrecognizedArgs):
        raise ConfigError(f"unrecognized arguments: {' '.join(event.tokens)}")
    if isinstance(event, _errors.MissingArgs):
        names = [_flag(a.arg) for a in event.missing_arguments]
        raise ConfigError(f"the following arguments are required: {', '.join(names)}")
    if isinstance(event, _errors.MissingSubcommand):
        choices = ", ".join(event.subcommand_spec.parser_from_name)
        if event.found_token is not None:
            raise ConfigError(
                f"invalid choice: {event.found_token!r}; choose a subcommand: {choices}"
            )
        raise ConfigError(f"choose a subcommand: {choices} (see --help)")
    if isinstance(event, _errors.BadValue):
        flag = _flag(event.argument)
        if event.offending_value is None:
            raise ConfigError(f"argument {flag}: expected a value")
        raise ConfigError(
            f"argument {flag}: unexpected value {event.offending_value!r}"
        )
    if isinstance(event, _errors.InvalidChoice):
        raise ConfigError(
            f"argument {_flag(event.argument)}: invalid choice: {event.value!r} "
            f"(choose from {', '.join(event.choices)})"
        )
    if isinstance(event, _errors.InstantiationFailure):
        flag = _flag(event.argument) if event.argument is not None else "a value"
        message = _reason(str(event.message))
        raise ConfigError(f"argument {flag}: {message}")
    raise ConfigError(f"bad command line ({type(event).__name__})")


def _reason(message: str) -> str:
    """The reason in tyro's message; for ``X | None``, the one of ``X``."""
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
    reasons = []
    for ln in lines:
        if ln.startswith("- ") and "NoneType" not in ln:
            cut = max(ln.rfind("]: "), ln.rfind(">: "))
            if cut >= 0:
                reasons.append(ln[cut + 3 :])
    return reasons[-1] if reasons else lines[0] if lines else "bad value"


def parse(
    cls: type[T] | Any,
    argv: Sequence[str],
    prog: str,
    *,
    unknown: bool = False,
) -> T | tuple[T, list[str]]:
    """``cls`` (a dataclass, or a union of them for subcommands) from ``argv``.

    ``unknown``: return ``(args, unrecognized tokens)`` instead of refusing
    them (``agentrl train`` passes them on as config fields). ``-h/--help``
    prints tyro's help and raises ``SystemExit(0)``.
    """
    if any(a in ("-h", "--help") for a in argv):
        # tyro prints the help of the (sub)command asked and exits 0
        tyro.cli(cls, args=list(argv), prog=prog, return_unknown_args=unknown)
    with refusing(_refuse, prog):
        return tyro.cli(
            cls,
            args=list(argv),
            prog=prog,
            return_unknown_args=unknown,
            console_outputs=False,
        )


@contextlib.contextmanager
def refusing(hook, prog: str):
    """Run tyro with ``hook`` turning its parse failures into ``ConfigError``.

    The hook is tyro's ``_errors.on_parse_error`` (private; tyro is pinned to
    the tested minor series for it). Should a tyro release lack it, a
    failure is still one line and exit code 2, only less specific.
    """
    try:
        from tyro._errors import on_parse_error
    except ImportError:  # pragma: no cover - depends on the tyro release
        on_parse_error = None
    context = on_parse_error(hook) if on_parse_error else contextlib.nullcontext()
    try:
        with context:
            yield
    except SystemExit as exit_info:
        if exit_info.code in (0, None):
            raise
        raise ConfigError(f"invalid arguments (see {prog} --help)") from None


def help_text(cls: Any, prog: str, description: str | None = None) -> str:
    """tyro's ``--help`` for ``cls`` as a string."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        tyro.cli(cls, args=["--help"], prog=prog, description=description)
    return out.getvalue()
