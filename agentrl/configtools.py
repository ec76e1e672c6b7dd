"""Frozen-dataclass configs: dotted overrides from the command line or Python.

``override(config, {"train.lr": "3e-4", "layers": 2})`` returns a new config.
A key is a dotted path through nested dataclasses (``train.lr``) or a bare
field name that is unique in the tree (``lr``). String values are parsed to
the type of the field they replace. Unknown or ambiguous fields, values of
the wrong type (checked against the field's annotation: ``int | None``,
``tuple[int, ...]`` ...) and non-finite numbers raise ``ConfigError`` naming
the field, the value and what is allowed, so a bad command line fails before
anything compiles; :func:`from_dict` (a saved ``config.json``) checks the same.
Every refusal is a :class:`ConfigError` (a ``ValueError``), also those of
the dataclasses' own validation. The command line is generated from the same
dataclasses by :mod:`agentrl.configcli`.

A field marked :func:`traced` is a hyperparameter the update step takes as
a traced scalar (so a sweep vmaps over it in one program); the marking lives
on the field. :func:`default_hparams` gives them as the config's own tree
(``hp["train"]["lr"]``, ``hp["algo"]["ent_coef"]``), the one form every
update step, online program and sweep takes; :func:`traced_values` lists
them by dotted path (how sweeps and the command line name them). A field
whose value is a dataclass with ``to_config_dict``/``from_config_dict`` (an
algorithm) is polymorphic: it is saved with its registered name and rebuilt
from it, and ``--algo NAME`` replaces it by the named one, keeping the
values the old one was given for the fields both share
(:func:`carry_shared_fields`: ``context_episodes`` from AD to DT).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import dataclasses
import functools
import json
import math
import types
import typing
from collections.abc import Callable
from typing import Any

from agentrl.checks import is_int

TRACED = "agentrl_traced"


class ConfigError(ValueError):
    """A config value, field name or command-line argument is refused.

    The message names the field (or argument) and what is allowed. The
    command line prints it on one line and exits with code 2, before
    anything compiles; any other exception keeps its traceback. A
    ``ValueError``, so ``except ValueError`` still catches it.
    """


@contextlib.contextmanager
def config_errors():
    """Re-raise a ``ValueError`` from a config's own checks as :class:`ConfigError`.

    Dataclass ``__post_init__`` validation (and an algorithm's ``check``)
    raise plain ``ValueError`` naming the field; inside this block they
    become config errors with the same message.
    """
    try:
        yield
    except ConfigError:
        raise
    except ValueError as err:
        raise ConfigError(str(err)) from err


def traced(default: float, **kwargs: Any) -> Any:
    """A float field that the update step takes as a traced scalar.

    Sweeping a traced field trains all its values in one compiled program
    (vmapped); any other field changes the program (a shape, a branch).
    """
    metadata = {**kwargs.pop("metadata", {}), TRACED: True}
    return dataclasses.field(default=default, metadata=metadata, **kwargs)


def traced_values(config: Any, prefix: str = "") -> dict[str, float]:
    """``{"train.lr": 3e-4, ...}``: every :func:`traced` field, by dotted path."""
    out: dict[str, float] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.metadata.get(TRACED, False):
            out[prefix + f.name] = float(value)
        elif _is_config(value):
            out.update(traced_values(value, f"{prefix}{f.name}."))
    return out


def _is_config(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _polymorphic(value: Any) -> bool:
    return _is_config(value) and hasattr(value, "to_config_dict")


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


def node_paths(config: Any, prefix: str = "") -> dict[str, Any]:
    """``{"algo": AD(...), ...}``: the polymorphic (algorithm) nodes by path."""
    out = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if _polymorphic(value):
            out[prefix + f.name] = value
        if _is_config(value):
            out.update(node_paths(value, f"{prefix}{f.name}."))
    return out


def resolve(config: Any, key: str) -> str:
    """The full dotted path of ``key`` (a path or a unique leaf name)."""
    paths = field_paths(config)
    if key in paths or key in node_paths(config):
        return key
    matches = [p for p in paths if p.split(".")[-1] == key or p.endswith("." + key)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise ConfigError(f"field {key!r} is ambiguous: use one of {matches}")
    raise ConfigError(
        f"unknown config field {key!r}; valid fields: "
        f"{', '.join(sorted([*paths, *node_paths(config)]))}"
    )


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # an annotation that cannot be resolved: no type check
        return {}


def field_types(config: Any, prefix: str = "") -> dict[str, Any]:
    """``{"train.lr": float, "model.max_steps": int | None, ...}`` per leaf field."""
    out = {}
    hints = _hints(type(config))
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if _is_config(value):
            out.update(field_types(value, f"{prefix}{f.name}."))
        else:
            out[prefix + f.name] = hints.get(f.name, Any)
    return out


def _type_name(hint: Any) -> str:
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    return str(hint).replace("typing.", "")


def conforms(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the annotated type ``hint`` (bools are not ints)."""
    if hint is Any:
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, a) for a in args)
    if hint is type(None) or hint is None:
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return is_int(value)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(conforms(v, args[0]) for v in value)
        return len(args) == len(value) and all(
            conforms(v, a) for v, a in zip(value, args, strict=True)
        )
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True  # other generics: the dataclass's own checks decide


def check_value(path: str, value: Any, hint: Any, text: Any = None) -> Any:
    """``value`` checked against ``hint`` (ints widened to float where allowed).

    Raises ``ValueError`` naming ``path``, the allowed type and the value;
    non-finite floats (nan, inf) are refused everywhere.
    """
    shown = value if text is None else text
    if is_int(value) and not _accepts_int(hint) and conforms(value, hint):
        value = float(value)  # 3 for a float field
    if not conforms(value, hint):
        raise ConfigError(f"{path} must be of type {_type_name(hint)}, got {shown!r}")
    for x in _numbers(value):
        if not math.isfinite(x):
            raise ConfigError(f"{path} must be a finite number, got {shown!r}")
    return value


def _accepts_int(hint: Any) -> bool:
    if hint is Any or hint is int:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_accepts_int(a) for a in typing.get_args(hint))
    return False


def _accepts_float(hint: Any) -> bool:
    if hint is float:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_accepts_float(a) for a in typing.get_args(hint))
    return False


def _numbers(value: Any):
    if isinstance(value, float):
        yield value
    elif isinstance(value, tuple | list):
        for v in value:
            yield from _numbers(v)


def parse_value(path: str, text: Any, current: Any, hint: Any = Any) -> Any:
    """Parse ``text`` to the type of ``current`` (the field's present value).

    ``hint``: the field's annotation (see :func:`field_types`); with it the
    value is checked against the annotation, so a field whose default is
    ``None`` is checked too.
    """
    if not isinstance(text, str):
        value = text
    elif isinstance(current, str) or hint is str:
        value = text
    else:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            value = text
            if isinstance(current, float) or _accepts_float(hint):
                try:  # "nan", "inf": numbers, refused below as not finite
                    value = float(text)
                except ValueError:
                    pass
        if (
            isinstance(value, str)
            and value.lower() in ("none", "null")
            and (conforms(None, hint) and hint is not Any)
        ):
            value = None
        if isinstance(current, bool) and isinstance(value, str):
            value = {"true": True, "false": False}.get(value.lower(), value)
    if hint is not Any and conforms(value, hint):
        # the annotation decides (a field set to 24 may go back to None)
        return check_value(path, value, hint, text)
    if isinstance(current, bool) != isinstance(value, bool) and current is not None:
        raise ConfigError(f"{path} must be a bool (true/false), got {text!r}")
    if isinstance(current, float) and isinstance(value, int):
        value = float(value)
    if isinstance(current, tuple) and isinstance(value, list):
        value = _to_tuple(value)
    if isinstance(current, tuple) and isinstance(value, int | str) and not current:
        value = (value,)
    if current is not None and not isinstance(value, type(current)):
        raise ConfigError(
            f"{path} must be of type {type(current).__name__} "
            f"(like its default {current!r}), got {text!r}"
        )
    return check_value(path, value, hint, text)


def _apply(config: Any, changes: dict[str, Any]) -> Any:
    """``config`` with ``{relative dotted path: value}`` applied, one level at a
    time: all of a dataclass's changed fields are replaced together, so its
    validation sees them together (the order of the overrides is irrelevant).
    """
    kwargs = {k: v for k, v in changes.items() if "." not in k}
    nested: dict[str, dict[str, Any]] = {}
    for key, value in changes.items():
        if "." in key:
            head, rest = key.split(".", 1)
            nested.setdefault(head, {})[rest] = value
    for head, sub in nested.items():
        kwargs[head] = _apply(kwargs.get(head, getattr(config, head)), sub)
    if not kwargs:
        return config
    with config_errors():
        return dataclasses.replace(config, **kwargs)


def _default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _chosen_fields(node: Any) -> dict[str, Any]:
    """``{field: value}`` that ``node`` was given away from its class defaults;
    a wrapped algorithm's (T2MIR's ``base``) count too, below its own."""
    chosen: dict[str, Any] = {}
    own: dict[str, Any] = {}
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if _polymorphic(value):
            chosen.update(_chosen_fields(value))
        elif value != _default_of(f):
            own[f.name] = value
    return {**chosen, **own}


def carry_shared_fields(old: Any, new: Any) -> Any:
    """``new`` with the values ``old`` was given for the fields they share.

    An algorithm swapped by name (``override(config, {"algo": "dt"})``)
    keeps what the preset or the user set on the old one (AD's
    ``context_episodes=2`` becomes DT's, and T2MIR-over-AD's ``base``'s); a
    field the old one left at its default takes the new one's default (RL²'s
    one-episode trials do not shorten transformer PPO's). Fields the new one
    lacks are dropped.
    """
    chosen = _chosen_fields(old)
    kwargs = {}
    for f in dataclasses.fields(new):
        value = getattr(new, f.name)
        if _polymorphic(value):
            kwargs[f.name] = carry_shared_fields(old, value)
        elif f.name in chosen:
            kwargs[f.name] = chosen[f.name]
    with config_errors():
        return dataclasses.replace(new, **kwargs) if kwargs else new


def _swapped_node(nodes: dict[str, Any], path: str, text: Any) -> Any:
    """The node to put at ``path`` for ``text``: an instance as given, or a
    registered name keeping the shared fields of the one there (its own
    validation runs; the config's runs when every change is in place)."""
    if _polymorphic(text):
        return text
    try:
        value = type(nodes[path]).from_config_value(text)
    except ValueError as err:
        if str(err).startswith(path):
            raise ConfigError(str(err)) from err
        raise ConfigError(f"{path}: {err}") from None
    return carry_shared_fields(nodes[path], value)


def _with_node(config: Any, path: str, value: Any) -> Any:
    """``config`` with ``value`` at ``path``, NOT validated: the view the
    other overrides' paths and types are resolved against, never returned
    by :func:`override` (a swap alone may not be valid: ``--algo dt`` with
    a grid encoding, before ``--model.obs_encoding table`` is applied)."""
    head, _, rest = path.partition(".")
    new = copy.copy(config)
    inner = _with_node(getattr(config, head), rest, value) if rest else value
    object.__setattr__(new, head, inner)
    return new


def swapped_view(config: Any, swaps: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """``({path: node}, view)``: the nodes ``swaps`` name (``{"algo": "dt"}``,
    applied in order, outermost first) and ``config`` with them in place,
    NOT validated, to resolve the other overrides against; pass the nodes
    to :func:`override` with the other changes, which validates them
    together."""
    changes, view = {}, config
    for key, text in swaps.items():
        path = resolve(view, key)
        changes[path] = _swapped_node(node_paths(view), path, text)
        view = _with_node(view, path, changes[path])
    return changes, view


def override(config: Any, overrides: dict[str, Any]) -> Any:
    """A copy of ``config`` with ``overrides`` applied (see module docstring).

    A polymorphic node given by name (``algo``) is replaced first, by the
    named one with the values the old one was given for the fields both
    share (:func:`carry_shared_fields`; an instance given as the value is
    taken as it is); the other fields are then resolved and type-checked
    against the result, and every change, the swapped node's included, is
    applied together, so dataclass ``__post_init__`` validation runs once
    per changed level with every change in place (``--algo dt
    --model.obs_encoding table`` on a grid-encoded preset).
    """
    rest, changes, view = {}, {}, config
    for key, text in overrides.items():
        if resolve(view, key) in node_paths(view):  # --algo dt: DT, shared kept
            swapped, view = swapped_view(view, {key: text})
            changes.update(swapped)
        else:
            rest[key] = text
    paths = field_paths(view)
    hints = field_types(view)
    for key, text in rest.items():
        path = resolve(view, key)
        if path in changes:
            raise ConfigError(f"field {path} is given twice")
        changes[path] = parse_value(path, text, paths[path], hints.get(path, Any))
    return _apply(config, changes)


def parse_cli_overrides(tokens: list[str]) -> dict[str, str]:
    """``["--train.lr", "1e-3", "--layers=2"]`` -> ``{"train.lr": "1e-3", ...}``.

    One value per field, as text (for :func:`override`); the command line
    itself is parsed by :func:`agentrl.configcli.parse`, which also takes
    several values for a tuple field.
    """
    out: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not tok.startswith("--"):
            raise ConfigError(f"expected --field value, got {tok!r}")
        if "=" in tok:
            k, v = tok[2:].split("=", 1)
            i += 1
        else:
            if i + 1 >= len(tokens):
                raise ConfigError(f"missing value for {tok}")
            k, v = tok[2:], tokens[i + 1]
            i += 2
        out[k.replace("-", "_")] = v
    return out


def flatten(tree: dict, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (a :func:`to_dict` tree by field)."""
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def flat_fields(config: Any) -> dict[str, Any]:
    """``{"train.lr": 3e-4, ...}``: a config (or its :func:`to_dict` tree,
    e.g. a saved ``config.json``) by field path, values as JSON reads them
    back (tuples as lists), so a saved config compares with a live one."""
    tree = config if isinstance(config, dict) else to_dict(config)
    return flatten(json.loads(json.dumps(tree)))


def to_dict(config: Any) -> dict[str, Any]:
    """JSON-ready nested dict of a dataclass config (algorithms with their name)."""
    if _polymorphic(config):
        return config.to_config_dict()
    out = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        out[f.name] = to_dict(value) if _is_config(value) else value
    return out


def _check_retired(cls: type, field: str, value: Any, neutral: Any) -> None:
    """A saved config's value of a field ``cls`` retired: read past at the
    value that meant what the code does now, refused at any other."""
    if value != neutral:
        raise ConfigError(
            f"{field}={value!r}: a setting {cls.__name__} no longer has (only "
            f"{neutral!r} is what it does now); this config was saved by an "
            "older agentrl and cannot be loaded as it was"
        )


def from_dict(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    """Rebuild a nested dataclass from :func:`to_dict` output.

    Every value is checked against its field's annotation (``ValueError``
    naming the dotted field) before the dataclass validates the whole.
    """
    if not isinstance(data, dict):
        raise ConfigError(
            f"{prefix.rstrip('.') or cls.__name__} must be a JSON object of "
            f"{cls.__name__}'s fields, got {data!r}"
        )
    kwargs = {}
    hints = {f.name: f for f in dataclasses.fields(cls)}
    types_ = _hints(cls)
    retired = getattr(cls, "RETIRED_FIELDS", {})
    for name, value in data.items():
        if name in retired and name not in hints:
            _check_retired(cls, prefix + name, value, retired[name])
            continue
        if name not in hints:
            raise ConfigError(f"{cls.__name__}: unknown field {name!r} in saved config")
        default = hints[name].default
        if (
            default is dataclasses.MISSING
            and hints[name].default_factory is not dataclasses.MISSING
        ):
            default = hints[name].default_factory()
        if _polymorphic(default):
            if not isinstance(value, dict | str):
                raise ConfigError(
                    f"{prefix}{name} must be an algorithm (a JSON object with its "
                    f"'name'), got {value!r}"
                )
            with config_errors():
                value = type(default).from_config_dict(value)
        elif dataclasses.is_dataclass(default):
            value = from_dict(type(default), value, f"{prefix}{name}.")
        else:
            if isinstance(value, list):
                value = _to_tuple(value)
            value = check_value(prefix + name, value, types_.get(name, Any))
        kwargs[name] = value
    with config_errors():
        return cls(**kwargs)


def _to_tuple(x: Any) -> Any:
    return tuple(_to_tuple(v) for v in x) if isinstance(x, list) else x


def traced_tree(
    config: Any, leaf: Callable[[str, float], Any], prefix: str = ""
) -> dict[str, Any]:
    """The :func:`traced` fields of ``config`` as the config's own tree.

    ``{"train": {"lr": leaf("train.lr", 3e-4), ...}, "algo": {...}}``: every
    nested config is a subtree (empty when it has no traced field), so each
    part of a learner reads its own (the optimizer ``hp["train"]``, the
    algorithm ``hp["algo"]``, a wrapped algorithm ``hp["algo"]["base"]``).
    """
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.metadata.get(TRACED, False):
            out[f.name] = leaf(prefix + f.name, float(value))
        elif _is_config(value):
            out[f.name] = traced_tree(value, leaf, f"{prefix}{f.name}.")
    return out


def default_hparams(config: Any) -> dict[str, Any]:
    """The traced hyperparameters of ``config``: :func:`traced_tree` of float32
    scalars, the one form the update step, the online programs and the
    sweeps (with a leading member axis) take."""
    import jax.numpy as jnp  # slow to import; the CLI reads this module for --help

    return traced_tree(config, lambda path, value: jnp.float32(value))
