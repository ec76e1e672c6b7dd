"""``run_sweep``: a whole sweep of an experiment, static grid included.

For each static combination (a compiled program each, one after another):
prepare its dataset (shared by combinations with the same data config),
train all seeds x traced settings in one program
(:func:`agentrl.sweep.train.train_sweep`), evaluate every member in context
on held-out tasks (one program), then gather one row per setting into one
table (:mod:`agentrl.sweep.report`). An online learner
(RL², transformer PPO) has no dataset: its seeds x
traced settings run as one vmapped training program
(:func:`agentrl.sweep.online.online_sweep`), evaluated on the held-out tasks
of the split ``fit`` would record, with the same files, resume and table.

A sweep resumes. Each static setting's rows and curves are written to
``OUT/settings/<setting>-<hash>.json`` when complete (the hash covers the
config, seeds, traced settings, evaluation and chunking), and a rerun with
the same arguments reads them instead of training again; within a setting
the members are checkpointed every ``train.checkpoint_every`` steps into
``OUT/settings/<setting>-<hash>.ckpt`` (removed once the setting is done),
so a killed sweep continues where it was and ends with the same table as an
uninterrupted one. ``OUT/.lock`` keeps a second sweep out of the directory.

With ``eval_train_tasks`` a distilled learner is also evaluated, in the
same program, on (up to ``eval.num_tasks`` of) the distinct tasks its
training histories were made on, cycled to ``eval.num_tasks``
(:func:`agentrl.data.task_plan.training_tasks`): rows get ``train_score``
beside the held-out ``score``, and a static grid over
``data.num_train_tasks`` draws ``transition.png``, both scores against the
number of training tasks (the GPICL study, ``experiments/gpicl_bandit.py``).
The held-out tasks keep their keys (task ``i`` runs on ``fold_in(key, i)``;
the training tasks follow them), so their numbers do not change.

Rows keep the per-member, per-task scores (``task_scores`` ``[seed][task]``,
``train_task_scores``) and the identity of the tasks behind them
(``task_set``, ``train_task_set``: :func:`agentrl.sweep.paired.task_set_id`
of the tasks' params), so two cells on the same tasks can be compared
paired afterwards (:func:`agentrl.sweep.paired.paired_row_difference`). A record
written before they were kept is still read back (the setting's key does
not depend on them); its rows simply lack them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import agentrl.configtools as configtools
from agentrl.envs.registry import make as make_env
from agentrl.evaluate.evaluate import reference_key, reference_returns
from agentrl.evaluate.metrics import normalized_score
from agentrl.safeio import DirectoryLock
from agentrl.sweep.grid import (
    SweepGrid,
    apply_static,
    check_train_task_eval,
    make_grid,
    setting_label,
)
from agentrl.sweep.online import (
    evaluate_online_members,
    held_out_online,
    online_sweep,
)
from agentrl.sweep.paired import TASK_SET_FIELDS, task_set_id
from agentrl.sweep.report import plot_transition, setting_rows, write_sweep_results
from agentrl.sweep.train import (
    check_seeds,
    evaluate_members,
    held_out_tasks,
    train_sweep,
    train_tasks,
)
from agentrl.tables import json_safe, write_json
from agentrl.train.config import ExperimentConfig
from agentrl.train.data import prepare_dataset
from agentrl.version import __version__


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
    resume: bool = True,
    eval_train_tasks: bool = False,
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
      resume: reuse complete static settings and member checkpoints already
        in ``out_dir`` (see the module docstring); ``False`` recomputes all.
      eval_train_tasks: also score every member on its training tasks
        (distilled learners only; see the module docstring).

    Returns:
      :class:`SweepOutcome`.
    """
    seeds = check_seeds(seeds)
    spec = grid if isinstance(grid, SweepGrid) else make_grid(config, grid or {})
    check_train_task_eval(config, evaluate, eval_train_tasks)
    out = Path(out_dir)
    rows, curves, timings = [], {}, []
    # One sweep per directory (process 0 of a multi-host run holds the lock).
    lead = jax.process_index() == 0
    with DirectoryLock(out, "sweep directory") if lead else contextlib.nullcontext():
        for static in spec.static_settings():
            part = _static_setting(
                config,
                static,
                spec.traced_settings(),
                seeds,
                out,
                evaluate=evaluate,
                steps_per_call=steps_per_call,
                progress=progress,
                resume=resume,
                eval_train_tasks=eval_train_tasks,
            )
            rows += part["rows"]
            curves.update(
                {k: np.asarray(v, np.float32) for k, v in part["curves"].items()}
            )
            timings.append(part["timing"])
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
        if eval_train_tasks and len(spec.static.get(TASKS_FIELD, ())) > 1:
            paths["transition"] = plot_transition(
                out / "transition.png", rows, TASKS_FIELD, title
            )
    return SweepOutcome(rows, curves, paths, info)


#: the field a memorisation-to-generalisation sweep varies (``transition.png``)
TASKS_FIELD = "data.num_train_tasks"


def _setting_key(
    cfg: ExperimentConfig,
    static: dict[str, Any],
    settings: list[dict[str, float]],
    seeds: list[int],
    evaluate: bool,
    steps_per_call: int,
    eval_train_tasks: bool = False,
) -> str:
    """``<label>-<hash>``: names what one static setting's results depend on."""
    identity = {
        "config": configtools.to_dict(cfg),
        "settings": settings,
        "seeds": seeds,
        "evaluate": evaluate,
        "steps_per_call": steps_per_call,
        "agentrl_version": __version__,
    }
    if eval_train_tasks:  # absent otherwise: earlier sweeps keep their keys
        identity["eval_train_tasks"] = True
    blob = json.dumps(json_safe(identity), sort_keys=True, default=str)
    label = re.sub(r"[^A-Za-z0-9_.=-]+", "_", setting_label(static)) or "base"
    return f"{label[:80]}-{hashlib.sha1(blob.encode()).hexdigest()[:10]}"


def _read_part(path: Path, key: str) -> dict[str, Any] | None:
    """A complete static setting's record, or ``None`` if absent or damaged."""
    try:
        part = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(part, dict) or part.get("key") != key:
        return None
    if not {"rows", "curves", "timing"} <= part.keys():
        return None
    return part


def _static_setting(
    config: ExperimentConfig,
    static: dict[str, Any],
    settings: list[dict[str, float]],
    seeds: list[int],
    out: Path,
    *,
    evaluate: bool,
    steps_per_call: int,
    progress: bool,
    resume: bool,
    eval_train_tasks: bool = False,
) -> dict[str, Any]:
    """Train (or resume) and evaluate one static setting; its JSON record."""
    cfg = apply_static(config, static)
    key = _setting_key(
        cfg, static, settings, seeds, evaluate, steps_per_call, eval_train_tasks
    )
    path = out / "settings" / f"{key}.json"
    ckpt_dir = out / "settings" / f"{key}.ckpt"
    part = _read_part(path, key) if resume else None
    if part is not None:
        shutil.rmtree(ckpt_dir, ignore_errors=True)  # a kill after the record
        return {**part, "timing": {**part["timing"], "resumed": "complete"}}
    if not resume:
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    env = make_env(cfg.data.env, **dict(cfg.data.env_args))
    chunking = dict(
        steps_per_call=steps_per_call,
        progress=progress,
        checkpoint_dir=ckpt_dir,
        checkpoint_every=max(cfg.train.checkpoint_every, 0),
    )
    members = cfg.algo.by_training(from_data=_data_members, online=_online_members)
    sweep, tasks, evaluate_fn = members(cfg, env, seeds, settings, out, chunking)
    evaluated: dict[str, Any] = {}
    eval_seconds = 0.0
    if evaluate:
        start = time.perf_counter()
        evaluated = _evaluate_setting(sweep, env, tasks, evaluate_fn, eval_train_tasks)
        eval_seconds = time.perf_counter() - start
    rows, curves = [], {}
    for h, traced in enumerate(settings):
        fields = {**static, **traced}
        label = setting_label(fields)
        metrics = {k: v[:, h] for k, v in sweep.metrics.items()}
        rows.append(setting_rows(label, fields, metrics, **_member(evaluated, h)))
        curves[label] = metrics["loss"]
    timing = {
        "static": setting_label(static),
        "members": sweep.num_members,
        "train_seconds": round(sweep.seconds, 3),
        "eval_seconds": round(eval_seconds, 3),
    }
    # What is kept is what a resumed sweep reads back: one path for both.
    part = json.loads(
        json.dumps(json_safe({"key": key, "rows": rows, "curves": curves}))
    )
    part["timing"] = timing
    write_json(path, part)
    shutil.rmtree(ckpt_dir, ignore_errors=True)
    if sweep.resumed_from:
        timing = {**timing, "resumed": f"from step {sweep.resumed_from}"}
    return {**part, "timing": timing}


def _member(evaluated: dict[str, Any], h: int) -> dict[str, Any]:
    """:func:`setting_rows`' score arguments for traced setting ``h``:
    ``scores``/``train_scores`` ``[S, task]`` and the task identities."""
    ids = TASK_SET_FIELDS.values()  # one id for every traced setting
    return {k: v if k in ids else v[:, h] for k, v in evaluated.items()}


def _evaluate_setting(
    sweep, env, tasks, evaluate_fn, eval_train_tasks: bool
) -> dict[str, Any]:
    """The members on the held-out tasks and, with ``eval_train_tasks``, on
    their training tasks in the same program (placed after the held-out
    tasks, so those keep their keys and numbers).

    Returns:
      ``{"scores": [S, H, task], "task_set": id}``, with ``eval_train_tasks``
      also ``"train_scores": [S, H, task]`` and ``"train_task_set"`` (ids by
      :func:`task_set_id`).
    """
    cfg = sweep.config
    eval_key = jax.random.key(cfg.eval.seed)
    params = tasks["held_out"](cfg)
    num_held_out = jax.tree.leaves(params)[0].shape[0]
    out: dict[str, Any] = {"task_set": task_set_id(params)}
    if eval_train_tasks:
        trained = tasks["train"](cfg)
        out["train_task_set"] = task_set_id(trained)
        params = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), params, trained)
    returns = evaluate_fn(sweep, env, params, eval_key, cfg.eval.num_episodes)
    scores = _scores(env, params, eval_key, returns)
    out["scores"] = scores[..., :num_held_out]
    if eval_train_tasks:
        out["train_scores"] = scores[..., num_held_out:]
    return out


def _data_members(cfg, env, seeds, settings, out, chunking):
    """A distilled learner's members: ``(sweep, tasks, evaluate)``; ``tasks``
    maps ``"held_out"`` and ``"train"`` to ``params(config)``."""
    progress = chunking["progress"]
    dataset = prepare_dataset(cfg, env, _data_dir(out, cfg), progress=progress)
    sweep = train_sweep(cfg, env, dataset, seeds, settings, **chunking)
    tasks = {
        "held_out": lambda config: held_out_tasks(env, dataset, config),
        "train": lambda config: train_tasks(env, dataset, config),
    }
    return sweep, tasks, evaluate_members


def _online_members(cfg, env, seeds, settings, out, chunking):
    """An online learner's members: trained by RL, no dataset (the program is
    the run); ``(sweep, {"held_out": params(config)}, evaluate)``."""
    sweep = online_sweep(cfg, env, seeds, settings, **chunking)
    tasks = {"held_out": lambda config: held_out_online(env, config)}
    return sweep, tasks, evaluate_online_members


def _scores(env: Any, params: Any, key: jax.Array, returns: np.ndarray) -> np.ndarray:
    """``[S, H, task]``: normalized (or raw) return of the last episodes."""
    values = returns
    if getattr(env, "has_oracle", False):
        random, oracle = reference_returns(env, params, reference_key(key))
        s, h, t, e = returns.shape
        flat = returns.transpose(2, 0, 1, 3).reshape(t, s * h * e)
        values = normalized_score(flat, random, oracle).reshape(t, s, h, e)
        values = values.transpose(1, 2, 0, 3)
    return values[..., -last_episodes(returns.shape[-1]) :].mean(-1)
