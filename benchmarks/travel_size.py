"""What travels to a device machine, against the run tool's 64 MiB.

A device call copies the checkout's working tree (tracked files and
untracked files git does not ignore) plus the ignored paths it carries (the
wheels of ``benchmarks/device_wheels.sh``), 64 MiB in all, or refuses the
call. The tree must leave room for the wheels (24.3 MiB on 2026-11-30), so
it is held to :data:`TREE_BUDGET_MIB` by ``tests/test_travel_size.py`` in
``make test``, and ``device_wheels.sh`` checks the sum before a session
spends device time:

    python benchmarks/travel_size.py [--with DIR ...]

prints the tree's MiB (and each carried ``DIR``'s) and exits 1 when the sum
is over :data:`CALL_LIMIT_MIB` less :data:`MARGIN_MIB`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

#: the run tool's limit on what one call sends
CALL_LIMIT_MIB = 64
#: what the device check's wheels may take (24.3 MiB measured, plus room)
WHEELS_MIB = 26
#: kept free for what a session files between two checks (ledger archives)
MARGIN_MIB = 2
#: the working tree's share
TREE_BUDGET_MIB = CALL_LIMIT_MIB - WHEELS_MIB - MARGIN_MIB
ROOT = Path(__file__).resolve().parents[1]


def tree_bytes(root: Path = ROOT) -> int:
    """Bytes of the files a device call would send from checkout ``root``:
    tracked ones (as they are on disk) and untracked ones git does not
    ignore. Raises ``subprocess.CalledProcessError`` outside a git checkout."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, capture_output=True, check=True,
    ).stdout  # fmt: skip
    names = {n for n in listed.decode().split("\0") if n}
    return sum(p.stat().st_size for n in names if (p := root / n).is_file())


def folder_bytes(folder: Path) -> int:
    """Bytes of every file under ``folder`` (a carried path)."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--with", dest="carried", action="append", default=[], metavar="DIR",
        help="a carried folder to add (repeatable)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    sizes = {"working tree": tree_bytes()}
    sizes |= {d: folder_bytes(Path(d)) for d in args.carried}
    total = sum(sizes.values()) / 2**20
    for name, size in sizes.items():
        print(f"{name}: {size / 2**20:.1f} MiB")
    allowed = CALL_LIMIT_MIB - MARGIN_MIB
    print(f"total {total:.1f} MiB of the {CALL_LIMIT_MIB} MiB a device call sends")
    if total > allowed:
        print(
            f"error: {total:.1f} MiB is over {allowed} MiB: shrink the tracked "
            "files (benchmarks/results) or the wheels before a device call",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
