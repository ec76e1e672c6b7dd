"""Result tables and files: one markdown table writer, strict JSON, atomic writes.

Benchmarks, evaluation reports, sweeps and ``agentrl envs`` all write
through this module, so their tables look alike and no result file is ever
left half written (each is written to a temporary file beside it and
renamed over it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentrl.safeio import remove_stale_siblings, temp_sibling


def format_cell(value: Any) -> str:
    """Floats to 4 significant digits, everything else as ``str``."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def markdown_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    fmt: Callable[[Any], str] = format_cell,
) -> str:
    """A markdown table with one line per row.

    Args:
      rows: mappings from column name to value; a missing value is blank.
      columns: the columns in order (default: the first row's keys; with
        neither rows nor columns the table is ``""``).
      fmt: turns a value into its cell text.
    """
    if not rows and columns is None:
        return ""
    columns = list(rows[0] if columns is None else columns)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(fmt(row.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)


def json_safe(x: Any) -> Any:
    """Plain JSON types in nested mappings/sequences/arrays; NaN and ±inf -> None.

    Strict JSON has no NaN or infinity, so they become ``null``.
    """
    if isinstance(x, Mapping):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, np.ndarray):
        x = x.tolist()
    if isinstance(x, list | tuple):
        return [json_safe(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    return x


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (temporary file, then rename)."""
    return write_bytes(path, text.encode("utf-8"))


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (e.g. a PNG rendered in memory)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Same directory, so the rename never crosses file systems; the name
    # holds the pid, so two writers never share a temporary file and what a
    # killed writer left is removed by the next one.
    remove_stale_siblings(path)
    tmp = temp_sibling(path)
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_json(path: str | Path, payload: Any, indent: int | None = 2) -> Path:
    """Write ``payload`` as strict JSON (:func:`json_safe`) atomically."""
    text = json.dumps(json_safe(payload), indent=indent, allow_nan=False)
    return write_text(path, text)
