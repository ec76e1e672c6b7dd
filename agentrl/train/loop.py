"""``fit(config) -> run_dir``: the one training loop for CPU, GPU or a mesh.

The loop is thin: the data sampler gives host batches that are a pure
function of ``(seed, step)``, they are placed on the mesh's ``data`` axis,
and one jitted update step (:mod:`agentrl.train.step`) consumes them. So a
run killed at any point and resumed from its last checkpoint (state + step)
ends with exactly the same parameters as an uninterrupted run.

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

from pathlib import Path
from typing import Any

import jax
from flax import nnx

import agentrl.train.parallel as parallel
from agentrl.configtools import default_hparams
from agentrl.data.xland100b import is_hdf5
from agentrl.envs.registry import make as make_env
from agentrl.models.transformer import DecisionModel
from agentrl.safeio import DirectoryLock
from agentrl.sources.registry import check_settings
from agentrl.train.checkpoint import remove_incomplete_checkpoints
from agentrl.train.config import ExperimentConfig, complete_config
from agentrl.train.data import host_batches, make_sampler, prepare_dataset
from agentrl.train.online import online_learner
from agentrl.train.rundir import check_resumable, write_run_files
from agentrl.train.runner import Learner, device_metrics, run_updates
from agentrl.train.step import init_train_state, make_train_step


def build_model(config: ExperimentConfig, env: Any) -> DecisionModel:
    """The model of ``config`` (completed for ``env``), initialised from its seed."""
    model_cfg = complete_config(config, env).model
    return DecisionModel(model_cfg, rngs=nnx.Rngs(config.train.seed))


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
      resume: continue from the latest checkpoint in ``run_dir`` if any.
      stop_at_step: stop (after checkpointing) at this step, e.g. to test
        resumption; the run is then incomplete and can be resumed.

    Raises :class:`~agentrl.safeio.DirectoryLockedError` (a ``ValueError``)
    if another process is training into ``run_dir``, and
    :class:`~agentrl.safeio.StorageError` (an ``OSError``) if the disk is full
    or the directory unwritable; the last complete checkpoint is kept.
    """
    run_dir = Path(run_dir or Path("runs") / config.name).resolve()
    env = make_env(config.data.env, **dict(config.data.env_args))
    trainer = config.algo.by_training(from_data=data_learner, online=online_learner)
    prepare = trainer(config, env)  # checks what it can before any file is made
    created = not run_dir.exists()
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


def data_learner(config: ExperimentConfig, env: Any):
    """``prepare(run_dir, resume, progress) -> Learner`` of a distilled learner.

    Checked now, before the run directory is made: the batch fits the mesh,
    the model config builds, the data source's settings.
    """
    mesh = parallel.make_mesh()
    parallel.check_batch_divisible(config.train.batch_size, mesh)
    model = build_model(config, env)
    _check_data_source(config, env)

    def prepare(run_dir: Path, resume: bool, progress: bool) -> Learner:
        dataset = prepare_dataset(config, env, run_dir, progress=progress)
        full = complete_config(config, env, dataset)
        if resume:
            check_resumable(run_dir, full)
        sampler = make_sampler(full, dataset, env)
        if jax.process_index() == 0:
            write_run_files(run_dir, full, dataset)
        graphdef, state = init_train_state(model, full)
        state = parallel.replicate(state, mesh)
        stream = []  # the batch stream begin() starts, for close()

        def begin(start: int):
            step_fn = jax.jit(make_train_step(graphdef, full, env), donate_argnums=0)
            hparams = parallel.replicate(default_hparams(full), mesh)
            stream.append(host_batches(sampler, start))
            batches = stream[-1]
            return lambda state: step_fn(
                state, parallel.shard_batch(next(batches), mesh), hparams
            )

        return Learner(
            config=full,
            state=state,
            begin=begin,
            log_values=lambda since_log: device_metrics(since_log[-1]),
            close=lambda: [batches.close() for batches in stream],  # grain's threads
            lead=jax.process_index() == 0,
        )

    return prepare


def _check_data_source(config: ExperimentConfig, env: Any) -> None:
    """Check the source settings of a dataset the run will generate, before
    the run directory is made (``ValueError`` naming the setting)."""
    data = config.data
    generates = not data.path or (is_hdf5(data.path) and not Path(data.path).exists())
    if generates:
        check_settings(data.source, env, dict(data.source_args))


def _remove_if_empty(run_dir: Path, created: bool) -> None:
    """Remove ``run_dir`` if this call created it and nothing was written."""
    if created and run_dir.is_dir() and not any(run_dir.iterdir()):
        run_dir.rmdir()
