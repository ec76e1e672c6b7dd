"""File a device check's five files into the repository's GPU ledger.

Run here, after a GPU call, with the folder its files came back in::

    python benchmarks/device_ledger.py /work/.device/N [/work/.device/M ...]

For each check (in the order given): its five files go into
``LEDGER/run-DATE/`` (DATE from its summary, to the minute), its records
(``results/*.json``, ``*.md``, the kept HLO) into ``LEDGER/``, a
reproduction's record and folder (``repro_*``) into ``benchmarks/results/``
beside the CPU ones, and its steps into the ledger,
``LEDGER/summary.{json,md}``. LEDGER is ``benchmarks/results/gpu`` for a
default check and ``benchmarks/results/gpu_seeds5_NAME`` for a ``--seeds5
NAME`` one (by the summary's mode: where the check reads its
``--previous``).

The ledger keeps one entry per step, the better of the earlier and the
later: ``ok`` beats ``partial`` beats a failure (``failed``, ``timeout``);
of the same standing the later wins; skipped steps change nothing. A step
whose records did not come back (no archive: the check was killed before
its end and left only its summary) is filed as ``partial``, with its
seconds (the check's expectation of its time), never as ``ok``. The device
check skips the ledger's ``ok`` steps (``--redo`` runs them again).

A summary of a ``--smoke`` check or of a check with no GPU is refused
(exit status 2, nothing written) unless ``--any-device``. Files are copied
without their modes (the run tool's files_at are read-only).

Also: ``--gpu DIR`` (the ledger, for every check given; default by mode as
above), ``--results DIR`` (default ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import travel_size  # noqa: E402
from _device_report import summary_markdown  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIVE = ("summary.json", "summary.md", "reproductions.md", "benchmarks.md")
ARCHIVE = "archive.tar.gz"


#: a step's standing in the ledger: the higher is kept (see the docstring)
RANK = {"ok": 2, "partial": 1}


def merge_steps(ledger: list[dict], steps: list[dict]) -> list[dict]:
    """``ledger``'s entries updated by a later check's ``steps`` (in order;
    a step new to the ledger is appended; skipped steps change nothing;
    an entry is replaced by one of at least its standing, :data:`RANK`)."""
    merged = {s["name"]: s for s in ledger}
    for step in steps:
        if step.get("status") == "skipped" or step.get("skipped_now"):
            continue
        old = merged.get(step["name"])
        rank = RANK.get(step.get("status"), 0)
        if old and RANK.get(old.get("status"), 0) > rank:
            continue
        merged[step["name"]] = step
    return list(merged.values())


def refusal(summary: dict) -> str | None:
    """Why a summary must not go into a GPU ledger (None: it may)."""
    if summary.get("mode") == "smoke":
        return "a --smoke check (the CPU at smoke size)"
    device = summary.get("device")
    if not isinstance(device, dict) or not device.get("gpu"):
        return "a check that ran with no GPU (its summary's device.gpu is empty)"
    return None


def ledger_of(summary: dict, root: Path | None = None) -> Path:
    """The ledger folder of a check's mode (``gpu`` or ``gpu_seeds5_NAME``),
    the one ``_device_check.py`` reads its ``--previous`` from."""
    mode = str(summary.get("mode", "gpu"))
    name = f"gpu_seeds5_{mode.split()[1]}" if mode.startswith("seeds5 ") else "gpu"
    return (root or ROOT) / "benchmarks" / "results" / name


def _copy(src: Path | str, dst: Path | str) -> Path:
    """``src``'s contents into ``dst``, with the default mode (not the
    run tool's read-only one); a read-only ``dst`` is replaced."""
    dst = Path(dst)
    if dst.is_file() or dst.is_symlink():
        dst.unlink()
    shutil.copyfile(src, dst)
    return dst


def _came_back(summary: dict, records: set[str]) -> dict:
    """``summary`` with each ``ok`` step whose records are not all in
    ``records`` (the stems its archive held) made ``partial``."""
    steps = []
    for step in summary.get("steps", []):
        names = step.get("records") or []
        lost = [r for r in names if r not in records]
        if step.get("status") == "ok" and not step.get("skipped_now") and lost:
            step = {
                **step,
                "status": "partial",
                "reason": "its records did not come back: " + ", ".join(lost),
            }
        steps.append(step)
    return {**summary, "steps": steps}


def run_folder(summary: dict) -> str:
    """``run-YYYY-MM-DDTHHMM`` of a check's summary date."""
    date = summary["date"][:16].replace(":", "")
    return f"run-{date}"


def file_check(check: Path, gpu: Path, results: Path) -> dict:
    """File one check's folder; returns its summary (steps whose records
    did not come back made ``partial``)."""
    summary = json.loads((check / "summary.json").read_text())
    run = gpu / run_folder(summary)
    run.mkdir(parents=True, exist_ok=True)
    for name in (*FIVE, ARCHIVE):
        if (check / name).is_file():
            _copy(check / name, run / name)
    records: set[str] = set()
    if (check / ARCHIVE).is_file():
        records = _records(check / ARCHIVE, gpu, results)
    return _came_back(summary, records)


def _records(archive: Path, gpu: Path, results: Path) -> set[str]:
    """The archive's ``results/`` records into the ledger and the results;
    returns the records' names (``NAME`` of each ``results/NAME.json``)."""
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(archive) as tar:
        members = [
            m
            for m in tar.getmembers()
            if m.isfile() and m.name.startswith("results/") and ".." not in m.name
        ]
        tar.extractall(tmp, members=members, filter="data")
        found = Path(tmp) / "results"
        names = set()
        for path in sorted(found.iterdir()) if found.is_dir() else []:
            target = results if path.name.startswith("repro_") else gpu
            if path.is_dir():
                shutil.copytree(
                    path, target / path.name, dirs_exist_ok=True, copy_function=_copy
                )
            else:
                _copy(path, target / path.name)
                if path.suffix == ".json":
                    names.add(path.stem)
    return names


def update_ledger(gpu: Path, summaries: list[dict]) -> dict:
    """Merge ``summaries`` into ``gpu/summary.json`` and rewrite its markdown."""
    gpu.mkdir(parents=True, exist_ok=True)
    path = gpu / "summary.json"
    ledger = json.loads(path.read_text()) if path.is_file() else {"steps": []}
    steps = ledger["steps"]
    for summary in summaries:
        steps = merge_steps(steps, summary["steps"])
    latest = {k: v for k, v in summaries[-1].items() if k not in ("steps", "complete")}
    ledger = {**latest, "steps": steps, "note": LEDGER_NOTE}
    path.write_text(json.dumps(ledger, indent=1) + "\n")
    (gpu / "summary.md").write_text(summary_markdown(ledger) + LEDGER_MD)
    return ledger


LEDGER_NOTE = (
    "the ledger over the checks in run-*/: the better entry of each step (ok "
    "beats partial beats a failure; of the same standing the later) "
    "(benchmarks/device_ledger.py)"
)
LEDGER_MD = """
## Ledger

This file and `summary.json` are the ledger over the device checks in
`run-*/` (each check's own files there): the better entry of each step
(`ok` beats `partial` beats a failure; of the same standing the later),
so a step that failed after it had passed shows its pass here and its
failure in its run's folder; a step whose records did not come back is
`partial` (`benchmarks/device_ledger.py`). The header line is the latest
check's. docs/results.md, "On a GPU", says what the checks showed.
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checks", nargs="+", help="folders of a check's files")
    parser.add_argument(
        "--gpu",
        default=None,
        help="the ledger for every check given (default: benchmarks/results/gpu, "
        "or gpu_seeds5_NAME for a --seeds5 NAME check)",
    )
    parser.add_argument("--results", default=str(ROOT / "benchmarks/results"))
    parser.add_argument(
        "--any-device",
        action="store_true",
        help="file a --smoke check or one with no GPU too (a test ledger)",
    )
    args = parser.parse_args(argv)
    checks = [Path(c) for c in args.checks]
    missing = [str(c) for c in checks if not (c / "summary.json").is_file()]
    if missing:
        parser.error(f"no summary.json in {', '.join(missing)}")
    refused = []
    for check in checks:
        why = refusal(json.loads((check / "summary.json").read_text()))
        if why and not args.any_device:
            refused.append(f"{check}: {why}")
    if refused:
        parser.error(
            "not filed into a GPU ledger (nothing written; --any-device files it "
            "anyway): " + "; ".join(refused)
        )
    results = Path(args.results)
    by_ledger: dict[Path, list[dict]] = {}
    for check in checks:
        summary = json.loads((check / "summary.json").read_text())
        gpu = Path(args.gpu) if args.gpu else ledger_of(summary)
        by_ledger.setdefault(gpu, []).append(file_check(check, gpu, results))
    for gpu, summaries in by_ledger.items():
        ledger = update_ledger(gpu, summaries)
        print(f"{gpu}:")
        for s in ledger["steps"]:
            print(f"  {s['name']}: {s['status']} ({s.get('date', '')})")
    warn_if_too_big()


def warn_if_too_big() -> None:
    """A warning when what a device call sends has outgrown its share
    (:mod:`travel_size`): every filing adds archives to the tree."""
    try:
        size = travel_size.tree_bytes() / 2**20
    except (OSError, subprocess.CalledProcessError):  # not a git checkout
        return
    if size > travel_size.TREE_BUDGET_MIB:
        print(
            f"warning: the working tree is {size:.1f} MiB, over its "
            f"{travel_size.TREE_BUDGET_MIB} MiB share of a device call: shrink "
            "benchmarks/results (old run-*/archive.tar.gz) before the next call",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
