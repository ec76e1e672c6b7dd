"""Result tables and files: one markdown table writer, strict JSON, figures,
atomic writes.

Benchmarks, evaluation reports, sweeps and ``agentrl envs`` all write
through this module, so their tables look alike and no result file is ever
left half written (each is written to a temporary file beside it and
renamed over it).
"""

from __future__ import annotations

import gzip
import io
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


def write_json_gz(path: str | Path, payload: Any) -> Path:
    """Write ``payload`` as compact strict JSON, gzipped (no timestamp in the
    header, so equal payloads give equal bytes), atomically."""
    text = json.dumps(json_safe(payload), separators=(",", ":"), allow_nan=False)
    return write_bytes(path, gzip.compress(text.encode("utf-8"), 9, mtime=0))


def read_json(path: str | Path) -> Any:
    """JSON from ``path``, gunzipped when its name ends in ``.gz``."""
    data = Path(path).read_bytes()
    if str(path).endswith(".gz"):
        data = gzip.decompress(data)
    return json.loads(data)


def write_figure(path: str | Path, fig: Any) -> Path:
    """Render the matplotlib figure ``fig`` as a PNG of 256 colours and write
    it atomically.

    Lines, CI bands, markers and colour maps lose nothing visible in a
    256-colour palette, and the file is about a third of a full-colour
    PNG's (the committed records' 188 plots: 15.0 -> 4.9 MiB), which keeps
    the repository small enough to travel to a device machine whole.
    """
    from PIL import Image

    rendered = io.BytesIO()
    fig.savefig(rendered, format="png")
    rendered.seek(0)
    with Image.open(rendered) as image:
        palette = image.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    palette.save(out, format="PNG", optimize=True)
    return write_bytes(path, out.getvalue())
