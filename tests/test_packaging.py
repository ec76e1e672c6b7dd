"""Packaging: declared dependencies match the imports, the lock, LICENSE, CITATION.

Every third-party module imported by the package, the tests, the notebooks,
the experiments or the benchmarks comes from a declared distribution (the
benchmarks' PyTorch peers excepted: ``INSTALLED_BESIDE``), and every
declared distribution is imported somewhere or is listed in
``RUN_TIME_ONLY`` with the reason it is needed. The wheel holds the library
only, not ``experiments/`` or ``benchmarks/``. ``constraints.txt`` pins
each declared distribution at a version inside its declared range.
(``.ci/wheel_check`` proves a built wheel installs and runs; this file
checks what can be checked without one.)
"""

import ast
import json
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import agentrl

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

#: Declared but never imported: why each is needed at run time.
RUN_TIME_ONLY = {
    "array-record": "the shard format TFDS writes datasets in",
    "six": "gymnax imports it without declaring it",
    "ipykernel": "the python3 kernel tests/test_notebooks.py runs notebooks in",
    "pytest-xdist": "make test runs pytest -n 2",
    "ruff": "make test and make lint run ruff check",
    "wandb": "agentrl.tracking imports it by name, only for --tracker wandb "
    "(the tracking extra)",
}

#: Imported by benchmarks/ but not declared: installed beside agentrl by
#: whoever runs those benchmarks (benchmarks/_peers.py says how).
INSTALLED_BESIDE = {
    "torch": "the peers' PyTorch steps (peer_training, peer_eval)",
    "yaml": "T2MIR's own config, read by peer_training --t2mir",
}

#: The checkout's folders of scripts; their modules import each other by name.
SCRIPT_FOLDERS = ("experiments", "benchmarks")


def _name(requirement: str) -> str:
    return _normalize(re.match(r"[A-Za-z0-9_.-]+", requirement).group())


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements() -> dict[str, str]:
    """``{distribution: specifier}`` of the dependencies and every extra."""
    project = PYPROJECT["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += extra
    out = {}
    for req in reqs:
        name = _name(req)
        if name != "agentrl":  # dev = ["agentrl[xminigrid]", ...]
            out[name] = req[len(re.match(r"[A-Za-z0-9_.\[\]-]+", req).group()) :]
    return out


def _sources() -> list[tuple[str, str]]:
    """``(where, python source)`` of the package, the tests, the script
    folders and the notebooks."""
    out = [
        (str(p.relative_to(ROOT)), p.read_text())
        for folder in ("agentrl", "tests", *SCRIPT_FOLDERS)
        for p in sorted((ROOT / folder).rglob("*.py"))
    ]
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                code = "".join(cell["source"])
                lines = [ln for ln in code.splitlines() if ln[:1] not in "%!"]
                out.append((path.name, "\n".join(lines)))
    return out


def _imported_modules() -> dict[str, str]:
    """``{top-level module: first file importing it}``, absolute imports only."""
    out = {}
    for where, source in _sources():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                out.setdefault(name.split(".")[0], where)
    return out


def _third_party(modules: dict[str, str]) -> dict[str, str]:
    local = {
        p.stem
        for folder in ("tests", *SCRIPT_FOLDERS)
        for p in (ROOT / folder).glob("*.py")
    } | {"agentrl"}
    return {
        m: where
        for m, where in modules.items()
        if m not in sys.stdlib_module_names and m not in local | set(INSTALLED_BESIDE)
    }


def test_every_import_is_declared_and_every_declaration_is_used():
    declared = _requirements()
    dists = packages_distributions()
    imported = set()
    for module, where in _third_party(_imported_modules()).items():
        names = {_normalize(d) for d in dists.get(module, [])}
        assert names & set(declared), (
            f"{where} imports {module!r} (from {sorted(names) or 'nowhere'}), "
            "which pyproject.toml does not declare"
        )
        imported |= names
    for name in declared:
        assert name in imported or name in RUN_TIME_ONLY, (
            f"{name} is declared in pyproject.toml but never imported; drop it "
            "or say in RUN_TIME_ONLY why it is needed"
        )
    assert not set(RUN_TIME_ONLY) - set(declared)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(re.match(r"\d+", part).group()) for part in text.split("."))


def test_the_lock_pins_every_declared_dependency_inside_its_range():
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    assert lines[0].startswith("#") and "make lock" in "\n".join(lines[:20])
    pins = {}
    for line in lines:
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[_normalize(name)] = version
    ops = {
        ">=": lambda a, b: a >= b,
        "<": lambda a, b: a < b,
    }
    for name, spec in _requirements().items():
        assert name in pins, f"constraints.txt does not pin {name}"
        for clause in spec.split(","):
            op, bound = re.fullmatch(r"(>=|<)([\d.]+)", clause.strip()).groups()
            assert ops[op](_version(pins[name]), _version(bound)), (
                f"constraints.txt pins {name}=={pins[name]} outside {spec}"
            )


def test_license_and_citation_match_the_package():
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0"
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text
    cff = (ROOT / "CITATION.cff").read_text()
    assert re.search(r"^cff-version: 1\.2\.0$", cff, re.M)
    assert re.search(rf'^version: "{re.escape(agentrl.__version__)}"$', cff, re.M)
    assert re.search(r"^license: Apache-2\.0$", cff, re.M)
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "agentrl.version.__version__"
    }


def test_the_wheel_holds_the_library_only():
    """Experiments and benchmarks live in the checkout, beside the package."""
    assert PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"] == [
        "agentrl*"
    ]
    for folder in SCRIPT_FOLDERS:
        assert not (ROOT / folder / "__init__.py").exists(), folder
        assert not (ROOT / "agentrl" / folder).exists(), folder
    assert "peers" not in PYPROJECT["project"]["optional-dependencies"]
