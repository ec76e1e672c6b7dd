"""``run_sweep``: a whole sweep of an experiment, static grid included.

For each static combination (a compiled program each, one after another):
prepare its dataset (shared by combinations with the same data config),
train all seeds x traced settings in one program
(:func:`agentrl.sweep.train.train_sweep`), evaluate every member in context
on held-out tasks (one program), then gather one row per setting into one
table (:mod:`agentrl.sweep.report`). An online learner
(RL², transformer PPO, AMAGO) has no dataset: its seeds x
traced settings run as one vmapped training program
(:func:`agentrl.sweep.online.online_sweep`), evaluated on the held-out tasks
of the split ``fit`` would record, with the same files, resume and table.

The held-out tasks are the split's *validation* tasks (``tasks``, default
``"validation"``): a sweep's table is where settings are chosen, and every
choice is made on validation tasks (docs/protocol.md); ``tasks="test"``
scores on the test tasks. They are the tasks ``agentrl eval --split``
takes for a run of the same config
(:func:`agentrl.train.rundir.eval_tasks`); a split without validation tasks
is refused before anything trains. The split is kept in every evaluated
row (``tasks``) and in ``results.json``.

A sweep resumes. Each static setting's rows and curves are written to
``OUT/settings/<setting>-<hash>.json`` when complete (the hash covers the
config, seeds, traced settings, evaluation, the split scored and
chunking), and a rerun with the same arguments reads them instead of
training again; within a setting
the members are checkpointed every ``train.checkpoint_every`` steps into
``OUT/settings/<setting>-<hash>.ckpt`` (removed once the setting is done),
so a killed sweep continues where it was and ends with the same table as an
uninterrupted one. ``OUT/.lock`` keeps a second sweep out of the directory.
The histories at ``data.path`` are named in the hash by their digest
(:func:`agentrl.train.rundir.dataset_digest`, their files' SHA-256s), not by
the path: a dataset moved elsewhere keeps its records and member
checkpoints, and histories regenerated in place are other data, so every
setting trains again on them (the records of the old ones stay beside).
A record made before the digest named the data (its key had the path) is
still read when the histories it kept the digest of are at that path.

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
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import agentrl.configtools as configtools
from agentrl.data.files import METADATA_FILE
from agentrl.data.reader import open_dataset
from agentrl.data.xland100b import is_hdf5
from agentrl.envs.registry import make as make_env
from agentrl.evaluate.evaluate import reference_key, reference_returns
from agentrl.evaluate.metrics import normalized_score
from agentrl.safeio import DirectoryLock
from agentrl.sweep.grid import (
    SweepGrid,
    apply_static,
    check_data_plans,
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
from agentrl.train.rundir import dataset_digest
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
    tasks: str = "validation",
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
      tasks: the held-out tasks scored: ``"validation"`` (default: the
        table is where settings are chosen, docs/protocol.md) or
        ``"test"``; as ``agentrl eval --split`` picks them (see the module
        docstring).
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
    check_scored_tasks(tasks)
    check_data_plans(config, spec)
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
                tasks=tasks,
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
            **({"tasks": tasks} if evaluate else {}),
            "timings": timings,
            "devices": jax.device_count(),
            "config": configtools.to_dict(config),
        }
        title = f"sweep: {config.name} ({config.algo.label}), {len(seeds)} seeds"
        if evaluate:
            title += f", scored on {tasks} tasks"
        paths = write_sweep_results(out, rows, curves, info, title)
        if eval_train_tasks and len(spec.static.get(TASKS_FIELD, ())) > 1:
            paths["transition"] = plot_transition(
                out / "transition.png", rows, TASKS_FIELD, title
            )
    return SweepOutcome(rows, curves, paths, info)


#: the field a memorisation-to-generalisation sweep varies (``transition.png``)
TASKS_FIELD = "data.num_train_tasks"

#: the held-out tasks a sweep can score on (``run_sweep(tasks=...)``)
SCORED_TASKS = ("validation", "test")


def check_scored_tasks(tasks: str) -> None:
    """``ValueError`` unless ``tasks`` is one of :data:`SCORED_TASKS`."""
    if tasks not in SCORED_TASKS:
        raise ValueError(
            f"tasks (--split) must be 'validation' (choose settings) or 'test', "
            f"got {tasks!r}"
        )


def _setting_key(
    cfg: ExperimentConfig,
    static: dict[str, Any],
    settings: list[dict[str, float]],
    seeds: list[int],
    evaluate: bool,
    steps_per_call: int,
    eval_train_tasks: bool = False,
    tasks: str = "test",
    digest: str | None = None,
) -> str:
    """``<label>-<hash>``: names what one static setting's results depend on.

    ``digest`` (:func:`_histories_digest`) stands for ``data.path`` where
    the sweep reads histories, so the key names the data, not where it
    lives; ``None`` keeps the path (the key records made before had).
    """
    config = configtools.to_dict(cfg)
    if digest is not None:
        config["data"]["path"] = f"dataset {digest}"
    identity = {
        "config": config,
        "settings": settings,
        "seeds": seeds,
        "evaluate": evaluate,
        "steps_per_call": steps_per_call,
        "agentrl_version": __version__,
    }
    if eval_train_tasks:  # absent otherwise: earlier sweeps keep their keys
        identity["eval_train_tasks"] = True
    if evaluate and tasks != "test":  # earlier sweeps were scored on test
        identity["tasks"] = tasks
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
    tasks: str = "validation",
) -> dict[str, Any]:
    """Train (or resume) and evaluate one static setting; its JSON record."""
    cfg = apply_static(config, static)
    digest = _histories_digest(cfg)
    named = partial(
        _setting_key,
        cfg, static, settings, seeds, evaluate, steps_per_call, eval_train_tasks, tasks,
    )  # fmt: skip
    key = named(digest=digest)
    path = out / "settings" / f"{key}.json"
    ckpt_dir = out / "settings" / f"{key}.ckpt"
    part = _reusable_part(out, key, named, digest) if resume else None
    if part is not None:
        shutil.rmtree(ckpt_dir, ignore_errors=True)  # a kill after the record
        rows = [_scored_on(row, tasks) for row in part["rows"]]
        return {
            **part,
            "rows": rows,
            "timing": {**part["timing"], "resumed": "complete"},
        }
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
    which = tasks if evaluate else None
    sweep, scored, evaluate_fn = members(
        cfg, env, seeds, settings, out, chunking, which
    )
    evaluated: dict[str, Any] = {}
    eval_seconds = 0.0
    if evaluate:
        start = time.perf_counter()
        evaluated = _evaluate_setting(sweep, env, scored, evaluate_fn, eval_train_tasks)
        evaluated["tasks"] = tasks
        eval_seconds = time.perf_counter() - start
    rows, curves = _setting_table(static, settings, sweep, evaluated)
    timing = {
        "static": setting_label(static),
        "members": sweep.num_members,
        "train_seconds": round(sweep.seconds, 3),
        "eval_seconds": round(eval_seconds, 3),
    }
    # What is kept is what a resumed sweep reads back: one path for both.
    kept = {"key": key, "rows": rows, "curves": curves}
    if digest is not None:  # the histories trained on (a rerun compares)
        kept["dataset_digest"] = digest
    part = json.loads(json.dumps(json_safe(kept)))
    part["timing"] = timing
    write_json(path, part)
    shutil.rmtree(ckpt_dir, ignore_errors=True)
    if sweep.resumed_from:
        timing = {**timing, "resumed": f"from step {sweep.resumed_from}"}
    return {**part, "timing": timing}


def _setting_table(static, settings, sweep, evaluated: dict[str, Any]):
    """``(rows, curves)`` of one static setting: a row and a loss curve
    ``[seed, steps]`` per traced setting."""
    rows, curves = [], {}
    for h, traced in enumerate(settings):
        fields = {**static, **traced}
        label = setting_label(fields)
        metrics = {k: v[:, h] for k, v in sweep.metrics.items()}
        rows.append(setting_rows(label, fields, metrics, **_member(evaluated, h)))
        curves[label] = metrics["loss"]
    return rows, curves


def _member(evaluated: dict[str, Any], h: int) -> dict[str, Any]:
    """:func:`setting_rows`' score arguments for traced setting ``h``:
    ``scores``/``train_scores`` ``[S, task]``, the task identities and the
    held-out split scored (one of each for every traced setting)."""
    shared = (*TASK_SET_FIELDS.values(), "tasks")
    return {k: v if k in shared else v[:, h] for k, v in evaluated.items()}


def _scored_on(row: dict[str, Any], tasks: str) -> dict[str, Any]:
    """A record's row with ``tasks`` (the split its ``score`` is on): a row
    of a record written before it was kept was scored on test (such a
    record is found only under ``tasks="test"``, :func:`_setting_key`)."""
    if "score" not in row or "tasks" in row:
        return row
    return {**row, "tasks": tasks}


def _histories_digest(cfg: ExperimentConfig) -> str | None:
    """The digest of the histories at ``data.path``
    (:func:`~agentrl.train.rundir.dataset_digest`); ``None`` where the sweep
    makes its own from the config (its key covers them), reads none (an
    online learner), or they are not there or record none."""
    path = cfg.data.path
    online = cfg.algo.by_training(from_data=False, online=True)
    if online or not path or is_hdf5(path):
        return None
    if not (Path(path) / METADATA_FILE).is_file():
        return None  # training says what is missing; a record needs no data
    return dataset_digest(open_dataset(path, verify="none").metadata)


def _reusable_part(
    out: Path, key: str, named: Callable[..., str], digest: str | None
) -> dict[str, Any] | None:
    """The setting's complete record under ``key``, if any; else one made
    before the key named the histories by ``digest`` (its key names
    ``data.path``), if it kept that same digest."""
    part = _read_part(out / "settings" / f"{key}.json", key)
    if part is not None or digest is None:
        return part
    legacy = named(digest=None)
    part = _read_part(out / "settings" / f"{legacy}.json", legacy)
    if part is None or part.get("dataset_digest") != digest:
        return None
    return {**part, "key": key}


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


def _data_members(cfg, env, seeds, settings, out, chunking, which):
    """A distilled learner's members: ``(sweep, tasks, evaluate)``; ``tasks``
    maps ``"held_out"`` (the split's ``which`` tasks) and ``"train"`` to
    ``params(config)``. ``which``: ``None`` when nothing is evaluated."""
    progress = chunking["progress"]
    dataset = prepare_dataset(cfg, env, _data_dir(out, cfg), progress=progress)
    tasks = {
        "held_out": lambda config: held_out_tasks(env, dataset, config, which),
        "train": lambda config: train_tasks(env, dataset, config),
    }
    _check_held_out(tasks, cfg, which)
    meta = {"dataset_digest": dataset_digest(dataset.metadata)}
    sweep = train_sweep(
        cfg, env, dataset, seeds, settings, **chunking, checkpoint_meta=meta
    )
    return sweep, tasks, evaluate_members


def _online_members(cfg, env, seeds, settings, out, chunking, which):
    """An online learner's members: trained by RL, no dataset (the program is
    the run); ``(sweep, {"held_out": params(config)}, evaluate)``."""
    tasks = {"held_out": lambda config: held_out_online(env, config, which)}
    _check_held_out(tasks, cfg, which)
    sweep = online_sweep(cfg, env, seeds, settings, **chunking)
    return sweep, tasks, evaluate_online_members


def _check_held_out(tasks: dict[str, Any], cfg: ExperimentConfig, which) -> None:
    """Make the held-out ``which`` tasks once before training, so a split
    without them (a two-way split has no validation tasks) is refused
    before anything trains (``ValueError``, as ``agentrl eval --split``)."""
    if which is None:
        return
    try:
        tasks["held_out"](cfg)
    except ValueError as err:
        if which != "validation":
            raise
        raise ValueError(
            f"{err}; or score this sweep on its test tasks (--split test)"
        ) from None


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
