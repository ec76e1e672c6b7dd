"""Checked command-line arguments: argparse types and output paths.

Every command checks its arguments before anything compiles or writes.
The argparse types here turn a bad value into argparse's own usage error
(``agentrl eval: error: argument --episodes: must be an integer >= 1, got
'0'``, exit code 2); :func:`check_output_path` refuses an output path that
cannot be created (empty, an existing file, or under a file) with a
``ValueError`` naming the argument, which the CLI also maps to exit code 2.

>>> parser.add_argument("--tasks", type=positive_int)
>>> check_output_path(args.out, "--out")
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path


def _int(text: str, minimum: int) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise argparse.ArgumentTypeError(
            f"must be an integer >= {minimum}, got {text!r}"
        )
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _int(text, 1)


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0 (seeds, counts that may be zero)."""
    return _int(text, 0)


def unit_fraction(text: str) -> float:
    """argparse type: a number strictly between 0 and 1 (a split fraction)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}")
    return value


def check_output_path(path: str | Path | None, argument: str) -> Path | None:
    """``path`` as a ``Path`` if a directory can be made there, else ``ValueError``.

    Refused: an empty path, an existing file (not a directory), and a path
    whose existing ancestor is a file. Permissions and free space are the
    writer's to report (it names the path and what was kept).
    """
    if path is None:
        return None
    if not str(path).strip():
        raise ValueError(f"{argument} must be a directory path, got {str(path)!r}")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{argument} {path} is a file, not a directory")
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(
                    f"{argument} {path} cannot be created: {parent} is a file, "
                    "not a directory"
                )
            break
    return path
