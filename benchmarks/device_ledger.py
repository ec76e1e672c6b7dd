"""File a device check's five files into the repository's GPU ledger.

Run here, after a GPU call, with the folder its files came back in::

    python benchmarks/device_ledger.py /work/.device/N [/work/.device/M ...]

For each check (in the order given): its five files go into
``benchmarks/results/gpu/run-DATE/`` (DATE from its summary, to the
minute), its records (``results/*.json``, ``*.md``, the kept HLO) into
``benchmarks/results/gpu/``, a reproduction's record and folder
(``repro_*``) into ``benchmarks/results/`` beside the CPU ones, and its
steps into the ledger, ``benchmarks/results/gpu/summary.{json,md}``: the
latest entry of each step, except that an ``ok`` entry is replaced only by
a later ``ok`` one (a later failure stays in its run's folder). The device
check skips the ledger's ``ok`` steps (``--redo`` runs them again).

Also: ``--gpu DIR`` (default ``benchmarks/results/gpu``), ``--results DIR``
(default ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _device_report import summary_markdown  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIVE = ("summary.json", "summary.md", "reproductions.md", "benchmarks.md")
ARCHIVE = "archive.tar.gz"


def merge_steps(ledger: list[dict], steps: list[dict]) -> list[dict]:
    """``ledger``'s entries updated by a later check's ``steps`` (in order;
    a step new to the ledger is appended; skipped steps change nothing)."""
    merged = {s["name"]: s for s in ledger}
    for step in steps:
        if step.get("status") == "skipped" or step.get("skipped_now"):
            continue
        old = merged.get(step["name"])
        if old and old.get("status") == "ok" and step.get("status") != "ok":
            continue
        merged[step["name"]] = step
    return list(merged.values())


def run_folder(summary: dict) -> str:
    """``run-YYYY-MM-DDTHHMM`` of a check's summary date."""
    date = summary["date"][:16].replace(":", "")
    return f"run-{date}"


def file_check(check: Path, gpu: Path, results: Path) -> dict:
    """File one check's folder; returns its summary."""
    summary = json.loads((check / "summary.json").read_text())
    run = gpu / run_folder(summary)
    run.mkdir(parents=True, exist_ok=True)
    for name in (*FIVE, ARCHIVE):
        if (check / name).is_file():
            shutil.copy2(check / name, run / name)
    if (check / ARCHIVE).is_file():
        _records(check / ARCHIVE, gpu, results)
    return summary


def _records(archive: Path, gpu: Path, results: Path) -> None:
    """The archive's ``results/`` records into the ledger and the results."""
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(archive) as tar:
        members = [
            m
            for m in tar.getmembers()
            if m.isfile() and m.name.startswith("results/") and ".." not in m.name
        ]
        tar.extractall(tmp, members=members, filter="data")
        found = Path(tmp) / "results"
        for path in sorted(found.iterdir()) if found.is_dir() else []:
            target = results if path.name.startswith("repro_") else gpu
            if path.is_dir():
                shutil.copytree(path, target / path.name, dirs_exist_ok=True)
            else:
                shutil.copy2(path, target / path.name)


def update_ledger(gpu: Path, summaries: list[dict]) -> dict:
    """Merge ``summaries`` into ``gpu/summary.json`` and rewrite its markdown."""
    path = gpu / "summary.json"
    ledger = json.loads(path.read_text()) if path.is_file() else {"steps": []}
    steps = ledger["steps"]
    for summary in summaries:
        steps = merge_steps(steps, summary["steps"])
    latest = {k: v for k, v in summaries[-1].items() if k != "steps"}
    ledger = {**latest, "steps": steps, "note": LEDGER_NOTE}
    path.write_text(json.dumps(ledger, indent=1) + "\n")
    (gpu / "summary.md").write_text(summary_markdown(ledger) + LEDGER_MD)
    return ledger


LEDGER_NOTE = (
    "the ledger over the checks in run-*/: the latest entry of each step; an ok "
    "entry is replaced only by a later ok (benchmarks/device_ledger.py)"
)
LEDGER_MD = """
## Ledger

This file and `summary.json` are the ledger over the device checks in
`run-*/` (each check's own files there): the latest entry of each step,
an `ok` entry replaced only by a later `ok` one, so a step that failed
after it had passed shows its pass here and its failure in its run's
folder (`benchmarks/device_ledger.py`). The header line is the latest
check's. docs/results.md, "On a GPU", says what the checks showed.
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checks", nargs="+", help="folders of a check's files")
    parser.add_argument("--gpu", default=str(ROOT / "benchmarks/results/gpu"))
    parser.add_argument("--results", default=str(ROOT / "benchmarks/results"))
    args = parser.parse_args(argv)
    checks = [Path(c) for c in args.checks]
    missing = [str(c) for c in checks if not (c / "summary.json").is_file()]
    if missing:
        parser.error(f"no summary.json in {', '.join(missing)}")
    gpu, results = Path(args.gpu), Path(args.results)
    summaries = [file_check(c, gpu, results) for c in checks]
    ledger = update_ledger(gpu, summaries)
    for s in ledger["steps"]:
        print(f"{s['name']}: {s['status']} ({s.get('date', '')})")


if __name__ == "__main__":
    main()
