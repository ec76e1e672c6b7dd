"""``run_sweep``: a whole sweep of an experiment, static grid included.

For each static combination (a compiled program each, one after another):
prepare its dataset (shared by combinations with the same data config),
train all seeds x traced settings in one program
(:func:`agentrl.sweep.train.train_sweep`), evaluate every member in context
on held-out tasks (one program), then gather one row per setting into one
table (:mod:`agentrl.sweep.report`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from agentrl import configtools
from agentrl.sweep.grid import (
    SweepGrid,
    apply_static,
    make_grid,
    setting_label,
)
from agentrl.sweep.report import setting_rows, write_sweep_results
from agentrl.sweep.train import (
    check_seeds,
    evaluate_members,
    held_out_tasks,
    train_sweep,
)
from agentrl.train.config import ExperimentConfig


@dataclasses.dataclass
class SweepOutcome:
    """Rows (one per setting), loss curves ``{label: [seed, steps]}``, files."""

    rows: list[dict[str, Any]]
    curves: dict[str, np.ndarray]
    paths: dict[str, Path]
    info: dict[str, Any]


def last_episodes(num_episodes: int) -> int:
    """How many final evaluation episodes the score averages: ``ceil(n / 5)``."""
    return max(1, -(-num_episodes // 5))


def _data_dir(out: Path, config: ExperimentConfig) -> Path:
    blob = json.dumps(configtools.to_dict(config.data), sort_keys=True, default=str)
    return out / "datasets" / hashlib.sha1(blob.encode()).hexdigest()[:10]


def run_sweep(
    config: ExperimentConfig,
    seeds: list[int],
    grid: dict[str, Any] | SweepGrid | None = None,
    out_dir: str | Path = "sweeps/sweep",
    *,
    evaluate: bool = True,
    steps_per_call: int = 10,
    progress: bool = True,
) -> SweepOutcome:
    """Train and evaluate ``seeds`` x ``grid`` of ``config``; write the table.

    Args:
      config: the experiment (e.g. ``load_experiment("ad_darkroom", "smoke")``).
      seeds: training seeds (``S``).
      grid: ``{field: [values]}``; traced fields (``lr``, ``weight_decay``,
        the algorithm's traced fields such as T2MIR's weights) share one
        program, others form the static grid (see :mod:`agentrl.sweep.grid`).
      out_dir: where ``results.{md,csv,json,png}`` (and datasets) go.
      evaluate: run each member in context on held-out tasks.
      steps_per_call: training steps per jitted ``lax.scan`` chunk.

    Returns:
      :class:`SweepOutcome`.
    """
    from agentrl.envs import make as make_env
    from agentrl.train.data import prepare_dataset

    seeds = check_seeds(seeds)
    spec = grid if isinstance(grid, SweepGrid) else make_grid(config, grid or {})
    out = Path(out_dir)
    rows, curves, timings = [], {}, []
    for static in spec.static_settings():
        cfg = apply_static(config, static)
        env = make_env(cfg.data.env, **dict(cfg.data.env_args))
        dataset = prepare_dataset(cfg, env, _data_dir(out, cfg), progress=progress)
        settings = spec.traced_settings()
        sweep = train_sweep(
            cfg,
            env,
            dataset,
            seeds,
            settings,
            steps_per_call=steps_per_call,
            progress=progress,
        )
        scores, eval_seconds = None, 0.0
        if evaluate:
            start = time.perf_counter()
            params = held_out_tasks(env, dataset, sweep.config)
            key = jax.random.key(cfg.eval.seed)
            returns = evaluate_members(sweep, env, params, key, cfg.eval.num_episodes)
            scores = _scores(env, params, key, returns)
            eval_seconds = time.perf_counter() - start
        for h, traced in enumerate(settings):
            fields = {**static, **traced}
            label = setting_label({**static, **traced})
            metrics = {k: v[:, h] for k, v in sweep.metrics.items()}
            rows.append(
                setting_rows(
                    label, fields, metrics, None if scores is None else scores[:, h]
                )
            )
            curves[label] = metrics["loss"]
        timings.append(
            {
                "static": setting_label(static),
                "members": sweep.num_members,
                "train_seconds": round(sweep.seconds, 3),
                "eval_seconds": round(eval_seconds, 3),
            }
        )
    info = {
        "experiment": config.name,
        "algo": config.algo.label,
        "seeds": seeds,
        "traced": {k: list(v) for k, v in spec.traced.items()},
        "static": {k: list(v) for k, v in spec.static.items()},
        "eval_last_episodes": last_episodes(config.eval.num_episodes),
        "timings": timings,
        "devices": jax.device_count(),
        "config": configtools.to_dict(config),
    }
    title = f"sweep: {config.name} ({config.algo.label}), {len(seeds)} seeds"
    paths = write_sweep_results(out, rows, curves, info, title)
    return SweepOutcome(rows, curves, paths, info)


def _scores(env: Any, params: Any, key: jax.Array, returns: np.ndarray) -> np.ndarray:
    """``[S, H, task]``: normalized (or raw) return of the last episodes."""
    from agentrl.evaluate.evaluate import reference_returns
    from agentrl.evaluate.metrics import normalized_score

    values = returns
    if getattr(env, "has_oracle", False):
        random, oracle = reference_returns(env, params, jax.random.fold_in(key, 1))
        s, h, t, e = returns.shape
        flat = returns.transpose(2, 0, 1, 3).reshape(t, s * h * e)
        values = normalized_score(flat, random, oracle).reshape(t, s, h, e)
        values = values.transpose(1, 2, 0, 3)
    return values[..., -last_episodes(returns.shape[-1]) :].mean(-1)
