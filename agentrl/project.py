"""A project's own folders: ``experiments/`` and ``benchmarks/`` beside the library.

The installed package is the library only. A project's studies
(``experiments/NAME.py``) and benchmarks (``benchmarks/NAME.py``, results in
``benchmarks/results/``) are plain Python files in folders of its checkout.
A name is looked up in the nearest such folder: the working directory's, or
that of the closest directory above it that has one (so a checkout's
``notebooks/`` finds the checkout's ``experiments/``). A path to a ``.py``
file (``my_exps/foo.py``) is always taken as it is.

A file is loaded as ``python FILE`` would run it: its folder first on
``sys.path``, so that it imports the modules beside it by name (``from _dpt
import dpt_base``), and registered in ``sys.modules`` under its file's stem
(under a private name where that stem is already another module's, such as
the standard library's).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

#: Environment variable that moves the results folder of benchmarks and
#: reproductions.
RESULTS_ENV = "AGENTRL_BENCH_RESULTS"

#: stems this module has loaded (a later file of the same stem replaces them)
_LOADED: set[str] = set()


def results_dir() -> Path:
    """Where benchmark and reproduction results go.

    ``$AGENTRL_BENCH_RESULTS``, else ``benchmarks/results`` under the current
    directory, so that run from a checkout the results land beside the
    committed ones.
    """
    return Path(os.environ.get(RESULTS_ENV) or Path("benchmarks") / "results")


def find_folder(folder: str, start: Path | None = None) -> Path | None:
    """The nearest ``folder/`` in ``start`` (default: the working directory)
    or a directory above it; ``None`` if there is none."""
    here = Path.cwd() if start is None else Path(start)
    here = here.absolute()
    for directory in (here, *here.parents):
        if (directory / folder).is_dir():
            return directory / folder
    return None


def module_names(folder: Path | None) -> list[str]:
    """Stems of the ``.py`` files in ``folder`` not starting with ``_``."""
    if folder is None:
        return []
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))


def is_path(name: str) -> bool:
    """Whether ``name`` names a file (``foo.py``, ``dir/foo``) rather than a module."""
    return name.endswith(".py") or "/" in name or os.sep in name


def locate(name: str, folder: str, what: str, known: list[str] | None = None) -> Path:
    """The file of ``name``: a path to a ``.py`` file, or ``<folder>/<name>.py``
    in the nearest ``folder`` (:func:`find_folder`).

    ``known`` (default: :func:`module_names` of that folder) are the names
    the error lists. Raises ``ValueError`` naming what is allowed.
    """
    if is_path(name):
        path = Path(name)
        if path.suffix == ".py" and path.is_file():
            return path
        raise ValueError(
            f"no {what} file {name!r} (a path must name an existing .py file)"
        )
    found = find_folder(folder)
    if found is None:
        raise ValueError(
            f"unknown {what} {name!r}: there is no {folder}/ folder in "
            f"{Path.cwd()} or above it; run from a checkout that has one, or "
            f"give the path of the {what}'s .py file"
        )
    known = module_names(found) if known is None else known
    if name in known:
        return found / f"{name}.py"
    raise ValueError(
        f"unknown {what} {name!r}; {found} has: {', '.join(known) or 'none'} "
        f"(or give the path of the {what}'s .py file)"
    )


def load(path: Path | str) -> ModuleType:
    """Execute the Python file at ``path`` as a module, its folder on ``sys.path``.

    Every call compiles the file's text as it is now (an edited experiment
    is re-read): never cached bytecode, whose check by the source's mtime
    in whole seconds and its size missed an edit of the same length made
    within a second. The modules it imports are cached as usual.
    """
    path = Path(path).absolute()
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = path.stem
    existing = sys.modules.get(name)
    if existing is not None and name not in _LOADED:
        origin = getattr(existing, "__file__", None)
        if origin is None or Path(origin).absolute().parent != path.parent:
            name = f"_agentrl_project_{name}"  # e.g. the standard library's
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # registered before it runs, as an import would: dataclasses defined in
    # the file look their module up in sys.modules
    sys.modules[name] = module
    try:
        code = compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
        exec(code, module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    _LOADED.add(name)
    return module
