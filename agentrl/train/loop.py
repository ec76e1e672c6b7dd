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
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jax
from flax import nnx

from agentrl import configtools
from agentrl.envs import make as make_env
from agentrl.models import DecisionModel
from agentrl.train import parallel
from agentrl.train.checkpoint import Checkpointer
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
    """
    from agentrl.train.data import make_sampler, prepare_dataset

    if config.algo.trains_online:
        # Online RL learners bring their own program (Algorithm.make_online_train).
        raise ValueError(
            f"algo {config.algo.label!r} trains online by RL, not from a dataset: "
            "run its own program (algo.make_online_train), not fit"
        )
    run_dir = Path(run_dir or Path("runs") / config.name).resolve()
    env = make_env(config.data.env, **dict(config.data.env_args))
    mesh = parallel.make_mesh()
    parallel.check_batch_divisible(config.train.batch_size, mesh)
    model = build_model(config, env)  # validates the model config early

    run_dir.mkdir(parents=True, exist_ok=True)
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
    try:
        for step in range(start, end):
            batch = parallel.shard_batch(sampler.host_batch(step), mesh)
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
                ckpt.save(done, state, meta)
    finally:
        ckpt.close()
        logger.close()
    return run_dir
