"""Summaries and result files: ``results.json``, ``results.md`` and PNG plots.

Input is ``{method: EvalResult | [EvalResult, ...]}``; a list holds one
result per training seed on the same tasks, stacked to ``[run, task, ...]``.
:func:`summarize` gives, per method, aggregates (mean, IQM, standard error,
stratified bootstrap CIs) of the first-episode and last-``k``-episode return
and normalized score, the final regret for bandits, and the curves that
:func:`write_results` plots: the in-context improvement curve (per-episode
mean with a bootstrap band, one line per method) and the cumulative regret
curve. Plots use Matplotlib's Agg canvas directly (no pyplot state).
Every file is written to a temporary sibling and renamed into place
(:mod:`agentrl.tables`), so an evaluation killed at any moment leaves each
result file complete (old or new) or absent, and a rerun rewrites them.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import agentrl.evaluate.goals as goals
import agentrl.evaluate.metrics as metrics
import agentrl.tracking as tracking
from agentrl.evaluate.evaluate import EvalResult
from agentrl.evaluate.task_parameter import has_task_parameter, plot_return_vs_task
from agentrl.tables import markdown_table as _table
from agentrl.tables import (
    read_json,
    write_figure,
    write_json,
    write_json_gz,
    write_text,
)
from agentrl.version import __version__

MAX_CURVE_POINTS = 100


def _runs(results: EvalResult | Sequence[EvalResult]) -> list[EvalResult]:
    runs = [results] if isinstance(results, EvalResult) else list(results)
    if not runs:
        raise ValueError("a method needs at least one EvalResult")
    shapes = {r.returns.shape for r in runs}
    if len(shapes) != 1:
        raise ValueError(f"runs of one method differ in [task, episode]: {shapes}")
    return runs


def _stack(runs: list[EvalResult], field: str) -> np.ndarray | None:
    values = [getattr(r, field) for r in runs]
    if any(v is None for v in values):
        return None
    return np.stack([np.asarray(v, np.float64) for v in values])


def summarize_method(
    results: EvalResult | Sequence[EvalResult],
    last_k: int = 10,
    num_samples: int = 2000,
    seed: int = 0,
    resample: str = "tasks",
    threshold: float = 0.5,
) -> dict[str, Any]:
    """Aggregates and curves of one method (see the module docstring).

    ``auc`` aggregates the area under each (seed, task)'s in-context curve
    (normalized score where defined, else return; see
    :func:`~agentrl.evaluate.metrics.curve_auc`); ``episodes_to_threshold``
    (normalized scores only) gives the first episode the mean curve reaches
    ``threshold``, the median over (seed, task) curves (episodes + 1 where
    one never does) and the share of curves that do.
    """
    runs = _runs(results)
    returns = _stack(runs, "returns")  # [run, task, episode]
    normalized = _stack(runs, "normalized")
    regret = _stack(runs, "regret")  # [run, task, step]
    k = max(1, min(last_k, returns.shape[-1]))
    agg = lambda x: metrics.aggregate(  # noqa: E731
        x, num_samples=num_samples, seed=seed, resample=resample
    )
    out: dict[str, Any] = {
        "runs": returns.shape[0],
        "tasks": returns.shape[1],
        "episodes": returns.shape[2],
        "last_k": k,
        "return_first": agg(returns[..., 0]),
        "return_last": agg(returns[..., -k:].mean(-1)),
    }
    curve_of = returns
    if normalized is not None:
        out["score_first"] = agg(normalized[..., 0])
        out["score_last"] = agg(normalized[..., -k:].mean(-1))
        defined = np.isfinite(normalized).all(axis=(0, 2))
        if defined.any():
            curve_of = normalized[:, defined]
    # Sample efficiency beside the last-episodes score: the area under the
    # in-context curve (its mean over the episodes) and the episodes taken
    # to reach ``threshold`` (normalized score; censored at episodes + 1).
    out["auc"] = agg(metrics.curve_auc(curve_of))
    if curve_of is not returns:
        reach = metrics.episodes_to_threshold(curve_of, threshold)  # [run, task]
        mean_curve = np.nanmean(curve_of, axis=(0, 1))
        out["episodes_to_threshold"] = {
            "threshold": threshold,
            "mean_curve": int(metrics.episodes_to_threshold(mean_curve, threshold)),
            "median": float(np.median(reach)),
            "reached": float((reach <= returns.shape[2]).mean()),
        }
    mean, low, high = metrics.bootstrap_curve(
        curve_of, "mean", num_samples, seed=seed, resample=resample
    )
    out["curve"] = {
        "metric": "normalized score" if curve_of is not returns else "return",
        "episode": list(range(1, returns.shape[2] + 1)),
        "mean": mean.tolist(),
        "low": low.tolist(),
        "high": high.tolist(),
    }
    if regret is not None:
        out["regret_final"] = agg(regret[..., -1])
        steps = np.unique(
            np.linspace(0, regret.shape[-1] - 1, MAX_CURVE_POINTS).astype(int)
        )
        mean, low, high = metrics.bootstrap_curve(
            regret[..., steps], "mean", num_samples, seed=seed, resample=resample
        )
        out["regret_curve"] = {
            "step": (steps + 1).tolist(),
            "mean": mean.tolist(),
            "low": low.tolist(),
            "high": high.tolist(),
        }
    return out


def summarize(
    results: Mapping[str, EvalResult | Sequence[EvalResult]], **kwargs: Any
) -> dict[str, dict[str, Any]]:
    """:func:`summarize_method` for every method."""
    return {name: summarize_method(r, **kwargs) for name, r in results.items()}


def _fmt(a: dict[str, Any] | None) -> str:
    if a is None or not np.isfinite(a["mean"]):
        return "–"
    lo, hi = a["mean_ci"]
    return f"{a['mean']:.3g} [{lo:.3g}, {hi:.3g}]"


def _fmt_iqm(a: dict[str, Any] | None) -> str:
    if a is None or not np.isfinite(a["iqm"]):
        return "–"
    lo, hi = a["iqm_ci"]
    return f"{a['iqm']:.3g} [{lo:.3g}, {hi:.3g}]"


def _fmt_reach(r: dict[str, Any] | None, episodes: int) -> str:
    if r is None:
        return "–"
    # censored at episodes + 1: the mean curve never reaches the threshold
    first = r["mean_curve"] if r["mean_curve"] <= episodes else f"never (>{episodes})"
    return f"{first} (>= {r['threshold']:g}; {r['reached']:.0%} reach)"


def markdown_table(summary: dict[str, dict[str, Any]]) -> str:
    """One row per method: returns, normalized scores (mean and IQM), regret."""
    k = next(iter(summary.values()))["last_k"] if summary else 0
    head = [
        "method",
        "runs x tasks",
        "return ep 1",
        f"return last {k}",
        "score ep 1",
        f"score last {k}",
        f"score last {k} (IQM)",
        "AUC",
        "episodes to threshold",
        "final regret",
    ]
    rows = [
        [
            name,
            f"{s['runs']} x {s['tasks']}",
            _fmt(s["return_first"]),
            _fmt(s["return_last"]),
            _fmt(s.get("score_first")),
            _fmt(s.get("score_last")),
            _fmt_iqm(s.get("score_last")),
            _fmt(s.get("auc")),
            _fmt_reach(s.get("episodes_to_threshold"), s["episodes"]),
            _fmt(s.get("regret_final")),
        ]
        for name, s in summary.items()
    ]
    return _table([dict(zip(head, row, strict=True)) for row in rows], head)


def _plot(path: Path, curves: dict[str, dict], x: str, xlabel: str, ylabel: str):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(6, 4), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for name, c in curves.items():
        (line,) = ax.plot(c[x], c["mean"], label=name)
        ax.fill_between(c[x], c["low"], c["high"], alpha=0.2, color=line.get_color())
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    write_figure(path, fig)  # atomic: never a half-written plot


def plot_improvement(summary: dict[str, dict[str, Any]], path: str | Path) -> Path:
    """In-context improvement curve: mean per episode index with 95% CI band."""
    curves = {n: s["curve"] for n, s in summary.items()}
    metrics_used = {c["metric"] for c in curves.values()}
    ylabel = metrics_used.pop() if len(metrics_used) == 1 else "score / return"
    _plot(Path(path), curves, "episode", "episode", ylabel)
    return Path(path)


def plot_regret(summary: dict[str, dict[str, Any]], path: str | Path) -> Path:
    """Cumulative regret curve (bandits) with 95% CI band, one line per method."""
    curves = {n: s["regret_curve"] for n, s in summary.items() if "regret_curve" in s}
    _plot(Path(path), curves, "step", "step", "cumulative regret")
    return Path(path)


def write_results(
    results: Mapping[str, EvalResult | Sequence[EvalResult]],
    out_dir: str | Path,
    title: str = "In-context evaluation",
    env: Any = None,
    compress: bool = False,
    **summary_kwargs: Any,
) -> dict[str, Path]:
    """Write ``results.json``, ``results.md``, ``improvement.png`` (+ ``regret.png``).

    ``compress``: ``results.json.gz`` instead (compact and gzipped, about a
    seventh of the bytes: what reproduction records keep in the repository;
    :func:`read_results` reads either), and a ``results.json`` left in
    ``out_dir`` from before is removed, so one copy stays.

    Where the results' metadata holds the tasks' scalar parameter
    (:mod:`agentrl.evaluate.task_parameter`), also ``return_vs_task.png``:
    each method's final-episode return per task against it.

    ``results.json`` holds the summary and each run's per-task returns and
    normalized scores (regret only as its final value per task).

    With ``env`` a goal-cell grid (Dark Room) and task ids in the results'
    metadata, also ``goal_heatmap.png`` and a by-distance table
    (:mod:`agentrl.evaluate.goals`).

    Returns:
      ``{"json", "markdown", "improvement"[, "regret", "heatmap",
      "return_vs_task"], "csv",
      "tensorboard"}`` paths (see :func:`agentrl.tracking.write_eval_outputs`).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summarize(results, **summary_kwargs)
    runs_json = {}
    for name, r in results.items():
        runs_json[name] = []
        for run in _runs(r):
            d = run.to_json()
            d.pop("regret")
            if run.regret is not None:
                d["regret_final"] = run.regret[:, -1].tolist()
            runs_json[name].append(d)
    info = evaluated(results)
    payload = {
        "title": title,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "agentrl_version": __version__,
        **info,
        "summary": summary,
        "runs": runs_json,
    }
    paths = {"json": out_dir / "results.json", "markdown": out_dir / "results.md"}
    if compress:
        paths["json"] = write_json_gz(out_dir / "results.json.gz", payload)
        (out_dir / "results.json").unlink(missing_ok=True)
    else:
        write_json(paths["json"], payload, indent=1)
        (out_dir / "results.json.gz").unlink(missing_ok=True)
    md = [f"# {title}", "", payload["date"], "", *evaluated_lines(info)]
    md += [markdown_table(summary), ""]
    oracles = {run.metadata.get("oracle") for r in results.values() for run in _runs(r)}
    oracle = " / ".join(sorted(oracles - {None})) or "oracle"  # source_runs' stand-in
    md += [f"Mean [95% stratified bootstrap CI]; score: random = 0, {oracle} = 1.", ""]
    md += [
        "Episodes to threshold: the first episode at which the mean normalized "
        "score reaches the threshold, 'never' when it does not within the "
        "evaluated episodes; 'reach' is the share of (seed, task) curves that do.",
        "",
    ]
    notes = {run.metadata.get("regret") for r in results.values() for run in _runs(r)}
    for note in sorted(notes - {None}):  # a bandit that cannot state its arms
        md += [f"{note[0].upper()}{note[1:]}.", ""]
    paths["improvement"] = plot_improvement(summary, out_dir / "improvement.png")
    md += ["![improvement](improvement.png)", ""]
    if any("regret_curve" in s for s in summary.values()):
        paths["regret"] = plot_regret(summary, out_dir / "regret.png")
        md += ["![regret](regret.png)", ""]
    if env is not None:
        md += per_task_section(results, env, summary, out_dir, paths)
    by_method = {name: _runs(r) for name, r in results.items()}
    if has_task_parameter(by_method):
        path = out_dir / "return_vs_task.png"
        paths["return_vs_task"] = plot_return_vs_task(by_method, path)
        md += ["![return against the task parameter](return_vs_task.png)", ""]
    write_text(paths["markdown"], "\n".join(md))
    rows = evaluated_rows(info, next(iter(results), ""))
    paths.update(tracking.write_eval_outputs(summary, out_dir, rows))  # csv, tb/
    return paths


def read_results(out_dir: str | Path) -> dict[str, Any]:
    """The payload :func:`write_results` wrote into ``out_dir``:
    ``results.json.gz`` or ``results.json``, the newer where a write that
    was stopped before removing the other left both."""
    out_dir = Path(out_dir)
    both = (out_dir / "results.json.gz", out_dir / "results.json")
    found = [p for p in both if p.exists()]
    if not found:  # the plain name in the error
        return read_json(both[1])
    return read_json(max(found, key=lambda p: p.stat().st_mtime_ns))


def evaluated(results: Mapping[str, Any]) -> dict[str, Any]:
    """What was evaluated, from the results' metadata: ``{"checkpoint": {...}
    (a list, one per seed, for several), "shift": {...}}`` (each only where
    recorded; see :func:`agentrl.evaluate.run.checkpoint_status`)."""
    out: dict[str, Any] = {}
    for r in results.values():
        runs = _runs(r)
        points = [run.metadata.get("checkpoint") for run in runs]
        if all(isinstance(p, dict) for p in points):
            out["checkpoint"] = points[0] if len(points) == 1 else points
            shift = runs[0].metadata.get("shift")
            if shift:
                out["shift"] = shift
            break
    return out


def _checkpoints(info: dict[str, Any]) -> list[dict[str, Any]]:
    points = info.get("checkpoint", [])
    return [points] if isinstance(points, dict) else list(points)


def evaluated_lines(info: dict[str, Any]) -> list[str]:
    """Markdown lines on the checkpoint(s) and the shift of ``info``."""
    md = []
    points = _checkpoints(info)
    if points:
        steps = ", ".join(
            f"step {p['checkpoint_step']} of {p['train_steps']}" for p in points
        )
        if all(p["finished"] for p in points):
            md += [f"Checkpoint: {steps} (training finished).", ""]
        else:
            now = [p["training_now"] for p in points if "training_now" in p]
            still = f" It is still training ({now[0]})." if now else ""
            md += [
                f"**Checkpoint: {steps}: the run had not finished training.**{still}",
                "",
            ]
    if "shift" in info:
        shift = ", ".join(f"{k}={v!r}" for k, v in info["shift"].items())
        md += [
            f"**Under shift**: {shift} (the task family's arguments changed from "
            "training; the baselines ran on the same shifted tasks).",
            "",
        ]
    return md


def evaluated_rows(info: dict[str, Any], method: str) -> list[dict[str, Any]]:
    """``results.csv`` rows (``kind`` ``info``) of the checkpoint(s) and shift."""
    rows = []
    for seed, p in enumerate(_checkpoints(info)):
        for metric in ("checkpoint_step", "train_steps", "finished"):
            rows.append(
                {
                    "method": method,
                    "kind": "info",
                    "metric": metric,
                    "x": seed,
                    "mean": int(p[metric]),
                    "low": "",
                    "high": "",
                }
            )
    for key, value in info.get("shift", {}).items():
        rows.append(
            {
                "method": method,
                "kind": "info",
                "metric": f"shift {key}",
                "x": "",
                "mean": repr(value),
                "low": "",
                "high": "",
            }
        )
    return rows


def _task_ids(results: Mapping[str, Any]) -> list | None:
    """Each seed's task ids, from the first method that recorded them."""
    for r in results.values():
        ids = [run.metadata.get("task_ids") for run in _runs(r)]
        if all(i is not None for i in ids):
            return ids
    return None


def per_task_section(
    results: Mapping[str, Any],
    env: Any,
    summary: dict[str, dict[str, Any]],
    out_dir: Path,
    paths: dict[str, Path],
) -> list[str]:
    """Goal-cell heatmap and by-distance table (goal-cell grid tasks only)."""
    ids = _task_ids(results)
    if goals.goal_layout(env) is None or ids is None:
        return []
    k = next(iter(summary.values()))["last_k"]
    md = [f"## Per goal (last {k} episodes, pooled over seeds)", ""]
    rows = []
    for name, r in results.items():
        runs = _runs(r)
        for row in goals.by_distance(env, runs, ids, k):
            rows.append({"method": name, **row})
    if rows:
        md += [_table(rows, list(rows[0])), ""]
    first = next(iter(results))
    cells = goals.per_goal(env, _runs(results[first]), ids, k)
    paths["heatmap"] = goals.plot_goal_heatmap(
        env, cells, out_dir / "goal_heatmap.png", title=f"{first}: score per goal"
    )
    md += ["![goal heatmap](goal_heatmap.png)", ""]
    return md


def screen_summary(payload: dict[str, Any]) -> str:
    """The end of ``agentrl eval`` on screen: what was evaluated and each
    method's first-episode and last-episodes mean return (``payload``: a
    ``results.json``)."""
    summary = payload["summary"]
    lines = [payload["title"], ""]
    lines += [x for x in evaluated_lines(payload) if x]
    lines += [f"{'method':24s} {'return ep 1':>12s} {'return last':>12s}"]
    for name, s in summary.items():
        first, last = s["return_first"]["mean"], s["return_last"]["mean"]
        lines.append(f"{name:24s} {first:12.2f} {last:12.2f}")
    if summary:
        s = next(iter(summary.values()))
        lines.append(
            f"last = mean of the last {s['last_k']} of {s['episodes']} episodes "
            f"on {s['tasks']} tasks; {next(iter(summary))} changed by "
            f"{s['return_last']['mean'] - s['return_first']['mean']:+.2f} from "
            "episode 1 (its weights are frozen: a change comes from its context)."
        )
    return "\n".join(lines)
