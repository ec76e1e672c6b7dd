"""Paired comparison of two sweep rows over the same tasks.

A sweep row keeps its per-member, per-task scores (``task_scores``:
``[seed][task]``, held-out; ``train_task_scores``: the same on the training
tasks with ``eval_train_tasks``) beside the identity of the task set they
were measured on (``task_set``, ``train_task_set``: :func:`task_set_id` of
the tasks' params). Two rows on the same tasks (every cell of one sweep
faces the same held-out tasks with the same evaluation key) can then be
compared per ``(seed, task)`` pair, which removes the task-to-task spread
the rows' own intervals carry: :func:`paired_row_difference`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agentrl.evaluate.metrics import paired_ci
from agentrl.provenance import tree_digest

#: per-task score field -> the row field naming its task set
TASK_SET_FIELDS = {"task_scores": "task_set", "train_task_scores": "train_task_set"}


def task_set_id(params: Any) -> str:
    """A short hash naming tasks ``params [task, ...]`` (any pytree).

    The first 16 hex digits of a SHA-1 over every leaf's dtype, shape and
    bytes, in tree order (:func:`agentrl.provenance.tree_digest`): equal
    exactly when the tasks are the same, in the same order.
    """
    return tree_digest(params, "sha1")[:16]


def _per_task(row: dict[str, Any], field: str, name: str) -> np.ndarray:
    """``[seed, task]`` float64 from a row's nested list (``None`` -> NaN)."""
    if field not in row:
        raise ValueError(
            f"row {name} ({row.get('setting', '?')!r}) has no {field!r}: it was "
            "written without per-task scores (a sweep record from before they "
            "were kept, or a sweep without evaluation); rerun the setting to pair"
        )
    try:  # numpy reads JSON's None (tables.json_safe's NaN) back as NaN
        values = np.asarray(row[field], dtype=np.float64)
    except (TypeError, ValueError):
        values = np.empty(0)  # ragged or not numbers: reported below
    if values.ndim != 2:
        raise ValueError(
            f"row {name}'s {field!r} must be a [seed][task] list of numbers"
        )
    return values


def _check_tasks(a: dict[str, Any], b: dict[str, Any], field: str) -> None:
    """Raise unless both rows name the same task set for ``field``."""
    key = TASK_SET_FIELDS.get(field, f"{field}_set")
    ids = [r.get(key) for r in (a, b)]
    if None in ids:
        raise ValueError(
            f"a row has no {key!r} (the identity of the tasks behind {field!r}): "
            "without it a pairing over the same tasks cannot be checked"
        )
    if ids[0] != ids[1]:
        raise ValueError(
            f"the rows were scored on different tasks ({key} {ids[0]} vs "
            f"{ids[1]}): {field!r} can be paired only over identical tasks"
        )


def paired_row_difference(
    row_a: dict[str, Any],
    row_b: dict[str, Any],
    field: str = "task_scores",
    seed: int = 0,
) -> dict[str, Any]:
    """``row_a`` minus ``row_b``, paired per ``(seed index, task index)``.

    Both rows need ``field`` (``[seed][task]``, the same shape) and the same
    task identity (``task_set`` for ``task_scores``, ``train_task_set`` for
    ``train_task_scores``). A task undefined (``NaN``/``None``) for any
    seed of either row is left out. Each task's difference is averaged over
    seeds, and the 95% percentile bootstrap CI
    (:func:`agentrl.evaluate.metrics.paired_ci`) resamples tasks, the
    unit both rows share, each with all its seeds.

    Returns:
      ``{"field", "mean", "ci": [low, high], "pairs", "tasks", "dropped",
      "resolved"}``: ``pairs`` = seeds x kept tasks, ``dropped`` the tasks
      left out, ``resolved`` whether the CI lies above 0 (``a`` higher).

    Raises:
      ValueError: a row lacks ``field`` or its task identity, the shapes
        differ, the task sets differ, or no task is defined in both.
    """
    a, b = _per_task(row_a, field, "a"), _per_task(row_b, field, "b")
    if a.shape != b.shape:
        raise ValueError(
            f"{field!r} shapes differ ([seed, task] {a.shape} vs {b.shape}): "
            "pairs need the same seeds and tasks"
        )
    _check_tasks(row_a, row_b, field)
    diff = a - b  # [seed, task]
    keep = np.isfinite(diff).all(axis=0)
    if not keep.any():
        raise ValueError(f"no task has a finite {field!r} in both rows")
    paired = paired_ci(diff[:, keep].mean(axis=0), seed=seed)  # over [task]
    return {
        "field": field,
        **paired,
        "pairs": int(diff.shape[0] * keep.sum()),
        "dropped": int((~keep).sum()),  # paired_ci saw the kept tasks only
    }
