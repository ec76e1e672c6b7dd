"""Per-goal results: where on the task space a learner succeeds or fails.

An average over held-out tasks hides which tasks are solved. For grid task
families whose task is a goal cell (Dark Room and its variants:
``params.goal [2]``, a ``size`` and a start cell) this module gives

- :func:`per_goal` the last-episodes score of every evaluated goal cell,
  pooled over training seeds (each seed has its own split, so the cells
  covered grow with the seeds);
- :func:`by_distance` those scores grouped by the Manhattan distance from
  the start cell to the goal (far goals need more exploration), each group
  with a bootstrap CI over its (seed, task) pairs;
- :func:`plot_goal_heatmap` a heatmap of the score per goal cell (blank:
  never a held-out goal), the start cell marked.

:func:`goal_layout` says whether an environment has that layout; reports
skip the pictures where it does not (bandits, Point-Robot).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

import agentrl.envs.grid as grid
import agentrl.evaluate.metrics as metrics
from agentrl.tables import write_figure


def goal_layout(env: Any) -> tuple[int, np.ndarray] | None:
    """``(size, start [2] as (x, y))`` for goal-cell grid tasks, else ``None``."""
    size, start = getattr(env, "size", None), getattr(env, "start", None)
    if not isinstance(size, int) or not isinstance(start, str):
        return None
    params = getattr(env, "default_params", None)
    if np.shape(getattr(params, "goal", None)) != (2,):
        return None

    return size, np.asarray(grid.start_position(size, start))


def task_scores(runs: Sequence[Any], last_k: int) -> np.ndarray:
    """``[seed, task]`` last-``last_k``-episodes normalized score (else return)."""
    field = "normalized" if all(r.normalized is not None for r in runs) else "returns"
    values = np.stack([np.asarray(getattr(r, field), np.float64) for r in runs])
    return values[..., -last_k:].mean(-1)


def goal_cells(env: Any, task_ids: Sequence[Sequence[int]]) -> np.ndarray:
    """``[seed, task, 2]`` goal cells ``(x, y)`` of each seed's task ids."""
    ids = np.asarray(task_ids, np.int32)
    goals = jax.vmap(jax.vmap(lambda i: env.params_for_task(i).goal))(ids)
    return np.asarray(goals)


def per_goal(
    env: Any, runs: Sequence[Any], task_ids: Sequence[Sequence[int]], last_k: int
) -> dict[tuple[int, int], list[float]]:
    """``{(x, y): [score per (seed, task) with that goal]}``."""
    scores = task_scores(runs, last_k)
    cells = goal_cells(env, task_ids)
    out: dict[tuple[int, int], list[float]] = {}
    for cell, score in zip(cells.reshape(-1, 2), scores.reshape(-1), strict=True):
        out.setdefault((int(cell[0]), int(cell[1])), []).append(float(score))
    return out


def by_distance(
    env: Any,
    runs: Sequence[Any],
    task_ids: Sequence[Sequence[int]],
    last_k: int,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Rows ``{"distance", "pairs", "mean", "low", "high"}`` by start-goal distance.

    ``pairs`` counts (seed, task) pairs; the CI resamples them (pooled).
    """
    layout = goal_layout(env)
    if layout is None:
        raise ValueError(f"{getattr(env, 'name', env)} has no goal-cell layout")
    _, start = layout
    scores = task_scores(runs, last_k).reshape(-1)
    cells = goal_cells(env, task_ids).reshape(-1, 2)
    dist = np.abs(cells - start[None]).sum(-1)
    rows = []
    for d in np.unique(dist):
        x = scores[(dist == d) & np.isfinite(scores)]
        if x.size == 0:
            continue
        low, high = metrics.bootstrap_ci(x[None], seed=seed)
        rows.append(
            {
                "distance": int(d),
                "pairs": int(x.size),
                "mean": float(x.mean()),
                "low": low,
                "high": high,
            }
        )
    return rows


def goal_grid(size: int, cells: dict[tuple[int, int], list[float]]) -> np.ndarray:
    """``[size (y), size (x)]`` mean score per goal cell, NaN where none."""
    grid = np.full((size, size), np.nan)
    for (x, y), values in cells.items():
        finite = [v for v in values if np.isfinite(v)]
        if finite:
            grid[y, x] = float(np.mean(finite))
    return grid


def plot_goal_heatmap(
    env: Any,
    cells: dict[tuple[int, int], list[float]],
    path: str | Path,
    title: str = "",
    label: str = "score",
) -> Path:
    """A heatmap of the mean score per goal cell; the start cell is marked."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    size, start = goal_layout(env)
    grid = goal_grid(size, cells)
    fig = Figure(figsize=(5, 4.4), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    image = ax.imshow(grid, origin="lower", cmap="viridis", vmin=0.0, vmax=1.0)
    for (x, y), values in cells.items():
        n = len(values)
        mean = np.nanmean(values)
        ax.text(x, y, f"{mean:.2f}\n({n})", ha="center", va="center",
                fontsize=5, color="k" if mean > 0.6 else "w")  # fmt: skip
    ax.plot([start[0]], [start[1]], marker="*", color="red", markersize=10)
    ax.set_xticks(range(size))
    ax.set_yticks(range(size))
    ax.set_xlabel("goal x")
    ax.set_ylabel("goal y")
    ax.set_title(title or f"{label} per held-out goal (n pairs); * start", fontsize=8)
    fig.colorbar(image, ax=ax, label=label)
    fig.tight_layout()
    write_figure(path, fig)
    return Path(path)
