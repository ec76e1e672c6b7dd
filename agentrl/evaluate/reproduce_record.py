"""The result record of reproductions and benchmarks: ``<name>.json`` and ``.md``.

A reproduction (:mod:`agentrl.evaluate.reproduce`) and every benchmark of a
project's ``benchmarks/`` write their results in one form, into
:func:`agentrl.project.results_dir` (``benchmarks/results`` under the
current directory, or ``$AGENTRL_BENCH_RESULTS``). The JSON has ``name``,
``machine`` (:func:`agentrl.provenance.machine_info`), ``date``, ``agentrl_version``,
``results`` (free form) and ``targets``: ``[{"name", "value", "target",
"higher_is_better", "met"}]`` (:func:`target`); the markdown holds the same
as tables.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from agentrl.project import results_dir
from agentrl.provenance import machine_info
from agentrl.tables import markdown_table, write_json, write_text
from agentrl.version import __version__


def target(name: str, value: float, goal: float, higher_is_better: bool = True):
    """One entry of the ``targets`` list; ``met`` says whether it holds."""
    met = value >= goal if higher_is_better else value <= goal
    return {
        "name": name,
        "value": float(value),
        "target": float(goal),
        "higher_is_better": higher_is_better,
        "met": bool(met),
    }


def write_record(
    name: str,
    results: Any,
    targets: list[dict[str, Any]],
    table_rows: list[dict[str, Any]],
    notes: str = "",
    out_dir: Path | None = None,
) -> Path:
    """Write ``<name>.json`` and ``<name>.md`` into ``out_dir`` (default:
    :func:`~agentrl.project.results_dir`); return the JSON path."""
    out_dir = Path(out_dir or results_dir())
    payload = {
        "name": name,
        "machine": machine_info(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "agentrl_version": __version__,
        "results": results,
        "targets": targets,
    }
    path = write_json(out_dir / f"{name}.json", payload)
    md = [
        f"# {name}",
        "",
        f"{payload['date']} · {payload['machine']['cpu']} · "
        f"{payload['machine']['cores']} cores · {payload['machine']['device_kind']}",
        "",
        markdown_table(table_rows),
        "",
    ]
    if targets:
        md += ["## Targets", "", markdown_table(targets), ""]
    if notes:
        md += [notes, ""]
    write_text(out_dir / f"{name}.md", "\n".join(md))
    return path
