"""The checkout the tests run in: its ``experiments/`` and ``benchmarks/`` folders.

Found from this file, not from the working directory. ``agentrl train NAME``
and ``agentrl bench NAME`` look names up in the nearest ``experiments/`` or
``benchmarks/`` folder at or above the working directory (which, for pytest
run anywhere inside the checkout, is the checkout's); a test that works in a
directory of its own links the folders there with :func:`link_checkout`.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"
BENCHMARKS = ROOT / "benchmarks"


def experiment_path(name: str) -> str:
    """The path of experiment ``name``'s file (``agentrl train`` takes it too)."""
    return str(EXPERIMENTS / f"{name}.py")


def link_checkout(directory: Path) -> None:
    """Let ``directory`` find the checkout's experiments and benchmarks by name.

    ``experiments/`` is linked; ``benchmarks/`` is a folder of links to the
    scripts only, so that results written under ``benchmarks/results`` of
    ``directory`` stay there (they never reach the checkout's results).
    """
    (directory / "experiments").symlink_to(EXPERIMENTS, target_is_directory=True)
    bench = directory / "benchmarks"
    bench.mkdir()
    for script in BENCHMARKS.glob("*.py"):
        (bench / script.name).symlink_to(script)
