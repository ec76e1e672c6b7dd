"""Named registries: one style for environments, sources, algorithms, baselines.

>>> ENVS = Registry("environment")
>>> ENVS.register("darkroom", DarkRoom)      # or @ENVS.register("darkroom")
>>> ENVS.get("darkroom")                     # the object; unknown names list the known
>>> ENVS.module_of("darkroom")               # 'agentrl.envs.registry'

Rules (the same for every registry):

- registering the same object again under its name is harmless (it
  returns the object);
- an object with the module and qualified name of the registered one
  replaces it silently: that is a class or function defined again (a
  notebook cell run twice, a reloaded module);
- any other object under a taken name is a ``ValueError`` naming both;
- :meth:`Registry.register_lazy` registers ``"module:attribute"`` with a
  description: the name is listed (:meth:`Registry.names`,
  :meth:`Registry.describe`) without importing the module, which is
  imported on the first lookup (the built-in task families: listing them
  does not import JAX).

Each registration records the module that made it (:meth:`Registry.module_of`),
so a run can record the plug-in modules it needs
(:func:`agentrl.plugins.required_plugins`) and a lookup of a name that such
a module provides, while it is not imported, says which module to import
(:func:`expect`). Every registry is findable by its kind (:func:`find`).
This module imports nothing from agentrl.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["Registry", "caller_module", "expect", "find"]

_MISSING: Any = object()

#: kind -> the registry of that kind (the latest made, should a module reload)
_REGISTRIES: dict[str, Registry] = {}
#: (kind, name) -> module that registered it when a run was trained
_EXPECTED: dict[tuple[str, str], str] = {}


def caller_module(depth: int = 1) -> str | None:
    """The ``__name__`` of the module ``depth`` frames above the caller."""
    try:
        frame = sys._getframe(depth + 1)
    except ValueError:
        return None
    return frame.f_globals.get("__name__")


def find(kind: str) -> Registry | None:
    """The registry of ``kind`` ("environment", "source", ...), if it exists yet."""
    return _REGISTRIES.get(kind)


def expect(kind: str, name: str, module: str) -> None:
    """Note that ``module`` registers ``name`` (a run recorded it so).

    A later lookup of the name that fails while ``module`` is not imported
    names the module in its error.
    """
    _EXPECTED[(kind, name)] = module


def _identity(obj: Any, module: str | None) -> tuple[str | None, str]:
    """``(module, qualified name)`` of a class or function; for another object
    the module that registered it and its type's name."""
    qualname = getattr(obj, "__qualname__", None)
    if isinstance(qualname, str):
        return getattr(obj, "__module__", module), qualname
    return module, f"<{type(obj).__qualname__} object>"


def _describe(obj: Any, module: str | None) -> str:
    """``module.qualname`` of a class or function; else its type and registrar."""
    owner, qualname = _identity(obj, module)
    if not isinstance(getattr(obj, "__qualname__", None), str):
        return f"a {type(obj).__qualname__} registered by {owner}"
    return f"{owner}.{qualname}" if owner else qualname


class Registry:
    """Name -> object, in registration order (see the module docstring).

    Attributes:
      kind: what it holds, singular ("environment"); it names the registry
        in errors and in :func:`find`.
      note: appended to the error of an unknown name (where else to look).
    """

    def __init__(self, kind: str, note: str = ""):
        self.kind = kind
        self.note = note
        self._items: dict[str, Any] = {}
        self._modules: dict[str, str | None] = {}
        #: name -> "module:attribute", imported on the first lookup
        self._lazy: dict[str, str] = {}
        self._descriptions: dict[str, str] = {}
        _REGISTRIES[kind] = self

    def register(
        self, name: str, obj: Any = _MISSING, *, module: str | None = None
    ) -> Any:
        """Register ``obj`` under ``name`` and return it.

        Without ``obj``, a decorator: ``@registry.register("name")``.
        ``module``: the module making the registration (default: the
        caller's); :meth:`module_of` returns it.
        """
        module = module or caller_module()
        if obj is _MISSING:
            return lambda target: self.register(name, target, module=module)
        self._check_name(name)
        self._resolve(name)  # a lazy entry of that name: compare the object
        old = self._items.get(name, _MISSING)
        if old is not _MISSING and old is not obj:
            old_module = self._modules[name]
            if _identity(old, old_module) != _identity(obj, module):
                raise ValueError(
                    f"{self.kind} {name!r} is already registered to "
                    f"{_describe(old, old_module)}; cannot register "
                    f"{_describe(obj, module)} under the same name (choose "
                    "another name)"
                )
        self._items[name] = obj
        self._modules[name] = module
        return obj

    def register_lazy(
        self, name: str, target: str, description: str = "", *, module=None
    ) -> None:
        """Register ``target`` (``"package.module:attribute"``) under ``name``
        without importing it; the first lookup imports it. ``description``
        is what :meth:`describe` shows meanwhile."""
        self._check_name(name)
        if ":" not in target:
            raise ValueError(f"target must be 'module:attribute', got {target!r}")
        if name in self._items or self._lazy.get(name, target) != target:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._lazy[name] = target
        self._modules[name] = module or caller_module()
        self._descriptions[name] = description

    def _check_name(self, name: Any) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(
                f"a {self.kind} name must be a non-empty string, got {name!r}"
            )

    def _resolve(self, name: Any) -> None:
        """Import a lazy entry's object (nothing for any other name)."""
        target = self._lazy.get(name) if isinstance(name, str) else None
        if target is None:
            return
        module, _, attribute = target.partition(":")
        self._items[name] = getattr(importlib.import_module(module), attribute)
        del self._lazy[name]

    def describe(self, name: str) -> str:
        """One line about ``name``: its description, else the first line of
        its object's docstring (a lazy entry is not imported)."""
        if name in self._descriptions and self._descriptions[name]:
            return self._descriptions[name]
        doc = getattr(self.get(name), "__doc__", None) or ""
        return doc.strip().split("\n", 1)[0]

    def unregister(self, name: str) -> None:
        """Remove ``name`` (for tests and notebooks); unknown names are an error."""
        self.get(name)
        del self._items[name]
        del self._modules[name]
        self._descriptions.pop(name, None)

    def get(self, name: str, default: Any = _MISSING) -> Any:
        """The object registered as ``name``.

        An unknown name returns ``default`` when one is given, else raises
        ``ValueError`` listing the registered names (and, where a run
        recorded the plug-in module that provides the name, naming it).
        """
        self._resolve(name)
        if isinstance(name, str) and name in self._items:
            return self._items[name]
        if default is not _MISSING:
            return default
        note = f" ({self.note})" if self.note else ""
        raise ValueError(
            f"unknown {self.kind} {name!r}; registered: {', '.join(self.names())}"
            f"{note}{self.hint(name)}"
        )

    def hint(self, name: str) -> str:
        """Where a missing ``name`` would come from ("" when nothing is known)."""
        module = _EXPECTED.get((self.kind, name)) if isinstance(name, str) else None
        if module is None:
            return ""
        if module == "__main__":
            return (
                f". A script or notebook registered {self.kind} {name!r} when "
                "the run was trained: register it again before using the run"
            )
        if module in sys.modules:
            return f". The run recorded module {module!r} as registering it"
        return (
            f". It is registered by the plug-in module {module!r}, which is not "
            f"imported: import it first (agentrl --import {module})"
        )

    def names(self) -> list[str]:
        """The registered names, sorted (lazy entries stay unimported)."""
        return sorted([*self._items, *self._lazy])

    def module_of(self, name: str) -> str | None:
        """The module that registered ``name`` (``None`` when unknown)."""
        return self._modules.get(name)

    def items(self) -> list[tuple[str, Any]]:
        """``(name, object)`` pairs (lazy entries imported), in registration
        order."""
        return [(name, self.get(name)) for name in list(self._modules)]

    def values(self) -> list[Any]:
        """The registered objects in registration order (lazy ones imported)."""
        return [obj for _, obj in self.items()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._items or name in self._lazy)

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._modules))

    def __len__(self) -> int:
        return len(self._modules)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._modules)})"
