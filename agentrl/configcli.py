"""A config's command line, generated from its dataclasses by tyro.

:func:`parse` turns ``["--train.lr", "1e-3", "--model.moe_layers", "0", "1"]``
into a new config; :func:`help_text` is what ``agentrl train EXP --help``
prints. Both build a *view* of the config with tyro: one flag per leaf field,
typed by the field's annotation (``int | None``, ``tuple[int, ...]``,
``bool``), its default the config's current value (the preset's) and its
help the field's documentation (the ``Attributes:`` section of its class
docstring, or a ``#:`` comment above it). tyro converts the text to typed
values; :func:`agentrl.configtools.override` then applies them, so a value
is validated by the dataclasses exactly as from Python, and every refusal is
a :class:`~agentrl.configtools.ConfigError` naming the field.

Beyond tyro's own flags, kept from the earlier hand-written parser:

- a field may be named by its unique leaf name (``--lr`` for ``--train.lr``),
  with ``-`` or ``_``;
- ``--algo NAME`` (or ``--algo.base NAME``) swaps the algorithm for that
  one (keeping the values set for the fields both share:
  :func:`agentrl.configtools.carry_shared_fields`) before its fields are
  parsed, so ``--algo dt --algo.target_return 5`` works;
- ``(key, value)`` pair fields (``data.env_args``, ``data.source_args``)
  take ``KEY=VALUE`` items (``--data.source_args explore_fraction=0.3
  learning_rate=0.5``).

Adding a field to a config dataclass adds its flag; nothing here changes.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import inspect
import io
import re
import textwrap
import typing
from typing import Annotated, Any

import agentrl.configtools as configtools
from agentrl.configtools import ConfigError

# ----------------------------------------------------------- field docs


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """``{field: help}`` from ``cls``'s docstring and source comments.

    Read from the ``Attributes:`` (or ``Args:``) section of the class
    docstring, Google style, where one entry may document several fields
    (``num_layers, d_model: transformer shape``), and from ``#:`` comments
    just above a field or a ``#`` comment after it. Base classes' docs are
    inherited.
    """
    out: dict[str, str] = {}
    for base in reversed(cls.__mro__[1:]):
        if dataclasses.is_dataclass(base):
            out.update(field_docs(base))
    out.update(_docstring_attributes(inspect.getdoc(cls) or ""))
    out.update(_source_comments(cls))
    return out


_ENTRY = re.compile(r"^([A-Za-z_][\w]*(?:\s*,\s*[A-Za-z_]\w*)*)\s*:\s*(.*)$")


def _docstring_attributes(doc: str) -> dict[str, str]:
    out: dict[str, str] = {}
    lines = doc.splitlines()
    start = next(
        (
            i + 1
            for i, line in enumerate(lines)
            if line.strip() in ("Attributes:", "Args:")
        ),
        None,
    )
    if start is None:
        return out
    body = []
    for line in lines[start:]:
        if line.strip() and not line.startswith((" ", "\t")):
            break  # the section ends at the next unindented line
        body.append(line)
    body = textwrap.dedent("\n".join(body)).splitlines()
    names: list[str] = []
    for line in body:
        match = _ENTRY.match(line) if line and not line[0].isspace() else None
        if match:
            names = [n.strip() for n in match.group(1).split(",")]
            for name in names:
                out[name] = match.group(2).strip()
        elif names and line.strip():
            for name in names:
                out[name] = f"{out[name]} {line.strip()}".strip()
    return out


def _source_comments(cls: type) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    out: dict[str, str] = {}
    pending: list[str] = []
    field = re.compile(r"^    ([A-Za-z_]\w*)\s*:[^=]*(?:=.*)?$")
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        code, _, comment = line.partition("  # ")
        match = field.match(code.rstrip())
        if match and "ClassVar" not in code:
            text = " ".join(pending) or comment.strip()
            if text:
                out[match.group(1)] = text
        pending = []
    return out


# ------------------------------------------------------------- the view


def _parse_bool(text: str) -> bool:
    value = {"true": True, "false": False}.get(text.strip().lower())
    if value is None:
        raise ValueError(f"expected true or false, got {text!r}")
    return value


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text  # a bare word: a string (start=corner)


def parse_pairs(tokens: list[str]) -> tuple[tuple[str, Any], ...]:
    """``["size=9", "start=corner"]`` -> ``(("size", 9), ("start", "corner"))``.

    Values are Python literals where they parse as one, else strings.
    """
    pairs = []
    for token in tokens:
        if "=" not in token:
            raise ValueError(f"expected KEY=VALUE items, got {token!r}")
        key, raw = token.split("=", 1)
        pairs.append((key.strip(), _literal(raw)))
    return tuple(pairs)


def _pairs_spec():
    from tyro.constructors import PrimitiveConstructorSpec

    return PrimitiveConstructorSpec(
        nargs="*",
        metavar="KEY=VALUE ...",
        instance_from_str=parse_pairs,
        is_instance=lambda x: isinstance(x, tuple),
        str_from_instance=lambda pairs: [f"{k}={v!r}" for k, v in pairs],
    )


def _bool_spec():
    from tyro.constructors import PrimitiveConstructorSpec

    return PrimitiveConstructorSpec(
        nargs=1,
        metavar="{true,false}",
        instance_from_str=lambda args: _parse_bool(args[0]),
        is_instance=lambda x: isinstance(x, bool),
        str_from_instance=lambda x: ["true" if x else "false"],
    )


def _is_pairs(hint: Any) -> bool:
    """``tuple[tuple[str, Any], ...]``: the (key, value) settings fields."""
    args = typing.get_args(hint)
    return (
        typing.get_origin(hint) is tuple
        and len(args) == 2
        and args[1] is Ellipsis
        and typing.get_origin(args[0]) is tuple
    )


def _view_hint(hint: Any) -> Any:
    """The annotation tyro parses for a config field's ``hint``."""
    if hint is bool:
        import tyro

        return Annotated[bool, _bool_spec(), tyro.conf.FlagConversionOff]
    if _is_pairs(hint):
        return Annotated[tuple, _pairs_spec()]
    return hint


def _extra_help(config: Any, path: str) -> str:
    """What a pair field accepts: the registered env's or source's settings."""
    try:
        if path.endswith("source_args"):
            from agentrl.sources.registry import SOURCES

            source = SOURCES.get(getattr(config, "source", ""), None)
            if source is not None and source.defaults:
                items = ", ".join(f"{k}={v!r}" for k, v in source.defaults.items())
                return f" Settings of source {source.name!r} (defaults): {items}."
        if path.endswith("env_args"):
            from agentrl.envs.registry import overrides_of

            items = overrides_of(getattr(config, "env", ""))
            if items:
                shown = ", ".join(f"{k}={v!r}" for k, v in items.items())
                return f" Arguments of env {config.env!r} (defaults): {shown}."
    except Exception:  # help is best effort; parsing does not depend on it
        return ""
    return ""


def _algorithm_names(path: str) -> str:
    try:
        import agentrl.algos as algos

        return f" --{path} NAME, NAME one of: {', '.join(algos.names())}."
    except Exception:  # help is best effort
        return ""


def _clean(text: str) -> str | None:
    """Help text without reST markup (double backquotes)."""
    return text.replace("``", "`").strip() or None


#: the help of a field whose shown value the run derives (``derived`` below)
DERIVED_NOTE = " [derived for this experiment from its environment and algorithm]"


def view_type(
    config: Any,
    only: set[str] | None = None,
    prefix: str = "",
    derived: frozenset[str] = frozenset(),
) -> type:
    """A plain dataclass mirroring ``config``'s tree, for tyro.

    Nested configs (and the concrete algorithm, whatever the annotation
    says) become nested views; each leaf has its annotation (see
    :func:`_view_hint`), the config's value as default and its docs as help.
    ``only``: the dotted paths to include (parsing needs only the fields
    given; ``--help`` shows them all). ``derived``: dotted paths whose help
    says the value is derived (:data:`DERIVED_NOTE`).
    """
    import tyro

    cls = type(config)
    hints = configtools._hints(cls)
    docs = field_docs(cls)
    fields = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        path = prefix + f.name
        if only is not None and not any(
            p == path or p.startswith(path + ".") for p in only
        ):
            continue
        help_ = docs.get(f.name, "")
        if configtools._is_config(value):
            sub = view_type(value, only, path + ".", derived)
            if configtools._polymorphic(value):
                help_ = f"{help_} Now {type(value).__name__}: {value.description}."
                help_ += _algorithm_names(f.name)
            fields.append(
                (
                    f.name,
                    Annotated[sub, tyro.conf.arg(help=_clean(help_))],
                    dataclasses.field(default_factory=sub),
                )
            )
            continue
        hint = hints.get(f.name, Any)
        help_ += _extra_help(config, f.name)
        if f.metadata.get(configtools.TRACED):
            help_ += " [traced: a sweep over it is one program]"
        if path in derived:
            help_ += DERIVED_NOTE
        fields.append(
            (
                f.name,
                Annotated[_view_hint(hint), tyro.conf.arg(help=_clean(help_))],
                dataclasses.field(default=value),
            )
        )
    doc = (inspect.getdoc(cls) or "").split("\n\n", 1)[0]
    view = dataclasses.make_dataclass(cls.__name__, fields)
    view.__doc__ = doc
    return view


# ------------------------------------------------------------- parsing


def _flag_key(token: str) -> tuple[str, str | None]:
    """``"--train.log-every=5"`` -> ``("train.log_every", "5")``."""
    name, eq, value = token[2:].partition("=")
    return name.replace("-", "_"), (value if eq else None)


def _scan(tokens: list[str]) -> list[tuple[str, list[str]]]:
    """``[(key as given, [value tokens]), ...]``.

    A value token is any token up to the next ``--flag``; a lone number like
    ``-1`` is a value.
    """
    out: list[tuple[str, list[str]]] = []
    for token in tokens:
        if token.startswith("--") and len(token) > 2:
            key, value = _flag_key(token)
            out.append((key, [] if value is None else [value]))
        elif not out:
            raise ConfigError(f"expected --field value, got {token!r}")
        else:
            out[-1][1].append(token)
    return out


def _resolved(config: Any, scanned: list[tuple[str, list[str]]]):
    out: dict[str, list[str]] = {}
    for key, values in scanned:
        path = configtools.resolve(config, key)
        if path in out:
            raise ConfigError(f"field {path} is given twice")
        out[path] = values
    return out


def _tyro_error(event: Any, hints: dict[str, Any], given: dict[str, list[str]]):
    """Raise the :class:`ConfigError` for a tyro parse failure ``event``."""
    from tyro import _errors

    def path_of(argument: Any) -> str:
        try:
            flag = argument.lowered.name_or_flags[-1]
        except Exception:
            return "a field"
        return flag.lstrip("-").replace("-", "_")

    def expected(path: str) -> str:
        hint = hints.get(path)
        if hint is bool:
            return "a bool (true/false)"
        if hint is not None and _is_pairs(hint):
            return "KEY=VALUE items"
        return f"of type {configtools._type_name(hint)}" if hint else "valid"

    if isinstance(event, _errors.UnrecognizedArgs):
        raise ConfigError(f"expected --field value, got {' '.join(event.tokens)!r}")
    if isinstance(event, _errors.BadValue):
        path = path_of(event.argument)
        if event.offending_value is None:
            raise ConfigError(f"missing value for --{path}")
        raise ConfigError(f"{path}: unexpected value {event.offending_value!r}")
    if isinstance(event, _errors.InvalidChoice):
        path = path_of(event.argument)
        raise ConfigError(f"{path} must be {expected(path)}, got {event.value!r}")
    if isinstance(event, _errors.InstantiationFailure):
        path = path_of(event.argument)
        text = " ".join(given.get(path, [])) or "?"
        raise ConfigError(f"{path} must be {expected(path)}, got {text!r}")
    raise ConfigError(f"bad command line: {type(event).__name__}")


def _swapped(config: Any, scanned: list[tuple[str, list[str]]]):
    """``({path: node}, view)`` of the ``--algo NAME`` tokens, outermost first:
    the fields named after one are the named algorithm's, and a node only
    the swapped one has is swapped too (``--algo t2mir_ad --algo.base dt``
    on an AD preset). The view is unvalidated until every change is in
    (``--algo dt --model.obs_encoding table``)."""
    values = dict(scanned)
    swapped, view = {}, config
    for key in sorted(values, key=lambda k: k.count(".")):
        if key not in configtools.node_paths(view):
            continue
        if [k for k, _ in scanned].count(key) > 1:
            raise ConfigError(f"field {key} is given twice")
        if len(values[key]) != 1:
            raise ConfigError(f"--{key} takes one algorithm name, got {values[key]}")
        changes, view = configtools.swapped_view(view, {key: values[key][0]})
        swapped.update(changes)
    return swapped, view


def parse(config: Any, tokens: list[str], prog: str = "agentrl") -> Any:
    """``config`` with the ``--field value`` ``tokens`` applied.

    Raises :class:`ConfigError` naming the field for an unknown or ambiguous
    field, a value tyro cannot convert to the field's type, or one the
    config refuses (its dataclass checks, via
    :func:`agentrl.configtools.override`).
    """
    scanned = _scan(list(tokens))
    swapped, view = _swapped(config, scanned)
    given = _resolved(view, [s for s in scanned if s[0] not in swapped])
    if not given:
        return configtools.override(config, swapped)
    hints = configtools.field_types(view)
    argv: list[str] = []
    for path, values in given.items():
        hint = hints.get(path)
        if (
            len(values) == 1
            and values[0].strip().lower() in ("none", "null")
            and configtools.conforms(None, hint)
        ):
            values = ["None"]  # as the earlier parser took none/null
        argv += [f"--{path}", *values]
    parsed = _run_tyro(view, argv, prog, hints, given)
    changes = dict(swapped)
    for path in given:
        value = parsed
        for part in path.split("."):
            value = getattr(value, part)
        changes[path] = value
    return configtools.override(config, changes)


def _run_tyro(config, argv, prog, hints, given):
    import tyro

    from agentrl.cliargs import refusing

    def hook(event):
        _tyro_error(event, hints, given)

    with refusing(hook, prog):
        return tyro.cli(
            view_type(config, only=set(given)),
            args=argv,
            prog=prog,
            use_underscores=True,
            console_outputs=False,
        )


def help_text(
    config: Any,
    prog: str,
    description: str | None = None,
    derived: frozenset[str] = frozenset(),
) -> str:
    """tyro's help for ``config``'s fields (defaults: ``config``'s values).

    Pass the config with its derived fields filled (what the run will use)
    and their dotted paths as ``derived``, so ``--help`` shows the values
    the run resolves, each marked as derived.
    """
    import tyro

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        tyro.cli(
            view_type(config, derived=frozenset(derived)),
            args=["--help"],
            prog=prog,
            description=description,
            use_underscores=True,
        )
    return out.getvalue()


__all__ = ["field_docs", "help_text", "parse", "parse_pairs", "view_type"]
