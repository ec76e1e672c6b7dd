"""The README and docs/ link only to files that exist in the repository."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def relative_links(page: Path) -> list[str]:
    """Markdown link and image targets of ``page`` that are not URLs."""
    return [t for t in LINK.findall(page.read_text()) if "://" not in t]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    missing = [t for t in relative_links(page) if not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


def test_the_docs_are_linked_from_the_readme():
    linked = {Path(t).name for t in relative_links(ROOT / "README.md")}
    unlinked = [p.name for p in PAGES[1:] if p.name not in linked]
    assert not unlinked, f"docs/ pages the README does not link: {unlinked}"


def test_the_link_scan_finds_a_missing_file(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "see [a](missing.md) and ![b](img/there.png) and [c](https://x.y/z)"
    )
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "there.png").write_bytes(b"")
    assert relative_links(page) == ["missing.md", "img/there.png"]
    assert not (tmp_path / "missing.md").exists()


#: ``pip install``/``pip wheel`` of a local path, e.g. ``pip install ".[xminigrid]"``
PIP_LOCAL = re.compile(r"pip (?:install|wheel)[^\n`]*?\s['\"]?(\.[^\s'\"\[`]*)")


def test_pip_commands_install_the_checkout():
    # The docs' commands run in the checkout: a local path they install must
    # be a project (pyproject.toml), not the package's source folder.
    for page in PAGES:
        commands = [line.split(" #")[0] for line in page.read_text().splitlines()]
        for target in PIP_LOCAL.findall("\n".join(commands)):
            project = ROOT / target
            assert (project / "pyproject.toml").is_file(), (
                f"{page.relative_to(ROOT)}: `pip ... {target}` run in the checkout "
                f"installs {project}, which has no pyproject.toml"
            )
