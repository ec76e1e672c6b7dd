"""How often the committed reproductions' acting-rule choices were resolved.

Every ``agentrl reproduce`` record keeps, per learner and seed (and for the
expert-distillation control), the validation value of each acting rule it
tried with its 95% CI and the rule chosen. This reads them all (no
training, no evaluation) and says per record how many choices were clear:

- ``margin`` (records written since the selection kept it): the paired
  CI over validation tasks of the chosen rule minus the runner-up lies
  above 0, over at least 6 tasks (``metrics.MIN_RESOLVING_TASKS``; older
  records called a CI over 2 tasks resolved, judged again here);
- ``separated`` (every record): the chosen rule's CI lies above the
  runner-up's. Two unpaired CIs are a conservative test (they ignore that
  both rules saw the same tasks and keys), so "not separated" is not
  proof of a coin flip, but "separated" is a clear choice.

    python benchmarks/selection_margins.py [--name selection_margins]

Writes ``<name>.json`` / ``.md`` into the results folder.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

from agentrl.evaluate.metrics import is_resolved
from agentrl.evaluate.reproduce_record import write_record
from agentrl.evaluate.selection import CRITERIA, recorded_field
from agentrl.project import results_dir


def selections(protocol: dict) -> Iterator[tuple[str, int, dict]]:
    """``(learner, seed, selection)`` of a record's protocol, controls too."""
    for learner, records in protocol.items():
        for rec in records:
            yield learner, rec["seed"], rec["selection"]
            expert = rec.get("expert_distillation")
            if expert:
                yield f"{learner}/expert_distillation", rec["seed"], expert["selection"]


def judge(selection: dict) -> dict | None:
    """The chosen rule against the runner-up; ``None`` without a rival.

    A rule that scored exactly as the chosen one (``sample_then_greedy``
    that never turned greedy) is the same choice, not a rival, as
    ``selection.choice_margin`` has it: the runner-up is the recorded
    margin's, else the best other rule of another value and CI (judged
    against such a twin, a choice could never be separated).
    """
    values = selection["validation"]
    chosen = selection["choice"]["name"]
    rivals = [n for n in values if n != chosen and not _twin(values[n], values[chosen])]
    if not rivals:
        return None
    field = recorded_field(selection) or "score_last"
    sign = CRITERIA[field][1] if field in CRITERIA else 1.0
    recorded = (selection.get("margin") or {}).get("runner_up")
    best = max(rivals, key=lambda n: sign * values[n]["mean"])
    runner_up = recorded if recorded in values else best
    (c_low, c_high), (r_low, r_high) = values[chosen]["ci"], values[runner_up]["ci"]
    separated = c_low > r_high if sign > 0 else c_high < r_low
    margin = selection.get("margin")
    ids = selection.get("validation_task_ids")
    return {
        "chosen": chosen,
        "runner_up": runner_up,
        "gap": sign * (values[chosen]["mean"] - values[runner_up]["mean"]),
        "separated": bool(separated),
        "resolved": None if margin is None else is_resolved(margin),
        "validation_tasks": _task_count(ids, margin),
    }


def _twin(a: dict, b: dict) -> bool:
    """Whether two rules' validation value and CI are the same numbers."""
    return a["mean"] == b["mean"] and list(a["ci"]) == list(b["ci"])


def _task_count(ids: list | None, margin: dict | None) -> int | str:
    """How many validation tasks: the ids' count, or for drawn tasks (no ids:
    bandits, or goals drawn beyond a small split) ``"N drawn"`` where the
    margin counted them, else ``"drawn"``."""
    if ids is not None:
        return len(ids)
    if margin is not None:
        return f"{margin['tasks'] + margin.get('dropped', 0)} drawn"
    return "drawn"


def survey(folder: Path) -> list[dict]:
    """One row per reproduction record in ``folder`` that made choices."""
    rows = []
    for path in sorted(folder.glob("repro_*.json")):
        protocol = json.loads(path.read_text())["results"].get("protocol") or {}
        judged = [
            (learner, seed, j)
            for learner, seed, sel in selections(protocol)
            if (j := judge(sel)) is not None
        ]
        if not judged:
            continue
        tasks = sorted({str(j["validation_tasks"]) for *_, j in judged})
        with_margin = [j for *_, j in judged if j["resolved"] is not None]
        rows.append(
            {
                "record": path.stem,
                "choices": len(judged),
                "separated": sum(j["separated"] for *_, j in judged),
                "with_margin": len(with_margin),
                "resolved": sum(j["resolved"] for j in with_margin),
                "validation_tasks": tasks,
                "choices_detail": [
                    {"learner": learner, "seed": seed, **j}
                    for learner, seed, j in judged
                ],
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--name", default="selection_margins", help="record name")
    args = p.parse_args(argv)
    rows = survey(results_dir())
    if not rows:
        raise SystemExit(f"no reproduction records with choices in {results_dir()}")
    total = sum(r["choices"] for r in rows)
    separated = sum(r["separated"] for r in rows)
    table = [
        {
            "record": r["record"],
            "choices": r["choices"],
            "separated (unpaired CIs)": r["separated"],
            "resolved (paired margin)": (
                f"{r['resolved']} of {r['with_margin']}" if r["with_margin"] else "–"
            ),
            "validation tasks": ", ".join(r["validation_tasks"]),
        }
        for r in rows
    ]
    notes = (
        f"{len(rows)} records, {total} acting-rule choices (learners and "
        f"expert-distillation controls, per seed); the chosen rule's validation "
        f"CI lies above the runner-up's in {separated} ({separated / total:.0%}). "
        "Unpaired CIs are conservative: both rules saw the same tasks and keys. "
        "The paired margin (chosen minus runner-up per validation task) is "
        "recorded by selections made since it was added."
    )
    path = write_record(args.name, {"records": rows}, [], table, notes)
    print(path.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
