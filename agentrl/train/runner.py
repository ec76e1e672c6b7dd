"""The one training loop, for learners trained from data and learners trained online.

:func:`run_updates` runs a :class:`Learner` into a locked run directory, in
calls of up to ``steps_per_call`` updates (:func:`call_ends`; the progress
bar counts updates): the checkpointer and its write probe, exact resume
from the latest checkpoint, the logger and progress bar, the non-finite
loss check, a clean stop on SIGINT/SIGTERM at the next call boundary
(:mod:`agentrl.train.stop`), and the abandon path (close everything, remove
incomplete checkpoints, report a full disk as a
:class:`~agentrl.safeio.StorageError`). What differs
between learners is only how the :class:`Learner` is built:
:func:`agentrl.train.loop.data_learner` (a decision model distilled from a
dataset) and :func:`agentrl.train.online.online_learner` (an RL program over
trials); the algorithm picks one (:meth:`Algorithm.by_training`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

import agentrl.configtools as configtools
from agentrl.safeio import storage_error, temp_sibling
from agentrl.tables import write_text
from agentrl.train.checkpoint import (
    Checkpointer,
    complete_steps,
    remove_incomplete_checkpoints,
)
from agentrl.train.logger import RunLogger
from agentrl.train.segments import record_segment
from agentrl.train.stop import raise_if_stopped, stop_requested, stop_signals

#: A checkpoint's record of the metrics logged at the next log step
LOG_WINDOW = "log_window"


class NonFiniteLossError(RuntimeError):
    """The loss became NaN/inf; the last good checkpoint is kept."""


@dataclasses.dataclass
class Learner:
    """What :func:`run_updates` trains.

    Attributes:
      config: the completed config (saved with every checkpoint).
      state: the initial training state; a resumed run restores into it.
      begin: ``begin(start_step) -> advance``, ``advance(state, count) ->
        (state, metrics)`` the next ``count`` updates (a data learner's
        batch draws go on from step ``start_step``).
      log_values: the metrics of the calls since the last log line ->
        the values to log (``{"loss": ..., ...}``).
      finite: the metrics of calls -> whether every update in them stayed
        finite (default: the logged loss is finite); checked at every log
        line and before every save, so no checkpoint holds NaN weights.
      steps_per_call: most updates per ``advance`` call.
      timings: seconds of the start-up phases so far (:func:`timed`);
        :func:`run_updates` adds ``restore_s`` and ``first_call_s`` (the
        first call, its compile, ``compile_s``, included) and records them
        in ``run.json`` under ``"startup"``.
      close: stops what ``begin`` started (a dataset's reader threads).
      lead: whether this process writes logs (process 0 of a multi-host run).
    """

    config: Any
    state: Any
    begin: Callable[[int], Callable[[Any, int], tuple[Any, Any]]]
    log_values: Callable[[list[Any]], dict[str, Any]]
    close: Callable[[], None] = lambda: None
    lead: bool = True
    steps_per_call: int = 1
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    finite: Callable[[list[Any]], bool] | None = None

    def stayed_finite(self, calls: list[Any]) -> bool:
        if self.finite is not None:
            return self.finite(calls)
        return math.isfinite(float(self.log_values(calls)["loss"]))


def run_updates(
    learner: Learner,
    run_dir: Path,
    *,
    resume: bool,
    progress: bool,
    stop_at_step: int | None,
) -> Path:
    """Train ``learner`` to ``config.train.steps`` (or ``stop_at_step``)."""
    train = learner.config.train
    ckpt = Checkpointer(
        run_dir / "checkpoints", train.checkpoint_every, train.keep_checkpoints
    )
    _check_writable(run_dir, ckpt.directory)  # before anything compiles
    state, start, window = learner.state, 0, []
    if resume and ckpt.latest_step() is not None:
        with timed(learner.timings, "restore_s"):
            state, meta = ckpt.restore(state)
        start, window = int(meta["step"]), meta.get(LOG_WINDOW, [])
        if learner.lead:
            print(f"resumed at step {start} from {ckpt.directory}", flush=True)
    end = train.steps if stop_at_step is None else min(train.steps, stop_at_step)
    lead = learner.lead
    if lead and start < end:
        record_segment(run_dir, start, end)  # which code trains these updates
    logger = RunLogger(
        run_dir,
        train.steps,
        start_step=start,
        progress=progress and lead,
        tensorboard=lead,
        enabled=lead,
    )
    threads = set(threading.enumerate())  # orbax starts its own per save
    try:
        # SIGINT/SIGTERM: _loop stops at the next update boundary, checkpointed
        with stop_signals(enabled=jax.process_count() == 1) as stop:
            _loop(learner, state, (start, window), end, logger, ckpt, run_dir)
            learner.close()
            ckpt.close()  # waits for the last (async) save
    except BaseException as err:
        storage = _abandon_run(err, run_dir, logger, ckpt, threads, learner)
        if storage is not None:
            raise storage from err
        raise
    logger.close()
    raise_if_stopped(stop, ckpt.directory, complete_steps(ckpt.directory), end)
    return run_dir


def json_window(calls: list[Any]) -> list[Any]:
    """``calls``' metrics on the host as JSON values (scalars only); ``[]``
    where a metric is not a scalar (the window is then not kept)."""
    values = jax.device_get(calls)
    if any(np.ndim(x) for x in jax.tree.leaves(values)):
        return []
    return jax.tree.map(lambda x: np.asarray(x).item(), values)


@contextlib.contextmanager
def timed(timings: dict[str, float], name: str, add: bool = False):
    """Record the seconds the ``with`` block takes as ``timings[name]``
    (``add``: added to what is there)."""
    begin = time.perf_counter()
    yield
    seconds = time.perf_counter() - begin
    timings[name] = round(timings.get(name, 0.0) * add + seconds, 4)


def call_ends(start: int, end: int, per_call: int, train: Any) -> list[int]:
    """The steps at which the calls of updates ``start .. end`` end.

    A call runs at most ``per_call`` updates and ends at every multiple of
    ``train.log_every`` and ``train.checkpoint_every`` and at ``end``, so
    logs and checkpoints fall on call boundaries exactly where they are due.
    """
    ends, step = [], start
    while step < end:
        due = [(step // m + 1) * m for m in (train.log_every, train.checkpoint_every)]
        step = min(end, step + per_call, *due)
        ends.append(step)
    return ends


def _loop(learner, state, resumed, end, logger, ckpt, run_dir) -> None:
    """Updates ``start .. end`` in calls: log every ``log_every``, save when due.

    ``resumed``: ``(start, window)``, the metrics of the calls since the
    last log line that a checkpoint between log steps kept (``[]``: none),
    so a resumed run logs the same values as one never stopped."""
    start, since_log = resumed
    train = learner.config.train
    meta = {"config": configtools.to_dict(learner.config), "sampler_position": None}
    advance = learner.begin(start)
    step = start
    for done in call_ends(start, end, learner.steps_per_call, train):
        if step == start:
            with timed(learner.timings, "first_call_s"):
                state, metrics = jax.block_until_ready(advance(state, done - step))
            _record_startup(learner, run_dir)
        else:
            state, metrics = advance(state, done - step)
        since_log.append(metrics)
        logger.advance(done - step)
        step = done
        stopping = stop_requested()
        if done % train.log_every == 0 or done == end:
            _check_finite(learner.stayed_finite(since_log), done, ckpt)
            logger.log(done, learner.log_values(since_log))
            if done % train.log_every == 0:  # a stop's own line keeps the window
                since_log = []
        if ckpt.should_save(done) or done == end or stopping:
            _check_finite(learner.stayed_finite([metrics]), done, ckpt)
            meta["sampler_position"] = done
            meta[LOG_WINDOW] = json_window(since_log)
            # orbax meets an unwritable directory with threads that wait
            # minutes for each other: find out first
            _check_writable(run_dir, ckpt.directory)
            ckpt.save(done, state, meta)
        if stopping:
            return


def _record_startup(learner: Learner, run_dir: Path) -> None:
    """Add the start-up timings to ``run.json`` (``"startup"``, seconds)."""
    path = run_dir / "run.json"
    if not learner.lead or not path.is_file():
        return
    info = json.loads(path.read_text())
    info["startup"] = dict(learner.timings)
    write_text(path, json.dumps(info, indent=2))


def _check_finite(finite: bool, done: int, ckpt: Checkpointer) -> None:
    if not finite:
        last = ckpt.latest_step()
        kept = (
            f"the last good checkpoint is step {last} in {ckpt.directory}"
            if last is not None
            else "no checkpoint was written"
        )
        raise NonFiniteLossError(
            f"non-finite loss or gradients by update {done} (not checkpointed); {kept}"
        )


def _abandon_run(err, run_dir, logger, ckpt, threads, learner):
    """Clean up after a run failed with ``err``; the :func:`_save_error` to
    raise in its place (``None``: re-raise ``err``).

    Closes the logger, then the learner and the checkpointer quietly; the
    lead process then removes incomplete checkpoints.
    """
    logger.close()
    with contextlib.suppress(Exception):
        learner.close()
    # An async save that failed surfaces here (or at the next save): the
    # error in flight is the one to report, so closing again is quiet.
    with contextlib.suppress(Exception):
        ckpt.close()
    if learner.lead:
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


def device_metrics(metrics: Any) -> dict[str, Any]:
    """A data learner's log values: the last update's metrics, on the host."""
    values = jax.device_get(metrics)
    return {k: v for k, v in values.items() if k != "finite"}


def calls_finite(calls: list[Any]) -> bool:
    """Whether every update of a data learner's ``calls`` stayed finite
    (their ``"finite"`` flags: :func:`agentrl.train.step.make_train_call`)."""
    return all(bool(jax.device_get(c["finite"])) for c in calls)
