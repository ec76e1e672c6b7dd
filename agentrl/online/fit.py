"""Online learners in :func:`agentrl.train.fit`: run dir, checkpoints, resume.

An algorithm with ``trains_online = True`` is trained update by update by
its program (:meth:`Algorithm.make_online_train`: ``init`` once, then one
jitted ``update`` per step, ``train.steps`` updates), into the same run
directory layout as a distilled learner::

    run_dir/config.json      the full ExperimentConfig
    run_dir/run.json         env, task split (no dataset), versions
    run_dir/checkpoints/     orbax checkpoints of the WHOLE trainer state
    run_dir/metrics.jsonl    and run_dir/tb/

A checkpoint holds everything the next update reads (weights, optimizer
state, every environment's state and task, hidden states, the PRNG key), so
a run stopped at any checkpoint and resumed ends bit-identical to an
uninterrupted one. Logged metrics are the mean over the updates since the
last log (``NaN``-skipping: a rollout in which no trial ended has no trial
return). :func:`load_online_weights` restores the policy's weights for
:func:`agentrl.train.load_run`.
"""

from __future__ import annotations

import functools
import math
import threading
from pathlib import Path
from typing import Any

import jax
import numpy as np

from agentrl import configtools
from agentrl.train.rundir import write_run_record


def write_online_run_files(run_dir: Path, config: Any) -> None:
    """``config.json`` and ``run.json`` (as :func:`write_run_files`, no dataset)."""
    from agentrl.envs import make as make_env
    from agentrl.online.program import task_split_json

    env = make_env(config.data.env, **dict(config.data.env_args))
    write_run_record(
        run_dir,
        config,
        task_split_json(env, config.data),
        dataset=None,
        dataset_source=None,
        trained_online=True,
    )


def _mean_metrics(chunk: list[dict]) -> dict[str, float]:
    values = jax.device_get(chunk)
    out = {}
    for name in values[0]:
        xs = np.asarray([float(v[name]) for v in values], np.float64)
        finite = xs[np.isfinite(xs)]
        if name == "loss" or finite.size:
            out[name] = float(xs.mean()) if name == "loss" else float(finite.mean())
    return out


@functools.lru_cache(maxsize=4)
def _compiled(config: Any):
    """Jitted ``(init, update)`` of a completed config, kept for the process so
    a resumed (or repeated) fit of the same config does not compile again."""
    from agentrl.envs import make as make_env

    env = make_env(config.data.env, **dict(config.data.env_args))
    program = config.algo.make_online_train(config, env)
    return jax.jit(program.init), jax.jit(program.update, donate_argnums=0)


def fit_online(config, run_dir: Path, env, resume, progress, stop_at_step) -> Path:
    """:func:`agentrl.train.fit` for an online learner, once ``run_dir`` is locked."""
    from agentrl.train.checkpoint import Checkpointer
    from agentrl.train.config import complete_config
    from agentrl.train.logger import RunLogger
    from agentrl.train.loop import NonFiniteLossError, _abandon_run, _check_writable
    from agentrl.train.rundir import check_resumable
    from agentrl.train.step import default_hparams

    full = complete_config(config, env)
    if resume:
        check_resumable(run_dir, full)
    init, update = _compiled(full)
    write_online_run_files(run_dir, full)
    hparams = default_hparams(full)
    state = init(jax.random.key(full.train.seed), hparams)
    ckpt = Checkpointer(
        run_dir / "checkpoints",
        full.train.checkpoint_every,
        full.train.keep_checkpoints,
    )
    _check_writable(run_dir, ckpt.directory)
    start = 0
    if resume and ckpt.latest_step() is not None:
        state, meta = ckpt.restore(state)
        start = int(meta["step"])
    total = full.train.steps
    end = total if stop_at_step is None else min(total, stop_at_step)
    logger = RunLogger(run_dir, total, start_step=start, progress=progress)
    meta = {"config": configtools.to_dict(full), "sampler_position": None}
    threads = set(threading.enumerate())
    chunk: list[dict] = []
    try:
        for step in range(start, end):
            state, metrics = update(state, hparams)
            chunk.append(metrics)
            done = step + 1
            logger.advance()
            if done % full.train.log_every == 0 or done == end:
                values = _mean_metrics(chunk)
                chunk = []
                if not math.isfinite(values["loss"]):
                    raise NonFiniteLossError(
                        f"non-finite loss {values['loss']} by update {done}; the "
                        f"last good checkpoint is step {ckpt.latest_step()} in "
                        f"{ckpt.directory}"
                    )
                logger.log(done, values)
            if ckpt.should_save(done) or done == end:
                meta["sampler_position"] = done
                _check_writable(run_dir, ckpt.directory)
                ckpt.save(done, state, meta)
        ckpt.close()
    except BaseException as err:
        storage = _abandon_run(err, run_dir, logger, ckpt, threads)
        if storage is not None:
            raise storage from err
        raise
    logger.close()
    return run_dir


def load_online_weights(run_dir: Path, config: Any, env: Any, step: int | None):
    """``(policy weights, checkpoint meta)`` of an online learner's run."""
    from agentrl.train.checkpoint import Checkpointer
    from agentrl.train.step import default_hparams

    program = config.algo.make_online_train(config, env)
    like = jax.eval_shape(
        program.init, jax.random.key(config.train.seed), default_hparams(config)
    )
    like = jax.tree.map(
        lambda x: (
            # key arrays of any shape (an env state may hold one per env)
            jax.random.split(jax.random.key(0), math.prod(x.shape)).reshape(x.shape)
            if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
            else np.zeros(x.shape, x.dtype)
        ),
        like,
    )
    ckpt = Checkpointer(
        run_dir / "checkpoints", config.train.checkpoint_every, create=False
    )
    try:
        state, meta = ckpt.restore(like, step)
    finally:
        ckpt.close()
    return program.weights(state), meta
