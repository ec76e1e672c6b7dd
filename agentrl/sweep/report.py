"""Sweep results: one row per setting with means and bootstrap CIs; files.

Per setting (static combination x traced setting) the row holds, across the
``S`` seeds: the final loss and accuracy (an online learner's: loss and
training trial return; each the mean of a seed's last 10% of steps; mean
over seeds with a 95% percentile bootstrap CI over seeds) and,
when evaluated, the mean and the IQM of the normalized return of the last
episodes on held-out tasks (``tasks``: the split's validation tasks, or its
test tasks where asked; scores ``[seed, task]``, each with its CI by
bootstrap over tasks within seeds), and the scores themselves per member and
task (``task_scores``, JSON-safe ``[seed][task]``, beside ``task_set``, the
identity of the tasks, for :func:`agentrl.sweep.paired.paired_row_difference`;
kept out of the markdown and CSV tables). :func:`interval_warnings` says when the
best setting's interval overlaps others' and when there are too few seeds
for intervals over seeds; ``results.md`` (printed by ``agentrl sweep``)
shows the warnings under the table.

:func:`write_sweep_results` writes ``results.md``, ``results.csv``,
``results.json`` and ``results.png`` (loss curves with CI bands, and the
final score or loss per setting with its CI).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import numpy as np

from agentrl.evaluate.metrics import aggregate, bootstrap_ci, bootstrap_curve
from agentrl.tables import (
    format_cell,
    json_safe,
    markdown_table,
    write_figure,
    write_json,
    write_text,
)


def _tail_mean(curves: np.ndarray) -> np.ndarray:
    """``[seed, steps] -> [seed]``: mean of the last 10% of steps (>= 1).

    ``NaN`` entries (an online learner's update in which no trial ended has
    no trial return) are skipped; all-``NaN`` tails stay ``NaN``.
    """
    tail = np.asarray(curves, np.float64)[..., -max(1, curves.shape[-1] // 10) :]
    count = np.isfinite(tail).sum(-1)
    total = np.where(np.isfinite(tail), tail, 0.0).sum(-1)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _mean_ci(values: np.ndarray) -> tuple[float, float, float]:
    """Mean over seeds ``[seed]`` and its bootstrap CI over seeds."""
    values = np.asarray(values, np.float64)
    if values.size < 2:
        m = float(values.mean())
        return m, m, m
    low, high = bootstrap_ci(values[None, :])
    return float(values.mean()), low, high


#: per-task fields of a row (lists, identities): in the JSON, not the tables
PER_TASK_FIELDS = ("task_scores", "task_set", "train_task_scores", "train_task_set")


def _per_task(scores: np.ndarray, task_set: str | None, stem: str) -> dict:
    """``{stem}_scores`` ``[seed][task]`` (NaN -> ``None``) and ``{stem}_set``."""
    out = {f"{stem}_scores": json_safe(np.asarray(scores, np.float64).tolist())}
    if task_set is not None:
        out[f"{stem}_set"] = task_set
    return out


def setting_rows(
    label: str,
    fields: dict[str, Any],
    metrics: dict[str, np.ndarray],
    scores: np.ndarray | None = None,
    train_scores: np.ndarray | None = None,
    *,
    task_set: str | None = None,
    train_task_set: str | None = None,
    tasks: str | None = None,
) -> dict[str, Any]:
    """One table row.

    Args:
      label: the setting's name.
      fields: the swept fields and their values for this setting.
      metrics: name -> ``[seed, steps]`` training curves.
      scores: ``[seed, task]`` held-out scores, or ``None``; kept as
        ``task_scores`` (``[seed][task]`` lists, ``NaN`` -> ``None``).
      train_scores: ``[seed, task]`` scores on the training tasks, or
        ``None``; adds ``train_score`` (mean, CI), ``generalization_gap``
        (train minus held-out mean) and ``train_task_scores``.
      task_set: the held-out tasks' identity
        (:func:`agentrl.sweep.paired.task_set_id`), kept as ``task_set``.
      train_task_set: the training tasks' identity (``train_task_set``).
      tasks: the held-out split ``scores`` are on (``"validation"`` or
        ``"test"``), kept as ``tasks`` beside them.
    """
    seeds = next(iter(metrics.values())).shape[0]
    row: dict[str, Any] = {"setting": label, **fields, "seeds": seeds}
    for name in ("loss", "accuracy", "trial_return"):
        if name in metrics:
            m, lo, hi = _mean_ci(_tail_mean(metrics[name]))
            row.update(
                {f"final_{name}": m, f"{name}_ci_low": lo, f"{name}_ci_high": hi}
            )
    if scores is not None:
        agg = aggregate(scores)
        row.update(
            {
                **({"tasks": tasks} if tasks is not None else {}),
                "score": agg["mean"],
                "score_ci_low": agg["mean_ci"][0],
                "score_ci_high": agg["mean_ci"][1],
                "score_iqm": agg["iqm"],
                "score_iqm_ci_low": agg["iqm_ci"][0],
                "score_iqm_ci_high": agg["iqm_ci"][1],
                **_per_task(scores, task_set, "task"),
            }
        )
    if train_scores is not None:
        agg = aggregate(train_scores)
        row.update(
            {
                "train_score": agg["mean"],
                "train_score_ci_low": agg["mean_ci"][0],
                "train_score_ci_high": agg["mean_ci"][1],
                **_per_task(train_scores, train_task_set, "train_task"),
            }
        )
        if scores is not None:
            row["generalization_gap"] = agg["mean"] - row["score"]
    return row


#: fewer seeds than this make a CI over seeds a crude guide (with 2 values a
#: percentile bootstrap spans little more than the two values themselves)
FEW_SEEDS = 5


def _ranked_metric(rows: list[dict[str, Any]]) -> tuple[str, str, bool] | None:
    """``(column, CI stem, higher is better)`` the settings are compared on."""
    if rows and "score" in rows[0]:
        return "score", "score", True
    if rows and "final_loss" in rows[0]:
        return "final_loss", "loss", False
    return None


def interval_warnings(rows: list[dict[str, Any]]) -> list[str]:
    """Warnings for a reader comparing the settings' intervals.

    Where the best setting's 95% CI (score, else final loss) overlaps
    another's, the sweep does not tell them apart; with fewer than
    :data:`FEW_SEEDS` seeds the intervals themselves are unreliable.
    """
    metric = _ranked_metric(rows)
    if metric is None:
        return []
    column, stem, higher = metric
    low, high = f"{stem}_ci_low", f"{stem}_ci_high"
    ranked = [r for r in rows if np.isfinite(r.get(column, np.nan))]
    out = []
    if len(ranked) > 1:
        best = (max if higher else min)(ranked, key=lambda r: r[column])
        tied = [
            r["setting"]
            for r in ranked
            if r is not best and r[low] <= best[high] and best[low] <= r[high]
        ]
        if tied:
            out.append(
                f"the 95% CI of the best {column} ({best['setting']}) overlaps "
                f"those of {', '.join(tied)}: the sweep does not tell them apart"
            )
    seeds = min((int(r["seeds"]) for r in rows), default=0)
    if seeds < FEW_SEEDS:
        out.append(
            f"{seeds} seed{'s' if seeds != 1 else ''} per setting: intervals over "
            f"seeds are crude below {FEW_SEEDS} seeds (run more with --seeds)"
        )
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    """A markdown table; metric columns as ``mean [low, high]``."""
    if not rows:
        return ""
    cols = [
        c
        for c in rows[0]
        if not c.endswith(("_ci_low", "_ci_high")) and c not in PER_TASK_FIELDS
    ]

    def cell(r: dict[str, Any], c: str) -> Any:
        stem = c.removeprefix("final_")
        if f"{stem}_ci_low" not in r:
            return r.get(c, "")
        lo, hi = r[f"{stem}_ci_low"], r[f"{stem}_ci_high"]
        return f"{format_cell(r[c])} [{format_cell(lo)}, {format_cell(hi)}]"

    return markdown_table([{c: cell(r, c) for c in cols} for r in rows], cols)


def to_csv(rows: list[dict[str, Any]]) -> str:
    """CSV with the union of the rows' columns (first-seen order), less the
    per-task lists (:data:`PER_TASK_FIELDS`, in the JSON)."""
    cols: list[str] = []
    for r in rows:
        cols += [c for c in r if c not in cols and c not in PER_TASK_FIELDS]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, cols, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def plot(path: Path, curves: dict[str, np.ndarray], rows: list[dict[str, Any]]) -> Path:
    """Loss curves (mean and 95% CI band over seeds) and the final score per
    setting with its CI (final loss when there is no score)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4))
    ax_curve, ax_bar = fig.subplots(1, 2)
    for label, loss in curves.items():
        point, low, high = bootstrap_curve(loss[None], num_samples=500)
        x = np.arange(1, loss.shape[-1] + 1)
        ax_curve.plot(x, point, label=label)
        ax_curve.fill_between(x, low, high, alpha=0.2)
    ax_curve.set(xlabel="step", ylabel="training loss", title="loss (mean, 95% CI)")
    ax_curve.legend(fontsize=7)
    key = "score" if "score" in rows[0] else "final_loss"
    stem = "score" if key == "score" else "loss"
    y = np.array([r[key] for r in rows], np.float64)
    err = np.array(
        [[r[key] - r[f"{stem}_ci_low"], r[f"{stem}_ci_high"] - r[key]] for r in rows]
    ).T
    xs = np.arange(len(rows))
    ax_bar.errorbar(xs, y, yerr=np.maximum(err, 0), fmt="o", capsize=4)
    ax_bar.set_xticks(xs, [r["setting"] for r in rows], rotation=30, fontsize=7)
    ylabel = "normalized return, last episodes" if key == "score" else "final loss"
    ax_bar.set(ylabel=ylabel, title=f"{ylabel} (mean, 95% CI)")
    fig.tight_layout()
    write_figure(path, fig)  # atomic: never a half-written plot
    return path


def plot_transition(
    path: Path, rows: list[dict[str, Any]], x_field: str, title: str = ""
) -> Path:
    """Held-out and training-task scores against ``x_field`` (log2 axis).

    One colour per combination of the rows' other swept fields (model
    sizes ...): solid the held-out ``score``, dashed ``train_score``, each
    with its 95% CI band. A row whose ``x_field`` is ``None`` (every
    training history its own task) sits one step right of the largest,
    labelled "all". Rows need ``score`` and ``train_score``.
    """
    from matplotlib.figure import Figure

    numbers = [r[x_field] for r in rows if r[x_field] is not None]
    top = 2.0 * max(numbers, default=1)
    swept = [k for k in rows[0] if "." in k and k != x_field]
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        name = " ".join(f"{k.split('.')[-1]}={r[k]}" for k in swept) or "all"
        groups.setdefault(name, []).append(r)
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    for i, (name, group) in enumerate(groups.items()):
        group = sorted(group, key=lambda r: top if r[x_field] is None else r[x_field])
        x = [top if r[x_field] is None else r[x_field] for r in group]
        colour = f"C{i % 10}"
        for column, style, what in (
            ("score", "-", "held-out"),
            ("train_score", "--", "train tasks"),
        ):
            y = [r[column] for r in group]
            low = [r[f"{column}_ci_low"] for r in group]
            high = [r[f"{column}_ci_high"] for r in group]
            ax.plot(x, y, style, marker="o", color=colour, label=f"{name}, {what}")
            ax.fill_between(x, low, high, color=colour, alpha=0.12)
    ax.set_xscale("log", base=2)
    if any(r[x_field] is None for r in rows):
        ticks = sorted(set(numbers)) + [top]
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks[:-1]] + ["all"])
    ax.set(
        xlabel=f"{x_field} (distinct training tasks)",
        ylabel="normalized return, last episodes",
        title=title or "memorisation to generalisation",
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    write_figure(path, fig)  # atomic: never a half-written plot
    return path


def _held_out_words(info: dict[str, Any]) -> str:
    """Which held-out tasks the scores are on, for the note under the table."""
    tasks = info.get("tasks")
    if tasks == "validation":
        return "the split's validation tasks (choose settings on these)"
    if tasks == "test":
        return (
            "the split's test tasks (a reported number: choose settings on "
            "validation tasks)"
        )
    return "held-out tasks"


def write_sweep_results(
    out_dir: str | Path,
    rows: list[dict[str, Any]],
    curves: dict[str, np.ndarray],
    info: dict[str, Any],
    title: str = "sweep",
) -> dict[str, Path]:
    """Write ``results.{md,csv,json,png}`` into ``out_dir``; return the paths.

    ``curves`` maps a setting label to its loss curves ``[seed, steps]``;
    ``info`` (config, seeds, timings ...) goes into the JSON.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "md": out / "results.md",
        "csv": out / "results.csv",
        "json": out / "results.json",
        "png": out / "results.png",
    }
    md = [f"# {title}", "", markdown(rows), ""]
    md += [f"**Warning:** {w}." for w in interval_warnings(rows)]
    md += [""] if md[-1] != "" else []
    md.append(
        "Means over seeds with 95% bootstrap CIs; final loss/accuracy (online "
        "learners: loss/training trial return) = mean of the last 10% of "
        "steps (updates); score = normalized return (random 0, oracle 1; "
        "the raw return where the environment has no oracle) of the last "
        f"evaluation episodes on {_held_out_words(info)}; score_iqm = its "
        "interquartile mean over seeds x tasks, with its own 95% bootstrap CI."
    )
    if rows and "train_score" in rows[0]:
        md.append(
            "\ntrain_score = the same score on the distinct tasks of the training "
            "histories (same acting rule and evaluation); generalization_gap = "
            "train_score - score."
        )
    write_text(paths["md"], "\n".join(md) + "\n")
    write_text(paths["csv"], to_csv(rows))
    payload = {
        "title": title,
        "rows": rows,
        "curves": {k: np.asarray(v) for k, v in curves.items()},
        **info,
    }
    write_json(paths["json"], payload)
    plot(paths["png"], curves, rows)
    return paths
