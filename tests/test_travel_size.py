"""The working tree stays small enough to travel to a device machine with
the device check's wheels (benchmarks/travel_size.py)."""

import subprocess
from pathlib import Path

import pytest
import travel_size

ROOT = Path(__file__).resolve().parents[1]


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_the_tree_fits_beside_the_wheels():
    try:
        size = travel_size.tree_bytes(ROOT) / 2**20
    except (subprocess.CalledProcessError, FileNotFoundError):
        pytest.skip("not a git checkout")
    assert size <= travel_size.TREE_BUDGET_MIB, (
        f"the working tree is {size:.1f} MiB, over its "
        f"{travel_size.TREE_BUDGET_MIB} MiB share of a device call's 64 MiB "
        "(see benchmarks/travel_size.py)"
    )


def test_tracked_and_unignored_files_count_and_ignored_ones_do_not(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text(".whl/\n")
    (tmp_path / "tracked.bin").write_bytes(b"x" * 1000)
    _git(tmp_path, "add", ".gitignore", "tracked.bin")
    (tmp_path / "new.bin").write_bytes(b"x" * 300)  # untracked, not ignored
    (tmp_path / ".whl").mkdir()
    (tmp_path / ".whl" / "a.whl").write_bytes(b"x" * 5000)  # ignored
    assert travel_size.tree_bytes(tmp_path) == 1000 + 300 + len(".whl/\n")
    assert travel_size.folder_bytes(tmp_path / ".whl") == 5000


def test_the_check_fails_over_the_limit(tmp_path, capsys, monkeypatch):
    big = tmp_path / "carried"
    big.mkdir()
    (big / "w.whl").write_bytes(b"\0" * (63 * 2**20))
    monkeypatch.setattr(travel_size, "tree_bytes", lambda: 0)
    assert travel_size.main(["--with", str(big)]) == 1
    assert "over 62 MiB" in capsys.readouterr().err
    (big / "w.whl").write_bytes(b"\0" * (61 * 2**20))
    assert travel_size.main(["--with", str(big)]) == 0
