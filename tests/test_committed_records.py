"""The committed records under ``benchmarks/results/`` and the docs that cite
them: every record names itself and its own folder, and every record name
the README and docs cite exists (a renamed record must not leave a
citation, or a plots line, pointing at another run)."""

import itertools
import json
import re

import pytest
from checkout import BENCHMARKS, ROOT

RESULTS = BENCHMARKS / "results"
DOCS = ["README.md", *(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]

#: Names the docs cite that are not records, each with why.
NOT_RECORDS = {
    "paired_row_difference": "a function (agentrl/sweep/paired.py)",
    "paired_rounds": "a function (benchmarks/common.py)",
    "paired_t2mir_ad_vs_ad_halfcheetah_vel_long_histories": (
        "removed in 4069d5e; docs/results.md says so and where it is in git"
    ),
}

_CITED = re.compile(r"`((?:repro|paired)_[A-Za-z0-9_{},]+)(…|\*)?[^`]*`")


def _records() -> list[str]:
    return sorted(p.stem for p in RESULTS.glob("repro_*.json"))


def _expand(name: str) -> list[str]:
    """``a{1,2}b`` -> ``["a1b", "a2b"]`` (the docs' shorthand)."""
    parts = re.split(r"\{([^}]*)\}", name)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def cited_names(text: str) -> list[tuple[str, bool]]:
    """``(name, is_prefix)`` for every record name cited in backquotes."""
    found = []
    for match in _CITED.finditer(text):
        for name in _expand(match.group(1)):
            found.append((name, match.group(2) is not None))
    return found


def missing_citations(text: str, names: set[str]) -> list[str]:
    """The cited names that no record (or record folder) in ``names`` has."""
    missing = []
    for name, prefix in cited_names(text):
        known = any(n.startswith(name) for n in names) if prefix else name in names
        if not known and name not in NOT_RECORDS:
            missing.append(name)
    return missing


@pytest.mark.parametrize("name", _records())
def test_a_reproduction_record_names_itself_and_its_folder(name):
    assert json.loads((RESULTS / f"{name}.json").read_text())["name"] == name
    markdown = (RESULTS / f"{name}.md").read_text()
    assert markdown.splitlines()[0] == f"# {name}"
    folders = re.findall(r"per-seed results: `([^`]*)/`", markdown)
    assert folders in ([], [name])
    assert not folders or (RESULTS / name).is_dir()


@pytest.mark.parametrize("doc", DOCS)
def test_every_record_the_docs_cite_exists(doc):
    names = {p.stem for p in RESULTS.glob("*.json")}
    names |= {p.name for p in RESULTS.iterdir() if p.is_dir()}
    assert missing_citations((ROOT / doc).read_text(), names) == []


def test_the_citation_scan_finds_renamed_and_expands_shorthand():
    names = {"repro_a_cpu", "repro_a_cpu_x1", "repro_a_cpu_x2"}
    text = "see `repro_a_cpu_x{1,2}`, `repro_a_cpu_x…` and `repro_b_cpu.md`"
    assert missing_citations(text, names) == ["repro_b_cpu"]
    assert missing_citations("`repro_a_cpu_x{1,3}`", names) == ["repro_a_cpu_x3"]
    assert missing_citations("`repro_c…`", names) == ["repro_c"]
