"""Which code trained a run: one entry in ``run.json`` per training segment.

A run directory is trained by one or more :func:`agentrl.train.fit` calls
(a resume continues it), possibly by different agentrl code. Each call
that runs updates appends a segment to ``run.json``'s ``"segments"``::

    {"from_step": 0, "to_step": 3000, "code_sha256": "…",
     "agentrl_version": "…", "date": "2026-11-30T12:00:00+00:00"}

(``to_step`` is where the call meant to stop; a stopped call's successor
starts where it left off). ``agentrl reproduce`` reuses a finished run as
it is, so its record says whether the run was trained by the code that
evaluated it (:func:`training_code`). Runs written before segments were
recorded (session 52) have none: their training code is unknown.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from agentrl.provenance import code_digest
from agentrl.tables import write_text
from agentrl.version import __version__

#: ``run.json``'s key for the list of training segments
SEGMENTS = "segments"


def kept_segments(run_json: Path) -> list[dict[str, Any]]:
    """The segments an existing ``run.json`` records (``[]``: none, or no
    file), for a rewrite of ``run.json`` to carry over."""
    if not run_json.is_file():
        return []
    try:
        segments = json.loads(run_json.read_text()).get(SEGMENTS, [])
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        raise ValueError(f"{run_json} is not a JSON object (damaged?)") from None
    if not isinstance(segments, list) or not all(
        isinstance(s, dict) and isinstance(s.get("code_sha256"), str) for s in segments
    ):
        raise ValueError(
            f"{run_json}: {SEGMENTS!r} must be a list of objects with a "
            "'code_sha256' string (damaged?)"
        )
    return segments


def record_segment(run_dir: Path, from_step: int, to_step: int) -> None:
    """Append the segment ``from_step .. to_step`` trained by this code to
    ``run_dir/run.json`` (written by the run's record first)."""
    path = Path(run_dir) / "run.json"
    info = json.loads(path.read_text())
    info[SEGMENTS] = [
        *kept_segments(path),
        {
            "from_step": int(from_step),
            "to_step": int(to_step),
            "code_sha256": code_digest([]),
            "agentrl_version": __version__,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        },
    ]
    write_text(path, json.dumps(info, indent=2))


def training_code(run_dir: Path) -> list[str] | None:
    """The distinct code digests that trained ``run_dir``, in order of first
    use; ``None`` where the run records no segments (trained before they
    were recorded, or never trained)."""
    segments = kept_segments(Path(run_dir) / "run.json")
    if not segments:
        return None
    return list(dict.fromkeys(s["code_sha256"] for s in segments))


def provenance(run_dir: Path) -> dict[str, Any]:
    """``{"trained_by": training_code(run_dir), "evaluated_by": digest}``:
    a reproduction record's account of which code made its numbers."""
    return {"trained_by": training_code(run_dir), "evaluated_by": code_digest([])}


def trained_by_other_code(record: dict[str, Any]) -> bool:
    """Whether a :func:`provenance` record shows training by code other than
    the evaluating code, or by unrecorded code (a record without one, made
    before session 52, counts as unrecorded)."""
    trained = record.get("trained_by")
    return trained is None or trained != [record.get("evaluated_by")]
