"""``fit(config) -> run_dir``: the one training loop for CPU, GPU or a mesh.

The loop is thin: the training split sits on the device and one jitted
call (:func:`agentrl.train.step.make_train_call`) runs up to
``train.steps_per_call`` updates, each drawing its batch inside the program
as a pure function of ``(seed, step)`` (:mod:`agentrl.train.batches`), split
over the mesh's ``data`` axis. So a run killed at any point and resumed from
its last checkpoint (state + step) ends with exactly the same parameters as
an uninterrupted run.

A run directory holds everything the evaluation needs::

    run_dir/config.json      the full ExperimentConfig (model fields filled in)
    run_dir/run.json         env, task split, dataset reference, versions
    run_dir/dataset/         the learning histories (unless data.path is set)
    run_dir/checkpoints/     orbax checkpoints (last K)
    run_dir/metrics.jsonl    and run_dir/tb/ (TensorBoard)

One process at a time: ``fit`` holds ``run_dir/.lock``
(:class:`agentrl.safeio.DirectoryLock`) while it runs, so a second process
training into the same directory stops with an error naming the holder's
pid; a lock left by a killed process is taken over. On start it removes
what a killed run left in ``checkpoints/`` (orbax's unfinished temporary
directories, an old checkpoint whose deletion was cut short). A full disk
or an unwritable directory while saving stops training with a
:class:`agentrl.safeio.StorageError` that names the last complete
checkpoint, which is left intact, so the run resumes once there is space.
Checkpoints hold unsharded arrays, so a run can resume on another number
of devices.

The loop itself is :func:`agentrl.train.runner.run_updates`, written once;
the algorithm picks how it is trained (:meth:`Algorithm.by_training`):
:func:`data_learner` here (a decision model distilled from a dataset) or
:func:`agentrl.train.online.online_learner` (an RL program over trials with
no dataset, checkpointing the whole trainer state).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import nnx

import agentrl.train.parallel as parallel
from agentrl.cliargs import check_output_path
from agentrl.configtools import default_hparams
from agentrl.data.xland100b import is_hdf5
from agentrl.envs.registry import make as make_env
from agentrl.safeio import DirectoryLock
from agentrl.sources.registry import check_settings
from agentrl.train.batches import make_batches
from agentrl.train.checkpoint import complete_steps, remove_incomplete_checkpoints
from agentrl.train.config import ExperimentConfig, complete_config, steps_per_call
from agentrl.train.data import make_sampler, prepare_dataset
from agentrl.train.online import online_learner
from agentrl.train.rundir import (
    check_same_dataset,
    resumable_config,
    write_run_files,
)
from agentrl.train.runner import (
    Learner,
    calls_finite,
    device_metrics,
    run_updates,
    timed,
)
from agentrl.train.step import init_train_state, make_train_call, make_train_step


def build_model(config: ExperimentConfig, env: Any) -> Any:
    """The model of ``config`` (completed for ``env``), initialised from its seed
    (the algorithm's module: a ``DecisionModel`` unless it trains more)."""
    model_cfg = complete_config(config, env).model
    return config.algo.build_model(model_cfg, nnx.Rngs(config.train.seed))


#: What a run directory holds once a run trained into it.
RUN_PARTS = ("checkpoints", "dataset", "metrics.jsonl", "config.json")


#: What a run that failed before its first checkpoint leaves besides its data.
UNTRAINED_RECORDS = ("config.json", "run.json", "metrics.jsonl", "tb")


def _check_fresh(run_dir: Path) -> None:
    """Refuse to train afresh (``resume=False``) into a directory that
    holds a run: its checkpoints would outrank the new run's saves, its
    dataset be reused and its log appended to, under the new config. A run
    with no complete checkpoint trained nothing that is kept
    (:func:`_forget_untrained_run`)."""
    if not complete_steps(run_dir / "checkpoints"):
        return
    found = [p for p in RUN_PARTS if (run_dir / p).exists()]
    if found:
        raise ValueError(
            f"run_dir {run_dir} holds a run ({', '.join(found)}); training "
            "without resuming (--no-resume) would mix it with the new one: "
            "train into a new run_dir, or remove that one first"
        )


def fit(
    config: ExperimentConfig,
    run_dir: str | Path | None = None,
    *,
    resume: bool = True,
    progress: bool = True,
    stop_at_step: int | None = None,
) -> Path:
    """Train ``config`` into ``run_dir`` (default ``runs/<name>``); return it.

    Args:
      resume: continue from the latest checkpoint in ``run_dir`` if any;
        ``False`` trains afresh and refuses a ``run_dir`` that holds a run.
      stop_at_step: stop (after checkpointing) at this step, e.g. to test
        resumption; the run is then incomplete and can be resumed.

    Raises :class:`~agentrl.safeio.DirectoryLockedError` (a ``ValueError``)
    if another process is training into ``run_dir``, and
    :class:`~agentrl.safeio.StorageError` (an ``OSError``) if the disk is full
    or the directory unwritable; the last complete checkpoint is kept.
    """
    check_output_path(run_dir, "run_dir")  # "" is no run directory
    run_dir = Path(run_dir or Path("runs") / config.name).resolve()
    env = make_env(config.data.env, **dict(config.data.env_args))
    trainer = config.algo.by_training(from_data=data_learner, online=online_learner)
    prepare = trainer(config, env)  # checks what it can before any file is made
    if not resume:
        _check_fresh(run_dir)
    created = _first_missing(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    lead = jax.process_index() == 0
    # One writer per run directory (process 0 of a multi-host run holds it).
    try:
        lock = DirectoryLock(run_dir, "run directory").acquire() if lead else None
    except BaseException:
        _remove_if_empty(run_dir, created)
        raise
    try:
        if lead:
            remove_incomplete_checkpoints(run_dir / "checkpoints")
            _forget_untrained_run(run_dir)
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices("agentrl checkpoints recovered")
        learner = prepare(run_dir, resume, progress)
        return run_updates(
            learner,
            run_dir,
            resume=resume,
            progress=progress,
            stop_at_step=stop_at_step,
        )
    except BaseException:
        if lock is not None:
            lock.release()
            lock = None
        _remove_if_empty(run_dir, created)  # a run that wrote nothing leaves nothing
        raise
    finally:
        if lock is not None:
            lock.release()


def _forget_untrained_run(run_dir: Path) -> None:
    """A run that failed before its first checkpoint (a NaN, a kill) left
    its config and logs but no weights: remove them, so the next run starts
    it again under its own config. Its generated dataset stays, used only
    where generated as the new config asks
    (:func:`agentrl.train.data.prepare_dataset`)."""
    if complete_steps(run_dir / "checkpoints"):
        return
    left = [name for name in UNTRAINED_RECORDS if (run_dir / name).exists()]
    for name in left:
        path = run_dir / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    if left:
        print(
            f"{run_dir}: a run with no checkpoint (it stopped before its first); "
            f"its {', '.join(left)} removed, training from step 0",
            flush=True,
        )


def data_learner(config: ExperimentConfig, env: Any):
    """``prepare(run_dir, resume, progress) -> Learner`` of a distilled learner.

    Checked now, before the run directory is made: the batch fits the mesh,
    ``data.path`` is there (or the source's settings are good), the model
    config builds. The learner's ``timings`` record the start-up:
    ``dataset_open_s`` (open and verify, or generate), ``decode_s`` (the
    split into memory), ``device_data_s`` (its tables, placed on the mesh),
    ``model_init_s``, ``compile_s``.
    """
    mesh = parallel.make_mesh()
    parallel.check_batch_divisible(config.train.batch_size, mesh)
    _check_data_source(config, env)
    timings: dict[str, float] = {}
    with timed(timings, "model_init_s"):
        model = build_model(config, env)

    def prepare(run_dir: Path, resume: bool, progress: bool) -> Learner:
        with timed(timings, "dataset_open_s"):
            dataset = prepare_dataset(config, env, run_dir, progress=progress)
        full = complete_config(config, env, dataset)
        if resume:
            full = resumable_config(run_dir, full)
            check_same_dataset(run_dir, dataset)  # data.path moved, not changed
        with timed(timings, "decode_s"):
            sampler = make_sampler(full, dataset, env)
        if jax.process_index() == 0:
            write_run_files(run_dir, full, dataset)
        with timed(timings, "model_init_s", add=True):
            graphdef, state = init_train_state(model, full)
            state = parallel.replicate(state, mesh)
        with timed(timings, "device_data_s"):
            batches = make_batches(sampler, mesh)

        def build_call():  # in begin(): after a resume has read its checkpoint
            step = make_train_step(graphdef, full, env)
            call = make_train_call(step, batches.draw, parallel.data_sharding(mesh))
            return jax.jit(call, donate_argnums=0)

        return Learner(
            config=full,
            state=state,
            begin=_beginner(build_call, batches, full, mesh, timings),
            log_values=lambda since_log: device_metrics(since_log[-1]),
            finite=calls_finite,
            close=batches.close,  # a streamed split's reader threads
            lead=jax.process_index() == 0,
            steps_per_call=steps_per_call(full.train, jax.default_backend()),
            timings=timings,
        )

    return prepare


def _beginner(build_call, batches, config: ExperimentConfig, mesh, timings: dict):
    """``begin(start) -> advance(state, count)``: calls of the jitted program
    ``build_call()`` going on from step ``start``. Where every call's
    arguments have the same shapes (the split on the device), the program is
    compiled ahead of the first call, timed as ``timings["compile_s"]``."""

    def begin(start: int):
        call = build_call()
        hparams = parallel.replicate(default_hparams(config), mesh)
        position, compiled = [start], []  # the next update's step; the program

        def advance(state, count: int):
            step = np.int32(position[0])
            position[0] += count
            args = (hparams, batches.call_data(int(step), count), step)
            if not compiled and batches.fixed_shapes:
                with timed(timings, "compile_s"):
                    compiled.append(call.lower(state, *args, np.int32(1)).compile())
            return (compiled or [call])[0](state, *args, np.int32(count))

        return advance

    return begin


def _check_data_source(config: ExperimentConfig, env: Any) -> None:
    """Check, before the run directory is made or the model built, that a
    ``data.path`` dataset directory is there (``FileNotFoundError``) or the
    source settings of a dataset the run will generate (``ValueError``
    naming the setting)."""
    data = config.data
    generates = not data.path or (is_hdf5(data.path) and not Path(data.path).exists())
    if generates:
        check_settings(data.source, env, dict(data.source_args))
    elif not is_hdf5(data.path) and not Path(data.path).exists():
        raise FileNotFoundError(
            f"data.path {data.path}: no such dataset directory (a dataset made "
            "by agentrl data generate, or an XLand-100B .h5 file)"
        )


def _first_missing(run_dir: Path) -> Path | None:
    """The outermost of ``run_dir`` and its parents that does not exist yet
    (what ``mkdir(parents=True)`` will create), ``None`` if it exists."""
    missing = None
    for path in (run_dir, *run_dir.parents):
        if path.exists():
            return missing
        missing = path
    return missing


def _remove_if_empty(run_dir: Path, created: Path | None) -> None:
    """Remove ``run_dir`` and its parents up to ``created`` (the outermost
    this call made, :func:`_first_missing`) while nothing was written there."""
    if created is None:
        return
    for path in (run_dir, *run_dir.parents):
        if not path.is_dir() or any(path.iterdir()):
            return
        path.rmdir()
        if path == created:
            return
