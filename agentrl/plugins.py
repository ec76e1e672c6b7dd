"""Plug-ins: user modules that register task families, sources, algorithms, baselines.

A plug-in is an ordinary module whose import registers things
(``register_env``, ``register_source``, ``register_algorithm``,
``register_baseline``). It comes in three ways:

- ``agentrl --import MODULE`` (repeatable): :func:`import_plugins`, with
  the current directory importable (``agentrl --import my_family train
  ...`` from the project that holds ``my_family.py``);
- the entry-point group ``agentrl.plugins`` of installed packages, each
  entry point naming a module (``[project.entry-points."agentrl.plugins"]
  my_family = "my_family"``): :func:`load_entry_points`; the command line
  loads them before every command;
- a run records the plug-in modules its config uses
  (:func:`required_plugins`, the ``plugins`` entry of ``run.json``), and
  reading the run (``agentrl eval``, ``agentrl.load_run``) imports them
  (:func:`import_run_plugins`); one that cannot be imported is an error
  naming it.

This module imports only :mod:`agentrl.registry` (it finds the registries
by kind, so it sits below everything that registers).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from agentrl.registry import expect, find

__all__ = [
    "GROUP",
    "import_plugins",
    "import_recorded",
    "import_run_plugins",
    "load_entry_points",
    "load_plugins",
    "required_plugins",
]

#: the entry-point group of plug-in modules
GROUP = "agentrl.plugins"


def _cwd_importable() -> None:
    """Put the current directory on ``sys.path`` (first) unless it is there."""
    cwd = os.getcwd()
    entries = {os.path.abspath(p or os.curdir) for p in sys.path if isinstance(p, str)}
    if cwd not in entries:
        sys.path.insert(0, cwd)


def _import(module: Any, missing: Callable[[str, str], str]) -> ModuleType:
    """Import ``module``; a module that is not there raises ``ValueError(missing(
    module, reason))``. An import error inside the module is its own (raised)."""
    text = str(module)
    if text.endswith(".py") or "/" in text or "\\" in text:
        stem = text.removesuffix(".py").replace("\\", "/").strip("/").replace("/", ".")
        why = f"{text!r} is a file; a module name is dotted, without .py: {stem!r}"
        raise ValueError(missing(text, why))
    if not (isinstance(module, str) and all(p.isidentifier() for p in text.split("."))):
        why = f"{text!r} is not a module name (dotted identifiers: package.module)"
        raise ValueError(missing(text, why))
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        name = err.name or ""
        if not name or not (module == name or module.startswith(name + ".")):
            raise  # the plug-in imports something missing: its own traceback
        raise ValueError(missing(module, str(err))) from None


def import_plugins(modules: Iterable[str]) -> list[ModuleType]:
    """Import the plug-in ``modules`` (dotted names), the current directory importable.

    Raises ``ValueError`` naming a module that is not found; an error raised
    while a plug-in imports is the plug-in's own.
    """
    modules = list(modules)
    if modules:
        _cwd_importable()
    return [
        _import(
            module,
            lambda m, why: (
                f"cannot import plug-in module {m!r}: {why} (--import looks "
                "in the current directory and on PYTHONPATH)"
            ),
        )
        for module in modules
    ]


def load_entry_points(group: str = GROUP) -> list[ModuleType]:
    """Import the module each entry point of ``group`` names (installed plug-ins)."""
    # here, not at the top: importlib.metadata takes ~40 ms, `agentrl --help` none
    from importlib.metadata import entry_points

    loaded = []
    for ep in entry_points(group=group):
        dist = getattr(ep.dist, "name", None) or "an installed package"
        loaded.append(
            _import(
                ep.module,
                lambda m, why, ep=ep, dist=dist: (
                    f"plug-in {ep.name!r} (entry point "
                    f"of {dist}, group {group!r}) names module {m!r}, which cannot be "
                    f"imported: {why}. Reinstall or uninstall {dist}"
                ),
            )
        )
    return loaded


def load_plugins(modules: Iterable[str] = ()) -> None:
    """What the command line loads before a command: entry points, then ``modules``."""
    load_entry_points()
    import_plugins(modules)


def _names_in(tree: Any) -> list[str]:
    """Every ``"name"`` of a nested config dict (an algorithm and those it wraps)."""
    if not isinstance(tree, dict):
        return []
    found = [tree["name"]] if isinstance(tree.get("name"), str) else []
    for value in tree.values():
        found += _names_in(value)
    return found


def used_names(config: Any) -> list[tuple[str, str]]:
    """``(kind, name)`` of the registered things an ``ExperimentConfig`` uses."""
    pairs = [("environment", config.data.env), ("source", config.data.source)]
    algo = config.algo
    tree = algo.to_config_dict() if hasattr(algo, "to_config_dict") else {}
    return pairs + [("algorithm", name) for name in _names_in(tree)]


def required_plugins(config: Any) -> dict[str, dict[str, list[str]]]:
    """``{module: {kind: [name, ...]}}``: the modules outside agentrl that
    registered the environment, source and algorithms ``config`` uses.

    This is what a run directory records (``run.json``, ``plugins``), so that
    reading the run imports them (:func:`import_run_plugins`).
    """
    out: dict[str, dict[str, list[str]]] = {}
    for kind, name in used_names(config):
        registry = find(kind)
        module = registry.module_of(name) if registry is not None else None
        if module is None or module == "agentrl" or module.startswith("agentrl."):
            continue
        names = out.setdefault(module, {}).setdefault(kind, [])
        if name not in names:
            names.append(name)
    return out


def _registered(kind: str, name: str) -> bool:
    registry = find(kind)
    return registry is not None and name in registry


def import_recorded(plugins: Any, where: str = "the run") -> list[str]:
    """Import the modules of a :func:`required_plugins` record.

    A module is skipped when everything it provided is registered already
    (or it is ``__main__``: a script or notebook, which cannot be imported;
    a lookup of its names then says so). Raises ``ValueError`` naming a
    module that cannot be imported. Returns the modules imported.
    """
    if not isinstance(plugins, dict):
        return []
    imported = []
    for module, provides in plugins.items():
        pairs = [
            (kind, name)
            for kind, names in (provides.items() if isinstance(provides, dict) else ())
            if isinstance(names, list)
            for name in names
            if isinstance(name, str)
        ]
        for kind, name in pairs:
            expect(kind, name, module)
        if module == "__main__" or (
            pairs and all(_registered(kind, name) for kind, name in pairs)
        ):
            continue
        what = ", ".join(f"{kind} {name!r}" for kind, name in pairs) or "plug-ins"
        _cwd_importable()
        _import(
            module,
            lambda m, why: (
                f"{where} needs the plug-in module {m!r} (it registered "
                f"{what} when the run was trained), which cannot be imported: {why}. "
                f"Run from the directory that holds it, put it on PYTHONPATH, or "
                f"import it first (agentrl --import {m})"
            ),
        )
        imported.append(module)
    return imported


def import_run_plugins(run_dir: str | Path) -> list[str]:
    """Import the plug-in modules that ``run_dir/run.json`` records.

    A run without the record, or without ``run.json``, needs none here (a
    damaged ``run.json`` is reported by whoever reads it). Raises
    ``ValueError`` naming a recorded module that cannot be imported.
    """
    path = Path(run_dir) / "run.json"
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(record, dict):
        return []
    return import_recorded(record.get("plugins"), f"run {str(run_dir)!r}")
