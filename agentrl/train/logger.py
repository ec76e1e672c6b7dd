"""Run logging: ``metrics.jsonl`` always, TensorBoard event files, progress bar.

Metrics are written as one JSON object per line (``{"step": ..., name: value}``)
so they can be read without TensorBoard; tensorboardX writes event files beside
them without importing TensorFlow.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

import agentrl.tracking as tracking


class RunLogger:
    """Log scalar metrics of a run to JSONL, TensorBoard and a tqdm bar."""

    def __init__(
        self,
        run_dir: str | Path,
        total_steps: int,
        start_step: int = 0,
        progress: bool = True,
        tensorboard: bool = True,
        enabled: bool = True,
    ):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.enabled = enabled
        self._jsonl = (
            open(self.run_dir / "metrics.jsonl", "a")  # noqa: SIM115
            if enabled
            else None
        )
        self._tb = None
        if tensorboard and enabled:
            from tensorboardX import SummaryWriter

            self._tb = SummaryWriter(str(self.run_dir / "tb"))
        # an experiment tracker, if one is chosen (agentrl.tracking; off by default)
        self._tracker = tracking.open_tracker(self.run_dir) if enabled else None
        self._bar = tqdm(
            total=total_steps,
            initial=start_step,
            disable=not progress,
            unit="step",
            dynamic_ncols=True,
        )

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        values = {k: float(v) for k, v in metrics.items()}
        if self._jsonl is None:
            return
        self._jsonl.write(json.dumps({"step": step, **values}) + "\n")
        self._jsonl.flush()
        if self._tb is not None:
            for k, v in values.items():
                if math.isfinite(v):
                    self._tb.add_scalar(k, v, step)
        if self._tracker is not None:
            self._tracker.log(step, values)
        if "loss" in values:
            self._bar.set_postfix(loss=f"{values['loss']:.4f}")

    def advance(self, n: int = 1) -> None:
        self._bar.update(n)

    def close(self) -> None:
        self._bar.close()
        if self._jsonl is not None:
            self._jsonl.close()
        if self._tb is not None:
            self._tb.close()
        if self._tracker is not None:
            self._tracker.close()


def read_metrics(run_dir: str | Path) -> list[dict[str, float]]:
    """All records of ``run_dir/metrics.jsonl`` (later records win per step)."""
    path = Path(run_dir) / "metrics.jsonl"
    by_step: dict[int, dict] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            by_step.setdefault(rec["step"], {}).update(rec)
    return [by_step[s] for s in sorted(by_step)]
