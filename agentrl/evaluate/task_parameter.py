"""Return against a scalar task parameter (target velocity, goal angle, ...).

A family whose tasks vary along one scalar can say so with an optional
protocol on the environment:

- ``env.task_parameter_name``: what the scalar is (the plot's axis label);
- ``env.task_parameter(params) -> []``: one task's value (jittable; it is
  vmapped over the ``[task]`` axis here).

Point-Robot is the first user (the goal's angle, or its distance from the
origin); a locomotion family gives its target velocity or direction.
:func:`task_parameter_metadata` records the evaluated tasks' values in each
result's metadata, and :func:`plot_return_vs_task` draws every method's
final-episode return per task against them (``return_vs_task.png`` of
:func:`agentrl.evaluate.report.write_results`): where on the task range a
learner matches the baselines and where it falls behind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from agentrl.tables import write_figure


def task_parameter(env: Any, params: Any) -> tuple[str, np.ndarray] | None:
    """``(name, values [task])`` of tasks ``params [task, ...]``, or ``None``
    when ``env`` does not expose the protocol (module docstring)."""
    fn = getattr(env, "task_parameter", None)
    name = getattr(env, "task_parameter_name", None)
    if not callable(fn) or not isinstance(name, str):
        return None
    values = np.asarray(jax.vmap(fn)(params), np.float64)
    if values.ndim != 1:
        raise ValueError(
            f"{type(env).__name__}.task_parameter must give one scalar per task, "
            f"got shape {values.shape[1:]}"
        )
    return name, values


def task_parameter_metadata(env: Any, params: Any) -> dict[str, Any]:
    """``{"task_parameter": {"name", "values"}}`` for a result's metadata
    (empty without the protocol)."""
    found = task_parameter(env, params)
    if found is None:
        return {}
    name, values = found
    return {"task_parameter": {"name": name, "values": values.tolist()}}


def final_returns_by_parameter(runs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """``(parameter [point], final-episode return [point])`` of one method's
    runs (each seed's tasks pooled), sorted by the parameter."""
    xs, ys = [], []
    for run in runs:
        values = run.metadata["task_parameter"]["values"]
        xs.append(np.asarray(values, np.float64))
        ys.append(np.asarray(run.returns, np.float64)[:, -1])
    x, y = np.concatenate(xs), np.concatenate(ys)
    order = np.argsort(x, kind="stable")
    return x[order], y[order]


def has_task_parameter(results: Mapping[str, Sequence[Any]]) -> bool:
    """Whether every run of every method recorded the task parameter."""
    return all(
        "task_parameter" in run.metadata for runs in results.values() for run in runs
    )


def plot_return_vs_task(
    results: Mapping[str, Sequence[Any]], path: str | Path, title: str = ""
) -> Path:
    """Each method's final-episode return per task against the task
    parameter (one line per method, a marker per task); ``results``:
    ``{method: [EvalResult, ...]}`` whose metadata holds the parameter."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    name = ""
    for method, runs in results.items():
        name = runs[0].metadata["task_parameter"]["name"]
        x, y = final_returns_by_parameter(runs)
        ax.plot(x, y, marker="o", markersize=3, label=method)
    ax.set_xlabel(name)
    ax.set_ylabel("return of the final episode")
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    write_figure(path, fig)  # atomic: never a half-written plot
    return Path(path)
