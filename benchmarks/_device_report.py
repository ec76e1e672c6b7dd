"""The device check's five files: summary JSON and markdown, the records'
markdown, and one archive of the rest (``benchmarks/_device_check.py``)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

#: the archive stays under the run tool's 16 MiB a file; files above this are
#: left out of it
ARCHIVE_FILE_LIMIT = 2 << 20
#: the run tool brings back files of up to 16 MiB
ARCHIVE_LIMIT = 15 << 20


def _md_table(rows: list[dict], keys: list[str]) -> str:
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        cells = [_cell(row.get(k, "")) for k in keys]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "/").replace("\n", " ")


def summary_markdown(summary: dict) -> str:
    """The steps and their targets as markdown tables."""
    steps = summary["steps"]
    lines = [
        f"# Device check ({summary['mode']})",
        "",
        f"{summary['date']} · {_device_name(summary['device'])} · "
        f"{summary['seconds']:.0f} s"
        + (f" of a {summary['budget_s']:.0f} s budget" if summary["budget_s"] else ""),
        "",
        *([f"Wheels: {summary['wheels']}.", ""] if summary.get("wheels") else []),
        _md_table(
            steps,
            ["name", "status", "seconds", "limit_s", "expected_s", "reason", "date"],
        ),
        "",
    ]
    if summary.get("complete") is False:
        lines += [
            "**Still running when this was written** (written after every "
            "step; a check killed before its end leaves only this summary).",
            "",
        ]
    for s in steps:
        if s.get("kind") == "preflight" and s.get("status") in ("failed", "timeout"):
            lines += [f"**Stopped**: {s.get('reason', 'preflight failed')}.", ""]
        found = s.get("preflight") or {}
        if s.get("kind") == "preflight" and found.get("optional_missing"):
            missing = ", ".join(sorted(found["optional_missing"]))
            lines += [f"Preflight: cannot import {missing} (their steps fail).", ""]
    probes = [s for s in steps if s.get("kind") == "probe"]
    if probes:
        chosen = probes[-1].get("chosen")
        said = f"`{chosen['variant']}` (`{chosen['flags']}`)" if chosen else "none"
        if not chosen and probes[-1].get("fallback"):
            said += f"; the later steps got `{probes[-1]['fallback']}`"
        lines += [f"XLA flags the probe chose for the later steps: {said}.", ""]
    targets = [{"step": s["name"], **t} for s in steps for t in s.get("targets", [])]
    if targets:
        keys = ["step", "name", "value", "target", "met"]
        lines += ["## Targets", "", _md_table(targets, keys), ""]
    failed = [s for s in steps if s.get("status") in ("failed", "timeout")]
    for s in failed:
        lines += [f"## {s['name']}: {s['status']} (last lines)", "", "```"]
        lines += s.get("tail", []) + ["```", ""]
    return "\n".join(lines)


def _device_name(device: dict) -> str:
    gpus = device.get("gpu")
    return "; ".join(gpus) if gpus else f"no GPU, {device.get('cpu_count')} CPU cores"


def _records_markdown(results: Path, reproductions: bool) -> str:
    """The reproductions' (``repro_*.md``) or the benchmarks' (the other)
    markdown records of ``results``, one after the other."""
    parts = ["# " + ("Reproductions" if reproductions else "Benchmarks"), ""]
    for path in sorted(results.glob("*.md")):
        if path.name.startswith("repro_") == reproductions:
            text = path.read_text()  # each record's title one level down
            parts += ["#" + text if text.startswith("# ") else text, ""]
    if len(parts) == 2:
        parts.append("(none written)")
    return "\n".join(parts)


def _small_files(root: Path, skip: tuple[str, ...]) -> list[Path]:
    """Files under ``root`` up to :data:`ARCHIVE_FILE_LIMIT` bytes, outside
    folders named in ``skip`` (checkpoints, datasets)."""
    out = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.stat().st_size > ARCHIVE_FILE_LIMIT:
            continue
        rel = path.relative_to(root).parts
        if any(part in skip or part.endswith(skip) for part in rel):
            continue
        out.append(path)
    return out


def _keep_tail(path: Path, limit: int) -> None:
    """Cut ``path`` to its last ``limit`` bytes (a long log's end matters)."""
    size = path.stat().st_size
    if size <= limit:
        return
    with open(path, "rb") as f:
        f.seek(size - limit + 200)
        tail = f.read()
    note = f"[... first {size - len(tail):,} bytes cut ...]\n"
    path.write_bytes(note.encode() + tail)


def write_summary(out: Path, summary: dict) -> list[Path]:
    """``summary.json`` and ``summary.md`` in ``out`` (cheap: the check
    rewrites them after every step, so a check killed before its end still
    leaves what it did)."""
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "summary.json": json.dumps(summary, indent=1) + "\n",
        "summary.md": summary_markdown(summary),
    }
    for name, text in files.items():
        tmp = out / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(out / name)  # never half a file, whenever it is killed
    return [out / n for n in files]


def write_outputs(out: Path, work: Path, summary: dict) -> list[Path]:
    """The five files of the check in ``out`` (see the module docstring)."""
    paths = write_summary(out, summary)
    results = work / "results"
    files = {
        "reproductions.md": _records_markdown(results, reproductions=True),
        "benchmarks.md": _records_markdown(results, reproductions=False),
    }
    for name, text in files.items():
        (out / name).write_text(text)
    for log in (work / "logs").glob("*.log"):
        _keep_tail(log, ARCHIVE_FILE_LIMIT)
    archive = out / "archive.tar.gz"
    _archive(archive, work, ("logs", "results", "runs"))
    if archive.stat().st_size > ARCHIVE_LIMIT:  # the runs' files go first
        _archive(archive, work, ("logs", "results"))
    return [*paths, *(out / n for n in files), archive]


def _archive(archive: Path, work: Path, folders: tuple[str, ...]) -> None:
    # datasets: a run's own and those reproduce keeps for reuse (runs/datasets)
    skip = (
        "checkpoints",
        "dataset",
        "datasets",
        "-data",
        "tmp",
        ".orbax-checkpoint-tmp",
    )
    with tarfile.open(archive, "w:gz") as tar:
        for folder in folders:
            for path in _small_files(work / folder, skip):
                tar.add(path, arcname=str(path.relative_to(work)))
