"""The floor plan: every agentrl module imports only from its own floor or below.

Imports are read from the source (an AST walk), so an import inside a
function counts like one at the top: it ties the two files together just
the same. ``from agentrl.pkg import name`` counts as importing the package
``agentrl.pkg`` (its ``__init__``) and ``agentrl.pkg.name`` when that is a
module. The floors are the ones ``docs/design.md`` draws; a module not
listed here fails the test, so a new module is placed on purpose.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "agentrl"

#: (floor, module prefixes), bottom to top; the longest matching prefix wins
FLOORS: list[tuple[int, tuple[str, ...]]] = [
    (
        0,
        (
            "agentrl",
            "agentrl.version",
            "agentrl.checks",
            "agentrl.safeio",
            "agentrl.tables",
            "agentrl.configtools",
            "agentrl.host_memory",
            "agentrl.registry",
            "agentrl.plugins",
            "agentrl.schedule",
            "agentrl.tracking",
            "agentrl.cliargs",
            "agentrl.project",
            "agentrl.prng",
            "agentrl.provenance",
        ),
    ),
    (1, ("agentrl.envs",)),
    (2, ("agentrl.history",)),
    (3, ("agentrl.agents", "agentrl.models", "agentrl.rl")),
    (
        4,
        (
            "agentrl.sources",
            "agentrl.data",
            "agentrl.data.columns",
            "agentrl.data.device_sampler",
            "agentrl.online",
        ),
    ),
    (5, ("agentrl.algos",)),
    (
        6,
        (
            "agentrl.train.config",
            "agentrl.train.rundir",
            "agentrl.train.segments",
            "agentrl.train.checkpoint",
        ),
    ),
    (7, ("agentrl.train",)),
    (8, ("agentrl.evaluate",)),
    (9, ("agentrl.sweep",)),
    (
        10,
        (
            "agentrl.cli",
            "agentrl.bench",
            "agentrl.configcli",
            "agentrl.demo",
            "agentrl.envs.cli",
            "agentrl.data.cli",
            "agentrl.train.cli",
            "agentrl.evaluate.cli",
            "agentrl.sweep.cli",
        ),
    ),
]
#: the package root's ``load_run`` opens a run (floor 6) for users, on demand
ROOT_ALLOWED = {("agentrl", "agentrl.train.rundir")}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_edges(root: Path) -> dict[str, dict[str, int]]:
    """``{module: {imported module: first line}}`` within the package at ``root``."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    top = root.name
    edges: dict[str, dict[str, int]] = {}
    for mod, path in files.items():
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        out = edges.setdefault(mod, {})
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != mod and target.split(".")[0] == top:
                    out.setdefault(target, node.lineno)
    return edges


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def floor_of(module: str) -> int:
    best, floor = -1, None
    for level, prefixes in FLOORS:
        for prefix in prefixes:
            hit = module == prefix or (
                prefix != "agentrl" and module.startswith(prefix + ".")
            )
            if hit and len(prefix) > best:
                best, floor = len(prefix), level
    if floor is None:
        raise KeyError(module)
    return floor


def upward_imports(edges: dict[str, dict[str, int]]) -> list[str]:
    """``"a (floor i) -> b (floor j), line n"`` for every import of a higher floor."""
    bad = []
    for mod, targets in sorted(edges.items()):
        for target, line in sorted(targets.items()):
            if (mod, target) in ROOT_ALLOWED:
                continue
            if floor_of(target) > floor_of(mod):
                bad.append(
                    f"{mod} (floor {floor_of(mod)}) -> {target} "
                    f"(floor {floor_of(target)}), line {line}"
                )
    return bad


def test_every_module_has_a_floor():
    unplaced = []
    for mod in import_edges(PACKAGE):
        try:
            floor_of(mod)
        except KeyError:
            unplaced.append(mod)
    assert unplaced == [], f"place these modules on a floor in FLOORS: {unplaced}"


def test_no_module_imports_a_higher_floor():
    assert upward_imports(import_edges(PACKAGE)) == []


def test_no_import_cycles():
    assert cycles(import_edges(PACKAGE)) == []


@pytest.fixture
def planted(tmp_path):
    """A copy of a tiny package tree: ``agentrl.envs.a`` and ``agentrl.sweep.b``."""
    root = tmp_path / "agentrl"
    for sub in ("envs", "sweep"):
        (root / sub).mkdir(parents=True)
        (root / sub / "__init__.py").write_text('"""x"""\n')
    (root / "__init__.py").write_text('"""x"""\n')
    (root / "sweep" / "b.py").write_text("from agentrl.envs.a import f\n")
    return root


def test_checks_catch_a_planted_cycle_and_an_upward_import(planted):
    a = planted / "envs" / "a.py"
    a.write_text("def f():\n    return 1\n")
    assert cycles(import_edges(planted)) == []
    assert upward_imports(import_edges(planted)) == []
    # an import inside a function counts: envs (floor 1) -> sweep (floor 9)
    a.write_text("def f():\n    from agentrl.sweep import b\n\n    return b\n")
    edges = import_edges(planted)
    assert cycles(edges) == [["agentrl.envs.a", "agentrl.sweep.b"]]
    assert upward_imports(edges) == [
        "agentrl.envs.a (floor 1) -> agentrl.sweep (floor 9), line 2",
        "agentrl.envs.a (floor 1) -> agentrl.sweep.b (floor 9), line 2",
    ]
