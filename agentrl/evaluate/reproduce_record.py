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
    measured: dict[str, Any] | None = None,
) -> Path:
    """Write ``<name>.json`` and ``<name>.md`` into ``out_dir`` (default:
    :func:`~agentrl.project.results_dir`); return the JSON path.

    ``measured``: the ``machine``, ``date`` and ``agentrl_version`` of the
    record these results were first written in (a rescore keeps them; this
    machine and date go to ``"rescored"``)."""
    out_dir = Path(out_dir or results_dir())
    now = {
        "machine": machine_info(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "agentrl_version": __version__,
    }
    payload = {"name": name, **(measured or now), "results": results}
    payload["targets"] = targets
    if measured:
        payload["rescored"] = now
    path = write_json(out_dir / f"{name}.json", payload)
    machine = payload["machine"]
    md = [
        f"# {name}",
        "",
        f"{payload['date']} · {machine['cpu']} · {machine['cores']} cores · "
        f"{machine['device_kind']}"
        + (f" (rescored {now['date']})" if measured else ""),
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
