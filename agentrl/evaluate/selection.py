"""Protocol choices made on validation tasks, by a stated rule.

Which acting rule (sampling, greedy, sampling until the first reward then
greedy; a temperature), which checkpoint or
which training variant (an AD episode stride) to report is a choice; made
on the test tasks it would inflate the reported number. Here every such
choice is made on the split's *validation* tasks (:mod:`agentrl.envs.tasks`)
and recorded, and the test tasks are evaluated once, for the chosen
candidate only:

>>> cands = acting_candidates(run_dir)            # one per acting rule
>>> sel = select(cands)                           # validation tasks only
>>> results, title = evaluate_choice(sel)         # test tasks, once

Candidates of one run and checkpoint share the run opened once and the
model's compiled program (every rule is a lane of it:
:mod:`agentrl.evaluate.programs`), so trying N rules compiles once.

The rule: evaluate every candidate on the same validation tasks with the
same key, score each by ``criterion`` (default ``"auto"``: the mean
last-episodes normalized score where the env has an oracle, else minus the
final regret for bandits, else the last-episodes return), and pick the
best; ties go to the candidate listed first (list the plainest first).
:class:`Selection` records the candidates, every validation value with its
CI, the criterion and the choice (``to_json``), and the choice's *margin*:
the chosen candidate minus the runner-up, paired per validation task (all
candidates see the same tasks and key), with a 95% bootstrap CI. A margin
whose CI holds 0 is an unresolved choice: the validation tasks cannot tell
the two apart, and another draw of them may pick the other (raise
``eval.validation_tasks``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import agentrl.evaluate.metrics as metrics
from agentrl.evaluate.report import summarize_method
from agentrl.evaluate.run import run_results
from agentrl.train.checkpoint import complete_steps
from agentrl.train.rundir import load_run

#: ``criterion -> (summary field, sign)``: the chosen candidate maximises
#: ``sign * summary[field]["mean"]``.
CRITERIA = {
    "score_last": ("score_last", 1.0),
    "return_last": ("return_last", 1.0),
    "auc": ("auc", 1.0),
    "regret_final": ("regret_final", -1.0),
}

#: The acting rules tried by default (plainest first). Each is a set of
#: ``EvalConfig`` overrides.
ACTING_RULES: dict[str, dict[str, Any]] = {
    "sample": {"acting": "sample", "temperature": 1.0},
    "greedy": {"acting": "greedy"},
    "sample_then_greedy": {"acting": "sample_then_greedy", "temperature": 1.0},
}


def candidate_rules(acting: str) -> dict[str, dict[str, Any]]:
    """The acting rules a reproduction chooses among: :data:`ACTING_RULES`,
    and after them a preset's own ``eval.acting`` where it is none of them
    (RA-DT's reference rule, ``sample_above_median``)."""
    if acting in ACTING_RULES:
        return ACTING_RULES
    return {**ACTING_RULES, acting: {"acting": acting, "temperature": 1.0}}


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One protocol setting: a run, a checkpoint and ``EvalConfig`` overrides."""

    name: str
    run_dir: Path
    step: int | None = None
    eval: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "run_dir": str(self.run_dir),
            "step": self.step,
            "eval": dict(self.eval),
        }


@dataclasses.dataclass
class Selection:
    """The outcome of :func:`select` (all numbers on validation tasks)."""

    criterion: str
    field: str
    choice: Candidate
    candidates: list[Candidate]
    validation: dict[str, dict[str, Any]]
    task_ids: list[int] | None
    margin: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": (
                f"max over candidates of {'-' if CRITERIA[self.field][1] < 0 else ''}"
                f"mean {self.field} on validation tasks; ties to the first listed"
            ),
            "criterion": self.criterion,
            "field": self.field,
            "choice": self.choice.to_json(),
            "candidates": [c.to_json() for c in self.candidates],
            "validation": self.validation,
            "validation_task_ids": self.task_ids,
            "margin": self.margin,
        }


def acting_candidates(
    run_dir: str | Path,
    rules: dict[str, dict[str, Any]] | None = None,
    step: int | None = None,
) -> list[Candidate]:
    """One candidate per acting rule (default :data:`ACTING_RULES`)."""
    rules = ACTING_RULES if rules is None else rules
    return [Candidate(n, Path(run_dir), step, dict(e)) for n, e in rules.items()]


def checkpoint_candidates(
    run_dir: str | Path, eval_overrides: dict[str, Any] | None = None
) -> list[Candidate]:
    """One candidate per checkpoint the run kept (oldest first)."""
    steps = sorted(complete_steps(Path(run_dir) / "checkpoints"))
    if not steps:
        raise ValueError(f"{run_dir} has no checkpoints")
    return [
        Candidate(f"step{s}", Path(run_dir), s, dict(eval_overrides or {}))
        for s in steps
    ]


def resolve_criterion(criterion: str, summary: dict[str, Any]) -> str:
    """The summary field ``criterion`` names (``"auto"``: see the module)."""
    if criterion == "auto":
        for field in ("score_last", "regret_final", "return_last"):
            if field in summary:
                return field
    if criterion not in CRITERIA:
        raise ValueError(
            f"criterion must be 'auto' or one of {', '.join(CRITERIA)}, "
            f"got {criterion!r}"
        )
    if criterion not in summary:
        raise ValueError(f"criterion {criterion!r} is not defined for this env")
    return criterion


def criterion_values(result: Any, field: str, last_k: int) -> np.ndarray:
    """``[task]`` values of one evaluation whose mean is ``summary[field]``.

    ``result`` is one run's :class:`~agentrl.evaluate.EvalResult`; the
    values are those :func:`~agentrl.evaluate.report.summarize_method`
    averages (``auc`` on the normalized score where some task has one, NaN
    for the tasks without, as the summary leaves them out).
    """
    returns = np.asarray(result.returns, np.float64)  # [task, episode]
    normalized = result.normalized
    k = max(1, min(last_k, returns.shape[-1]))
    if field == "score_last":
        return np.asarray(normalized, np.float64)[..., -k:].mean(-1)
    if field == "return_last":
        return returns[..., -k:].mean(-1)
    if field == "regret_final":
        return np.asarray(result.regret, np.float64)[..., -1]
    curve = returns
    if normalized is not None:
        normalized = np.asarray(normalized, np.float64)
        defined = np.isfinite(normalized).all(axis=-1)  # [task]
        if defined.any():
            curve = np.where(defined[:, None], normalized, np.nan)
    return metrics.curve_auc(curve)


def recorded_field(selection: dict[str, Any]) -> str | None:
    """The criterion's summary field of a selection's JSON (``to_json``).

    Records made before selections named their ``field`` state it only in
    their ``rule`` ("max over candidates of -mean regret_final on ...");
    ``None`` if neither names one.
    """
    if selection.get("field"):
        return selection["field"]
    head = selection.get("rule", "").split(" on ")[0]
    return head.rsplit(" ", 1)[-1] if "mean " in head else None


def choice_margin(
    values: dict[str, np.ndarray], best: str, sign: float, seed: int = 0
) -> dict[str, Any] | None:
    """The chosen candidate ``best`` minus the runner-up, paired per task.

    ``values`` maps candidate names (in listing order) to ``[task]`` values
    on the same validation tasks; the runner-up is the other candidate of
    the highest ``sign * mean`` (ties to the first listed) among those that
    scored differently: a candidate with the chosen one's values on every
    task (e.g. ``sample_then_greedy`` where no reward is ever positive, so
    it never turns greedy) is the same choice, not a rival. Tasks where
    either value is undefined are left out (counted in ``dropped``). Returns
    ``{"runner_up", "mean", "ci", "tasks", "dropped", "resolved"}`` (``sign``
    applied: a positive margin favours the choice; ``resolved``: the 95%
    bootstrap CI over tasks lies above 0), or ``None`` without a rival or a
    task defined for both.
    """
    others = [
        n
        for n in values
        if n != best and not np.array_equal(values[n], values[best], equal_nan=True)
    ]
    if not others:
        return None
    runner_up = max(
        others, key=lambda n: (sign * np.nanmean(values[n]), -others.index(n))
    )
    diff = sign * (values[best] - values[runner_up])
    if not np.isfinite(diff).any():
        return None
    return {"runner_up": runner_up, **metrics.paired_ci(diff, seed=seed)}


def select(
    candidates: Sequence[Candidate],
    criterion: str = "auto",
    num_episodes: int | None = None,
    num_tasks: int | None = None,
    seed: int | None = None,
    last_k: int = 10,
) -> Selection:
    """Evaluate ``candidates`` on validation tasks; pick by ``criterion``.

    Every candidate sees the same validation tasks and key (each run's own
    split: give candidates of one split, e.g. one run or runs of one
    dataset). No baselines are run. Raises ``ValueError`` if the split has no
    validation tasks (a two-way split of agentrl <= 0.2).
    """
    if not candidates:
        raise ValueError("select needs at least one candidate")
    names = [c.name for c in candidates]
    if len(set(names)) != len(names):
        raise ValueError(f"candidate names must be unique, got {names}")
    validation: dict[str, dict[str, Any]] = {}
    per_task: dict[str, np.ndarray] = {}
    field, ids = None, None
    opened: dict[tuple, Any] = {}  # each run and step opened once
    for cand in candidates:
        where = (cand.run_dir, cand.step)
        if where not in opened:
            opened[where] = load_run(cand.run_dir, cand.step)
        results, _ = run_results(
            cand.run_dir,
            num_episodes,
            num_tasks,
            seed,
            baselines=[],
            tasks="validation",
            step=cand.step,
            eval_overrides=cand.eval,
            run=opened[where],
        )
        result = next(iter(results.values()))
        summary = summarize_method(result, last_k=last_k)
        field = field or resolve_criterion(criterion, summary)
        ids = result.metadata.get("task_ids")
        validation[cand.name] = {
            "mean": summary[field]["mean"],
            "ci": summary[field]["mean_ci"],
            "step": result.metadata.get("step"),
        }
        per_task[cand.name] = criterion_values(result, field, summary["last_k"])
    sign = CRITERIA[field][1]
    best = max(
        range(len(candidates)),
        key=lambda i: (sign * validation[names[i]]["mean"], -i),
    )
    margin = choice_margin(per_task, names[best], sign)
    return Selection(
        criterion, field, candidates[best], list(candidates), validation, ids, margin
    )


def evaluate_choice(
    selection: Selection,
    num_episodes: int | None = None,
    num_tasks: int | None = None,
    seed: int | None = None,
    baselines: list[str] | None = None,
    control: str | None = None,
    source_cache: Path | None = None,
) -> tuple[dict[str, Any], str]:
    """The chosen candidate (and baselines) on the *test* tasks, once.

    The selection is recorded in the model's result metadata;
    ``source_cache`` as for :func:`~agentrl.evaluate.run.evaluate_run`.
    """
    c = selection.choice
    results, title = run_results(
        c.run_dir,
        num_episodes,
        num_tasks,
        seed,
        baselines,
        tasks="test",
        control=control,
        step=c.step,
        eval_overrides=c.eval,
        source_cache=source_cache,
    )
    label = next(iter(results))
    results[label].metadata["selection"] = selection.to_json()
    return results, f"{title} ({c.name}, chosen on validation tasks)"
