"""The online learner for the one runner: run dir files, whole-state checkpoints.

An algorithm trained online by RL (RL², transformer PPO) is trained update by update by
its program (:meth:`Algorithm.make_online_train`: ``init`` once, then one
jitted ``update`` per step, ``train.steps`` updates, dispatched from the
host one by one), into the same run
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
return). :meth:`Algorithm.load_policy` restores the policy's weights for
:func:`agentrl.train.rundir.load_run`.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jax
import numpy as np

from agentrl.configtools import default_hparams
from agentrl.envs.registry import make as make_env
from agentrl.online.program import task_split_json
from agentrl.train.config import complete_config
from agentrl.train.rundir import resumable_config, write_run_record
from agentrl.train.runner import Learner


def write_online_run_files(run_dir: Path, config: Any) -> None:
    """``config.json`` and ``run.json`` (as :func:`write_run_files`, no dataset)."""
    env = make_env(config.data.env, **dict(config.data.env_args))
    write_run_record(
        run_dir,
        config,
        task_split_json(env, config.data),
        dataset=None,
        dataset_source=None,
        trained_online=True,
    )


def mean_metrics(chunk: list[dict]) -> dict[str, float]:
    """The mean of each metric over the updates since the last log line."""
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
    env = make_env(config.data.env, **dict(config.data.env_args))
    program = config.algo.make_online_train(config, env)
    return jax.jit(program.init), jax.jit(program.update, donate_argnums=0)


def online_learner(config: Any, env: Any):
    """``prepare(run_dir, resume, progress) -> Learner`` of an online learner.

    Checked now, before the run directory is made: one process (an online
    learner vmaps its seeds instead of spreading over hosts).
    """
    if jax.process_count() > 1:
        raise ValueError("online learners train in one process (vmap seeds)")

    def prepare(run_dir: Path, resume: bool, progress: bool) -> Learner:
        full = complete_config(config, env)
        if resume:
            full = resumable_config(run_dir, full)
        init, update = _compiled(full)
        write_online_run_files(run_dir, full)
        hparams = default_hparams(full)
        state = init(jax.random.key(full.train.seed), hparams)

        def advance(state, count):
            metrics = []
            for _ in range(count):
                state, m = update(state, hparams)
                metrics.append(m)
            return state, metrics

        return Learner(
            config=full,
            state=state,
            begin=lambda start: advance,
            log_values=lambda calls: mean_metrics([m for c in calls for m in c]),
        )

    return prepare
