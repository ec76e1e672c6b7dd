"""Run metrics beyond ``metrics.jsonl``: evaluation as CSV and TensorBoard, trackers.

Training writes ``RUN_DIR/metrics.jsonl`` and TensorBoard scalars under
``RUN_DIR/tb`` (:class:`agentrl.train.logger.RunLogger`). Evaluation writes
``results.json``/``results.md`` and, through :func:`write_eval_outputs`,

- ``results.csv``: one row per method and episode (the in-context curve with
  its 95% bootstrap interval) and the aggregates of each method;
- TensorBoard scalars under ``<eval dir>/tb``: ``eval/<method>/<metric>``
  against the episode index, so ``tensorboard --logdir RUN_DIR`` shows the
  training curves (run ``tb``) and the in-context curves (run ``eval/tb``)
  of a run together.

An experiment tracker is optional and off by default: ``agentrl train ...
--tracker wandb`` (or ``AGENTRL_TRACKER=wandb`` in the environment) sends
the same records as ``metrics.jsonl`` (same names, same steps) to Weights &
Biases, and the evaluation curves and aggregates when the run is evaluated.
It needs the ``tracking`` extra (``pip install "agentrl[tracking]"``); with
``WANDB_MODE=offline`` nothing leaves the machine (``wandb sync`` uploads
later). The run's W&B id is kept in ``RUN_DIR/tracker.json``, so a resumed
run (or its evaluation) continues the same W&B run. ``WANDB_PROJECT`` names
the project (default ``agentrl``).

>>> tracker = open_tracker(run_dir)          # None unless one is chosen
>>> tracker.log(step, {"loss": 0.3})
"""

from __future__ import annotations

import csv
import importlib
import importlib.util
import json
import math
import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from agentrl.configtools import ConfigError

#: the environment variable that chooses a tracker (``none`` or ``wandb``)
TRACKER_ENV = "AGENTRL_TRACKER"
TRACKERS = ("none", "wandb")
#: where a run keeps its tracker's run id (for resuming the same tracked run)
TRACKER_FILE = "tracker.json"


class Tracker(Protocol):
    """What a run logs to: scalar records by step, a summary, and close."""

    def log(self, step: int, metrics: dict[str, float]) -> None: ...

    def summary(self, values: dict[str, float]) -> None: ...

    def close(self) -> None: ...


def chosen() -> str:
    """The tracker named by ``AGENTRL_TRACKER`` (``none`` when unset)."""
    name = os.environ.get(TRACKER_ENV, "none").strip().lower() or "none"
    if name not in TRACKERS:
        raise ConfigError(f"{TRACKER_ENV} must be one of {TRACKERS}, got {name!r}")
    return name


def check_available(name: str) -> None:
    """Refuse (``ConfigError``) a tracker that is unknown or not installed."""
    if name not in TRACKERS:
        raise ConfigError(f"--tracker must be one of {TRACKERS}, got {name!r}")
    if name == "wandb" and importlib.util.find_spec("wandb") is None:
        raise ConfigError(
            "--tracker wandb needs the wandb package: pip install "
            '"agentrl[tracking]" (WANDB_MODE=offline keeps runs local)'
        )


def open_tracker(run_dir: str | Path, name: str | None = None) -> Tracker | None:
    """The tracker for ``run_dir`` (``name`` or :func:`chosen`), or ``None``."""
    name = chosen() if name is None else name
    if name == "none":
        return None
    check_available(name)
    return WandbTracker(run_dir)


class WandbTracker:
    """Weights & Biases: one W&B run per agentrl run directory.

    The config (``RUN_DIR/config.json`` when present) is the W&B run's
    config; metrics are logged with the training step as W&B's step, so
    the W&B curves are the ``metrics.jsonl`` records.
    """

    def __init__(self, run_dir: str | Path, module: Any = None):
        self.run_dir = Path(run_dir)
        wandb = module if module is not None else importlib.import_module("wandb")
        record = self.run_dir / TRACKER_FILE
        saved = _read_json(record)
        run_id = saved.get("id") or secrets.token_hex(4)  # W&B: 8 chars [a-z0-9]
        config = _read_json(self.run_dir / "config.json")
        self._run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "agentrl"),
            name=self.run_dir.name,
            id=run_id,
            resume="allow",
            dir=str(self.run_dir),
            config=config or None,
        )
        if saved.get("id") != run_id:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            record.write_text(json.dumps({"tracker": "wandb", "id": run_id}) + "\n")

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self._run.log(
            {k: float(v) for k, v in metrics.items() if math.isfinite(float(v))},
            step=int(step),
        )

    def summary(self, values: dict[str, float]) -> None:
        for key, value in values.items():
            self._run.summary[key] = value

    def close(self) -> None:
        self._run.finish()


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# ------------------------------------------------------- evaluation outputs

#: the aggregates of a method written as CSV rows and scalars
AGGREGATES = (
    "return_first",
    "return_last",
    "score_first",
    "score_last",
    "regret_final",
)
CSV_COLUMNS = ("method", "kind", "metric", "x", "mean", "low", "high")


def eval_rows(summary: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of ``results.csv`` from an evaluation summary.

    ``kind`` is ``curve`` (``x`` the episode; ``metric`` return or
    normalized score), ``regret`` (``x`` the step) or ``aggregate`` (``x``
    empty; ``metric`` e.g. ``return_last``, the mean of the last episodes).
    """
    rows = []
    for method, s in summary.items():
        curve = s.get("curve")
        if curve:
            for i, x in enumerate(curve["episode"]):
                rows.append(_row(method, "curve", curve["metric"], x, curve, i))
        regret = s.get("regret_curve")
        if regret:
            for i, x in enumerate(regret["step"]):
                rows.append(_row(method, "regret", "regret", x, regret, i))
        for name in AGGREGATES:
            agg = s.get(name)
            if isinstance(agg, dict) and "mean" in agg:
                rows.append(
                    {
                        "method": method,
                        "kind": "aggregate",
                        "metric": name,
                        "x": "",
                        "mean": agg["mean"],
                        "low": _ci(agg, 0),
                        "high": _ci(agg, 1),
                    }
                )
    return rows


def _ci(agg: dict[str, Any], i: int) -> Any:
    ci = agg.get("mean_ci")
    return ci[i] if isinstance(ci, list | tuple) and len(ci) == 2 else ""


def _row(method, kind, metric, x, curve, i) -> dict[str, Any]:
    return {
        "method": method,
        "kind": kind,
        "metric": metric,
        "x": x,
        "mean": curve["mean"][i],
        "low": curve["low"][i],
        "high": curve["high"][i],
    }


def _tag(method: str, metric: str) -> str:
    return f"eval/{method}/{metric.replace(' ', '_')}"


def write_eval_outputs(
    summary: dict[str, dict[str, Any]],
    out_dir: str | Path,
    info_rows: Sequence[dict[str, Any]] = (),
) -> dict[str, Path]:
    """Write ``results.csv`` and TensorBoard scalars of an evaluation summary.

    ``out_dir``: the evaluation's directory (``RUN_DIR/eval`` for a run).
    ``info_rows``: more CSV rows (``kind`` ``info``: the checkpoint step, a
    shift), not sent to TensorBoard.
    When ``out_dir``'s parent is a tracked run (``tracker.json``) and a
    tracker is chosen, the curves and aggregates go to it too. Returns
    ``{"csv": path, "tensorboard": dir}``.
    """
    out_dir = Path(out_dir)
    rows = eval_rows(summary)
    csv_path = out_dir / "results.csv"
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows([*rows, *info_rows])
    from tensorboardX import SummaryWriter

    tb_dir = out_dir / "tb"
    tb = SummaryWriter(str(tb_dir))
    try:
        for row in rows:
            if row["kind"] == "aggregate":
                tb.add_scalar(_tag(row["method"], row["metric"]), row["mean"], 0)
            else:
                metric = row["metric"]
                tb.add_scalar(_tag(row["method"], metric), row["mean"], row["x"])
    finally:
        tb.close()
    run_dir = out_dir.parent
    if (run_dir / TRACKER_FILE).is_file() and chosen() != "none":
        tracker = open_tracker(run_dir)
        try:
            tracker.summary(
                {
                    _tag(r["method"], r["metric"]): r["mean"]
                    for r in rows
                    if r["kind"] == "aggregate"
                }
            )
        finally:
            tracker.close()
    return {"csv": csv_path, "tensorboard": tb_dir}
