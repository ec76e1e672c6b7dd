"""Frozen-dataclass configs: dotted overrides from the command line or Python.

``override(config, {"train.lr": "3e-4", "layers": 2})`` returns a new config.
A key is a dotted path through nested dataclasses (``train.lr``) or a bare
field name that is unique in the tree (``lr``). String values are parsed to
the type of the field they replace. Unknown or ambiguous fields and values of
the wrong type raise ``ValueError`` naming the field and what is allowed, so
a bad command line fails before anything compiles.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any


def field_paths(config: Any, prefix: str = "") -> dict[str, Any]:
    """``{"train.lr": 3e-4, ...}`` for every leaf field of a nested dataclass."""
    out = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        path = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out.update(field_paths(value, path + "."))
        else:
            out[path] = value
    return out


def resolve(config: Any, key: str) -> str:
    """The full dotted path of ``key`` (a path or a unique leaf name)."""
    paths = field_paths(config)
    if key in paths:
        return key
    matches = [p for p in paths if p.split(".")[-1] == key or p.endswith("." + key)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise ValueError(f"field {key!r} is ambiguous: use one of {matches}")
    raise ValueError(
        f"unknown config field {key!r}; valid fields: {', '.join(sorted(paths))}"
    )


def parse_value(path: str, text: Any, current: Any) -> Any:
    """Parse ``text`` to the type of ``current`` (the field's present value)."""
    if not isinstance(text, str):
        value = text
    elif isinstance(current, str):
        value = text
    else:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text
        if isinstance(current, bool) and isinstance(value, str):
            value = {"true": True, "false": False}.get(value.lower(), value)
    if isinstance(current, bool) != isinstance(value, bool) and current is not None:
        raise ValueError(f"{path} must be a bool (true/false), got {text!r}")
    if isinstance(current, float) and isinstance(value, int):
        value = float(value)
    if isinstance(current, tuple) and isinstance(value, list):
        value = tuple(value)
    if isinstance(current, tuple) and isinstance(value, int | str) and not current:
        value = (value,)
    if current is not None and not isinstance(value, type(current)):
        raise ValueError(
            f"{path} must be of type {type(current).__name__} "
            f"(like its default {current!r}), got {text!r}"
        )
    return value


def _set(config: Any, parts: list[str], value: Any) -> Any:
    head, *rest = parts
    if not rest:
        return dataclasses.replace(config, **{head: value})
    return dataclasses.replace(
        config, **{head: _set(getattr(config, head), rest, value)}
    )


def override(config: Any, overrides: dict[str, Any]) -> Any:
    """A copy of ``config`` with ``overrides`` applied (see module docstring).

    Dataclass ``__post_init__`` validation re-runs on every replaced level.
    """
    paths = field_paths(config)
    for key, text in overrides.items():
        path = resolve(config, key)
        value = parse_value(path, text, paths[path])
        config = _set(config, path.split("."), value)
        paths = field_paths(config)
    return config


def parse_cli_overrides(tokens: list[str]) -> dict[str, str]:
    """``["--train.lr", "1e-3", "--layers=2"]`` -> ``{"train.lr": "1e-3", ...}``."""
    out: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not tok.startswith("--"):
            raise ValueError(f"expected --field value, got {tok!r}")
        if "=" in tok:
            k, v = tok[2:].split("=", 1)
            i += 1
        else:
            if i + 1 >= len(tokens):
                raise ValueError(f"missing value for {tok}")
            k, v = tok[2:], tokens[i + 1]
            i += 2
        out[k.replace("-", "_")] = v
    return out


def to_dict(config: Any) -> dict[str, Any]:
    """JSON-ready nested dict of a dataclass config."""
    return dataclasses.asdict(config)


def from_dict(cls: type, data: dict[str, Any]) -> Any:
    """Rebuild a nested dataclass from :func:`to_dict` output."""
    kwargs = {}
    hints = {f.name: f for f in dataclasses.fields(cls)}
    for name, value in data.items():
        if name not in hints:
            raise ValueError(f"{cls.__name__}: unknown field {name!r} in saved config")
        default = hints[name].default
        if (
            default is dataclasses.MISSING
            and hints[name].default_factory is not dataclasses.MISSING
        ):
            default = hints[name].default_factory()
        if dataclasses.is_dataclass(default) and isinstance(value, dict):
            value = from_dict(type(default), value)
        elif isinstance(value, list):
            value = _to_tuple(value)
        kwargs[name] = value
    return cls(**kwargs)


def _to_tuple(x: Any) -> Any:
    return tuple(_to_tuple(v) for v in x) if isinstance(x, list) else x
