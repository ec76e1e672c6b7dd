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

An algorithm trained online by RL (``algo.trains_online``: RL²) has no
dataset: ``fit`` runs its own program update by update into the same run
directory, checkpointing the whole trainer state (:mod:`agentrl.online.fit`).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from pathlib import Path
from typing import Any

import jax
from flax import nnx

from agentrl import configtools
from agentrl.envs import make as make_env
from agentrl.models import DecisionModel
from agentrl.safeio import DirectoryLock, storage_error, temp_sibling
from agentrl.train import parallel
from agentrl.train.checkpoint import (
    Checkpointer,
    complete_steps,
    remove_incomplete_checkpoints,
)
from agentrl.train.config import ExperimentConfig, complete_config
from agentrl.train.logger import RunLogger
from agentrl.train.rundir import (  # noqa: F401  (re-exported)
    RESUME_MAY_CHANGE,
    check_resumable,
    load_config,
    load_model,
    load_run,
    write_run_files,
)
from agentrl.train.step import default_hparams, init_train_state, make_train_step


class NonFiniteLossError(RuntimeError):
    """The loss became NaN/inf; the last good checkpoint is kept."""


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
    online = config.algo.trains_online
    if online:
        # Online RL learners bring their own program (Algorithm.make_online_train).
        if jax.process_count() > 1:
            raise ValueError("online learners train in one process (vmap seeds)")
        mesh = model = None
    else:
        mesh = parallel.make_mesh()
        parallel.check_batch_divisible(config.train.batch_size, mesh)
        model = build_model(config, env)  # validates the model config early
        _check_data_source(config, env)

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
        if online:
            from agentrl.online.fit import fit_online

            return fit_online(config, run_dir, env, resume, progress, stop_at_step)
        return _fit(config, run_dir, env, mesh, model, resume, progress, stop_at_step)
    except BaseException:
        if lock is not None:
            lock.release()
            lock = None
        _remove_if_empty(run_dir, created)  # a run that wrote nothing leaves nothing
        raise
    finally:
        if lock is not None:
            lock.release()


def _check_data_source(config: ExperimentConfig, env: Any) -> None:
    """Check the source settings of a dataset the run will generate, before
    the run directory is made (``ValueError`` naming the setting)."""
    from agentrl.data.xland100b import is_hdf5
    from agentrl.sources.registry import check_settings

    data = config.data
    generates = not data.path or (is_hdf5(data.path) and not Path(data.path).exists())
    if generates:
        check_settings(data.source, env, dict(data.source_args))


def _remove_if_empty(run_dir: Path, created: bool) -> None:
    """Remove ``run_dir`` if this call created it and nothing was written."""
    if created and run_dir.is_dir() and not any(run_dir.iterdir()):
        run_dir.rmdir()


def _fit(config, run_dir, env, mesh, model, resume, progress, stop_at_step) -> Path:
    """:func:`fit` once ``run_dir`` is locked."""
    from agentrl.train.data import host_batches, make_sampler, prepare_dataset

    dataset = prepare_dataset(config, env, run_dir, progress=progress)
    full_config = complete_config(config, env, dataset)
    if resume:
        check_resumable(run_dir, full_config)
    sampler = make_sampler(full_config, dataset, env)
    if jax.process_index() == 0:
        write_run_files(run_dir, full_config, dataset)

    graphdef, state = init_train_state(model, full_config)
    state = parallel.replicate(state, mesh)
    ckpt = Checkpointer(
        run_dir / "checkpoints",
        config.train.checkpoint_every,
        config.train.keep_checkpoints,
    )
    _check_writable(run_dir, ckpt.directory)  # before anything compiles
    start = 0
    if resume and ckpt.latest_step() is not None:
        state, meta = ckpt.restore(state)
        start = int(meta["step"])
    step_fn = jax.jit(make_train_step(graphdef, full_config, env), donate_argnums=0)
    hparams = parallel.replicate(default_hparams(full_config), mesh)
    total = config.train.steps
    end = total if stop_at_step is None else min(total, stop_at_step)
    # One writer per run: process 0 logs; every process checkpoints (orbax
    # coordinates multi-host saves).
    lead = jax.process_index() == 0
    logger = RunLogger(
        run_dir,
        total,
        start_step=start,
        progress=progress and lead,
        tensorboard=lead,
        enabled=lead,
    )
    meta = {"config": configtools.to_dict(full_config), "sampler_position": None}
    threads = set(threading.enumerate())  # orbax starts its own per save
    batches = host_batches(sampler, start)
    try:
        for step in range(start, end):
            batch = parallel.shard_batch(next(batches), mesh)
            state, metrics = step_fn(state, batch, hparams)
            done = step + 1
            logger.advance()
            if done % config.train.log_every == 0 or done == end:
                values = jax.device_get(metrics)
                if not math.isfinite(float(values["loss"])):
                    raise NonFiniteLossError(
                        f"non-finite loss {float(values['loss'])} at step {done}; "
                        f"the last good checkpoint is step {ckpt.latest_step()} in "
                        f"{ckpt.directory}"
                    )
                logger.log(done, {k: v for k, v in values.items() if k != "finite"})
            if ckpt.should_save(done) or done == end:
                if not math.isfinite(float(metrics["loss"])):
                    raise NonFiniteLossError(
                        f"non-finite loss at step {done}; not checkpointed; the last "
                        f"good checkpoint is step {ckpt.latest_step()}"
                    )
                meta["sampler_position"] = done
                # orbax meets an unwritable directory with threads that wait
                # minutes for each other: find out first
                _check_writable(run_dir, ckpt.directory)
                ckpt.save(done, state, meta)
        batches.close()  # stops grain's reader threads, if any
        ckpt.close()  # waits for the last (async) save
    except BaseException as err:
        # batches.close: grain's reader threads
        storage = _abandon_run(
            err, run_dir, logger, ckpt, threads, lead=lead, close=(batches.close,)
        )
        if storage is not None:
            raise storage from err
        raise
    logger.close()
    return run_dir


def _abandon_run(
    err: BaseException,
    run_dir: Path,
    logger: Any,
    ckpt: Any,
    threads: set,
    *,
    lead: bool = True,
    close: tuple = (),
):
    """Clean up after a run failed with ``err``; the :func:`_save_error` to
    raise in its place (``None``: re-raise ``err``).

    Closes the logger, then each of ``close`` and the checkpointer quietly;
    the lead process then removes incomplete checkpoints.
    """
    logger.close()
    for closer in close:
        with contextlib.suppress(Exception):
            closer()
    # An async save that failed surfaces here (or at the next save): the
    # error in flight is the one to report, so closing again is quiet.
    with contextlib.suppress(Exception):
        ckpt.close()
    if lead:
        # A failed save's other writers may still be running: let them
        # end before removing what they wrote.
        _join_new_threads(threads, timeout=30)
        remove_incomplete_checkpoints(ckpt.directory)
    return _save_error(err, run_dir, ckpt.directory)


def _check_writable(run_dir: Path, directory: Path) -> None:
    """Raise the :func:`_save_error` of ``directory`` if nothing can be made there."""
    probe = temp_sibling(directory / "probe")
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as err:
        raise _save_error(err, run_dir, directory) or err from None


def _join_new_threads(before: set, timeout: float) -> None:
    """Wait (up to ``timeout`` s in all) for new non-daemon threads to end."""
    deadline = time.monotonic() + timeout
    for thread in set(threading.enumerate()) - before:
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))


def _save_error(err: BaseException, run_dir: Path, directory: Path):
    """A :class:`~agentrl.safeio.StorageError` for a failed write, else ``None``.

    The message names the last complete checkpoint in ``directory``, which
    orbax never touches while writing a new one.
    """
    if not isinstance(err, Exception):
        return None
    last = complete_steps(directory)
    after = (
        f"the last complete checkpoint, step {last[-1]}, is intact: free space "
        "(or make the directory writable) and run again to resume from it"
        if last
        else "no checkpoint was written"
    )
    return storage_error(err, f"write the training run {run_dir}", after)
