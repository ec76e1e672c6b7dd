"""Train ``S`` seeds x ``H`` traced settings of one experiment in ONE program.

The PureJaxRL pattern on top of :mod:`agentrl.train.step`: the update step
``step(state, batch, hparams)`` is vmapped over a leading *member* axis of
size ``M = S * H`` (seed-major: member ``m`` is seed ``m // H`` with traced
setting ``m % H``). Each seed has its own model initialisation
(``nnx.Rngs(seed)``, exactly as :func:`agentrl.train.loop.build_model`) and
its own batch stream (the sampler seeded with that seed), shared by the
seed's ``H`` settings, so member ``m`` follows exactly the run that
``fit`` would make with that seed and setting.

Steps run in chunks of ``steps_per_call``: each seed's device sampler
(:class:`~agentrl.data.device_sampler.DeviceSampler`, the draws of ``fit``)
draws the chunk's batches ``[K, M, B, ...]`` on the device and one jitted
``lax.scan`` applies ``K`` vmapped steps (``steps_per_call=1`` is a Python
loop over one jitted vmapped step).
With several devices the member axis is placed on the mesh's ``sweep`` axis
(``NamedSharding``), and a batch axis on ``data`` if devices remain.

:func:`evaluate_members` runs every member in context on held-out tasks in
one jitted program too (vmapped over the members' weights).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import agentrl.configtools as configtools
import agentrl.train.parallel as parallel
from agentrl.agents.driver import run_batched_agent
from agentrl.agents.model_agents import ModelHandle
from agentrl.checks import is_int
from agentrl.data.device_sampler import device_sampler_of
from agentrl.data.task_plan import training_tasks
from agentrl.envs.base import env_horizon
from agentrl.tables import write_bytes
from agentrl.train.checkpoint import Checkpointer, remove_incomplete_checkpoints
from agentrl.train.config import ExperimentConfig, complete_config
from agentrl.train.data import make_sampler
from agentrl.train.rundir import eval_tasks
from agentrl.train.step import init_train_state, make_train_step


@dataclasses.dataclass
class SweepResult:
    """What every sweep returns (:class:`TrainSweep`, the online sweep's).

    Attributes:
      config: the completed experiment.
      seeds: the ``S`` training seeds.
      settings: the ``H`` traced settings (dicts of hparam name -> value).
      metrics: name -> ``[S, H, steps]`` float arrays (``loss`` ...).
      state: the final trainer state, leaves ``[M, ...]`` with ``M = S * H``.
      seconds: wall time of the training loop (compile included).
      resumed_from: the step it continued from (0: a fresh start).
    """

    config: ExperimentConfig
    seeds: list[int]
    settings: list[dict[str, float]]
    metrics: dict[str, np.ndarray]
    state: Any
    seconds: float
    resumed_from: int = 0

    @property
    def num_members(self) -> int:
        return len(self.seeds) * len(self.settings)


@dataclasses.dataclass
class TrainSweep(SweepResult):
    """The outcome of :func:`train_sweep` (``metrics``: ``loss``,
    ``accuracy`` ...; the config has its model fields filled in).

    Attributes:
      graphdef: the model's graph definition (shared by all members).
    """

    graphdef: Any = None


def check_steps_per_call(steps_per_call: Any) -> int:
    """``steps_per_call`` if an integer >= 1 (``ValueError`` otherwise)."""
    if not is_int(steps_per_call, 1):
        raise ValueError(
            f"steps_per_call must be an integer >= 1, got {steps_per_call!r}"
        )
    return steps_per_call


def run_member_chunks(
    state: Any,
    chunk: Any,
    total: int,
    steps_per_call: int,
    *,
    checkpoint_dir: str | Path | None,
    checkpoint_every: int,
    progress: bool,
    unit: str,
    meta: dict[str, Any] | None = None,
) -> tuple[Any, list[dict], int]:
    """Steps ``0 .. total`` of a sweep in chunks, resumable: ``(state,
    host metric chunks [K, M] each, first step run here)``.

    ``chunk(state, lo, hi) -> (state, metrics)`` runs steps ``lo .. hi`` of
    every member. With ``checkpoint_dir`` the run continues from its
    latest checkpoint there, and saves the state (orbax, the last one kept),
    ``meta`` (JSON, e.g. the dataset's digest) and the metrics so far at the
    first chunk boundary after every ``checkpoint_every`` steps (0: only at
    the end) and at the end. A checkpoint beyond ``total`` is refused
    (``ValueError``): the members have trained more steps than asked for.
    """
    from tqdm.auto import tqdm

    chunks: list[dict] = []
    ckpt, first, saved = None, 0, 0
    if checkpoint_dir is not None:
        ckpt, state, first, chunks = _resume_members(checkpoint_dir, state, total)
        saved = first
    bar = tqdm(
        total=total, initial=first, desc="sweep", unit=unit, disable=not progress
    )
    try:
        for lo in range(first, total, steps_per_call):
            hi = min(lo + steps_per_call, total)
            state, metrics = chunk(state, lo, hi)
            chunks.append(metrics)
            bar.update(hi - lo)
            if ckpt is not None and (
                hi == total or (checkpoint_every and hi - saved >= checkpoint_every)
            ):
                # the metrics first: a kill between the two leaves more
                # metric rows than checkpointed steps, never fewer
                _save_metrics(checkpoint_dir, chunks)
                ckpt.save(hi, {"state": state}, dict(meta or {}))
                saved = hi
        if ckpt is not None:
            ckpt.close()
            ckpt = None
    finally:
        bar.close()
        if ckpt is not None:
            with contextlib.suppress(Exception):
                ckpt.close()
    host = jax.device_get(chunks)
    jax.block_until_ready(state)
    return state, host, first


def check_members(
    seeds: Any, settings: list[dict[str, float]] | None, steps_per_call: Any
) -> tuple[list[int], list[dict[str, float]]]:
    """A sweep's checked ``(seeds, settings)`` (``settings`` default ``[{}]``);
    ``ValueError`` on bad seeds or ``steps_per_call``."""
    seeds = check_seeds(seeds)
    settings = list(settings or [{}])
    check_steps_per_call(steps_per_call)
    return seeds, settings


def member_metrics(host: list[dict], num_s: int, num_h: int) -> dict[str, np.ndarray]:
    """``{name: [S, H, steps]}`` from :func:`run_member_chunks`' host chunks
    (``{name: [K, M]}`` each, members seed-major); other metrics dropped."""
    names = [k for k in host[0] if np.ndim(host[0][k]) == 2]
    return {
        k: np.concatenate([c[k] for c in host], 0).T.reshape(num_s, num_h, -1)
        for k in names
    }


def check_seeds(seeds: Any) -> list[int]:
    """A list of distinct integer seeds in ``[0, 2**32)`` (``ValueError``
    otherwise; the seeds are one program's uint32 argument)."""
    seeds = list(seeds)
    ok = all(is_int(s, 0) and s < 2**32 for s in seeds)
    if not seeds or not ok or len(set(seeds)) != len(seeds):
        raise ValueError(
            f"seeds must be distinct integers in [0, 2**32), got {seeds!r}"
        )
    return seeds


def member_hparams(
    config: ExperimentConfig, settings: list[dict[str, float]], num_seeds: int
) -> dict[str, jax.Array]:
    """Traced hparams ``{path: [M]}`` float32, seed-major, defaults from ``config``.

    ``settings`` are ``{field: value}`` dicts keyed by path or unique name
    (``{"train.lr": 1e-3}`` or ``{"lr": 1e-3}``); a field that is not traced
    raises ``ValueError`` naming it.
    """
    base = configtools.traced_values(config)
    per_setting = []
    for setting in settings:
        resolved = {
            configtools.resolve(config, k): float(v) for k, v in setting.items()
        }
        untraced = sorted(set(resolved) - set(base))
        if untraced:
            raise ValueError(
                f"{untraced} are not traced fields; traced: {sorted(base)} (sweep "
                "other fields as a static grid)"
            )
        per_setting.append({**base, **resolved})
    return configtools.traced_tree(
        config,
        lambda path, _: jnp.asarray(
            [h[path] for h in per_setting] * num_seeds, jnp.float32
        ),
    )


def init_member_states(
    config: ExperimentConfig, env: Any, seeds: list[int], num_settings: int
) -> tuple[Any, Any]:
    """``(graphdef, state)``: one init per seed, repeated; leaves ``[M, ...]``.

    ``config`` is completed (:func:`~agentrl.train.config.complete_config`).
    """
    graphdef, states = None, []
    for seed in seeds:
        model = config.algo.build_model(config.model, nnx.Rngs(seed))
        graphdef, state = init_train_state(model, config)
        states.append(state)
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *states)
    return graphdef, jax.tree.map(lambda x: jnp.repeat(x, num_settings, 0), stacked)


def sweep_mesh(num_members: int, batch_size: int | None = None):
    """A ``(sweep, data)`` mesh: members over ``gcd(M, devices)`` devices.

    ``batch_size``: the batch split over the devices left for the data axis
    (checked to divide); ``None`` when members have no batch (online learners).
    """
    devices = jax.device_count()
    num_sweep = math.gcd(num_members, devices)
    mesh = parallel.make_mesh(num_data=devices // num_sweep, num_sweep=num_sweep)
    if batch_size is not None and batch_size % mesh.shape[parallel.DATA]:
        raise ValueError(
            f"train.batch_size ({batch_size}) must be divisible by the "
            f"{mesh.shape[parallel.DATA]} devices left for the data axis once "
            f"{num_members} sweep members are spread over {num_sweep} devices"
        )
    return mesh


@functools.lru_cache(maxsize=16)
def make_chunk_fn(graphdef: Any, config: ExperimentConfig, env: Any):
    """``run(state [M], batches [K, M, B, ...], hp [M]) -> (state, metrics [K, M])``.

    :func:`fit`'s update step (:func:`~agentrl.train.step.make_train_step`),
    vmapped over members and scanned over a chunk of steps. Cached on its
    arguments, so a repeated sweep of the same program reuses its
    compilation.
    """
    step = jax.vmap(make_train_step(graphdef, config, env))

    def run(state, batches, hp):
        return jax.lax.scan(lambda s, b: step(s, b, hp), state, batches)

    return jax.jit(run, donate_argnums=0)


def _with_seed(config: ExperimentConfig, seed: int) -> ExperimentConfig:
    return dataclasses.replace(
        config, train=dataclasses.replace(config.train, seed=seed)
    )


def _member_draws(full: ExperimentConfig, dataset: Any, env: Any, seeds: list):
    """``draw(steps [K]) -> batches [K, S, B, ...]``: the batches ``fit``
    draws for each seed at those steps: one program for every seed where
    the device sampler draws for members (``member_draws``); else (RA-DT's
    own) seed by seed."""
    device = device_sampler_of(make_sampler(full, dataset, env))
    if hasattr(device, "member_draws"):
        return device.member_draws(seeds)
    per_seed = []
    for seed in seeds:
        own = device_sampler_of(make_sampler(_with_seed(full, seed), dataset, env))
        per_seed.append((jax.jit(jax.vmap(own.draw, (None, 0))), own.data))
    return lambda steps: jax.tree.map(
        lambda *x: jnp.stack(x, 1), *[d(data, steps) for d, data in per_seed]
    )


def train_sweep(
    config: ExperimentConfig,
    env: Any,
    dataset: Any,
    seeds: list[int],
    settings: list[dict[str, float]] | None = None,
    *,
    steps_per_call: int = 10,
    progress: bool = False,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 0,
    checkpoint_meta: dict[str, Any] | None = None,
) -> TrainSweep:
    """Train every (seed, traced setting) member of ``config`` in one program.

    Args:
      config: the experiment; ``train.steps`` steps are run.
      env: its environment (``agentrl.envs.make(config.data.env, ...)``).
      dataset: the opened history dataset (:func:`agentrl.train.data.prepare_dataset`).
      seeds: ``S`` distinct training seeds (model init and batch stream).
      settings: ``H`` dicts of traced fields by path (``train.lr``,
        ``algo.balance_weight`` ...); default ``[{}]`` (the config's values).
      steps_per_call: steps per jitted ``lax.scan`` chunk (1 = Python loop);
        a last, shorter chunk (``steps % steps_per_call``) compiles once more.
      checkpoint_dir: if given, the members' state (orbax, the last one
        kept) and metrics so far (``metrics.npz``) are saved there at the
        first chunk boundary after every ``checkpoint_every`` steps and at
        the end, and a later call with the same arguments continues from
        the latest: a killed sweep resumes with exactly the results of an
        uninterrupted one.
      checkpoint_every: steps between those checkpoints (0: only the last).
      checkpoint_meta: JSON saved with every checkpoint (``run_sweep``: the
        dataset's digest, which the directory's key also names).

    Returns:
      :class:`TrainSweep` with ``metrics[name] [S, H, steps]``.
    """

    seeds, settings = check_members(seeds, settings, steps_per_call)
    num_s, num_h = len(seeds), len(settings)
    members = num_s * num_h
    full = complete_config(config, env, dataset)
    mesh = sweep_mesh(members, config.train.batch_size)
    draw = _member_draws(full, dataset, env, seeds)
    start = time.perf_counter()
    graphdef, state = init_member_states(full, env, seeds, num_h)
    member_spec = NamedSharding(mesh, P(parallel.SWEEP))
    state = jax.device_put(state, member_spec)
    hp = jax.device_put(member_hparams(full, settings, num_s), member_spec)
    batch_spec = NamedSharding(mesh, P(None, parallel.SWEEP, parallel.DATA))
    run = make_chunk_fn(graphdef, full, env)

    def chunk(state, lo, hi):
        batches = jax.tree.map(
            lambda x: jnp.repeat(x, num_h, 1), draw(jnp.arange(lo, hi))
        )
        return run(state, jax.device_put(batches, batch_spec), hp)

    state, host, first = run_member_chunks(
        state,
        chunk,
        config.train.steps,
        steps_per_call,
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every,
        progress=progress,
        unit="step",
        meta=checkpoint_meta,
    )
    seconds = time.perf_counter() - start
    metrics = member_metrics(host, num_s, num_h)
    return TrainSweep(
        full, seeds, settings, metrics, state, seconds, first, graphdef=graphdef
    )


METRICS_FILE = "metrics.npz"


def _save_metrics(directory: str | Path, chunks: list[dict]) -> None:
    """The metrics so far, ``{name: [steps, M]}``, into ``DIR/metrics.npz``."""
    host = jax.device_get(chunks)
    arrays = {k: np.concatenate([np.asarray(c[k]) for c in host], 0) for k in host[0]}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    write_bytes(Path(directory) / METRICS_FILE, buffer.getvalue())


def _resume_members(directory: str | Path, state: Any, total: int):
    """``(checkpointer, state, step, metric chunks)`` from ``directory``'s latest.

    The state comes from the latest orbax checkpoint, the metrics of its
    steps from ``metrics.npz`` (written before each checkpoint), as one chunk.
    A checkpoint past ``total`` steps is refused (``ValueError``).
    """
    if jax.process_index() == 0:
        remove_incomplete_checkpoints(directory)
    ckpt = Checkpointer(directory, every=1, keep=1)
    step = ckpt.latest_step()
    if step is None:
        return ckpt, state, 0, []
    if step > total:
        ckpt.close()
        raise ValueError(
            f"{directory}: the members' checkpoint is at step {step}, past the "
            f"{total} steps (train.steps) asked for: members resume for more "
            "steps, not fewer; rerun with --no-resume (resume=False) or sweep "
            "into a new --out"
        )
    metrics_file = Path(directory) / METRICS_FILE
    chunk = {}
    if metrics_file.is_file():
        with np.load(metrics_file) as saved:
            chunk = {k: saved[k][:step] for k in saved.files}
    if not chunk or any(len(v) < step for v in chunk.values()):
        # cannot happen (the metrics are written first): start afresh
        ckpt.close()
        shutil.rmtree(directory, ignore_errors=True)
        return Checkpointer(directory, every=1, keep=1), state, 0, []
    restored, _ = ckpt.restore({"state": state})
    return ckpt, restored["state"], step, [chunk]


def held_out_tasks(
    env: Any, dataset: Any, config: ExperimentConfig, which: str = "validation"
):
    """``params [task, ...]`` of the dataset split's held-out ``which`` tasks
    (``"validation"``, where a sweep's settings are chosen, or ``"test"``),
    the ones ``agentrl eval --split WHICH`` evaluates a run of ``config`` on
    (:func:`~agentrl.train.rundir.eval_tasks`)."""
    split = dataset.metadata.get("split")
    return eval_tasks(env, split, config.eval, which)[0]


def train_tasks(env: Any, dataset: Any, config: ExperimentConfig):
    """``params [task, ...]``: the distinct tasks of the training histories,
    cycled to ``eval.num_tasks`` (the first ``eval.num_tasks`` when there
    are more), each acted on with its own key."""
    params, ids = training_tasks(env, dataset.metadata)
    pick = jnp.arange(config.eval.num_tasks) % len(ids)
    return jax.tree.map(lambda x: x[pick], params)


def evaluate_members(
    sweep: TrainSweep,
    env: Any,
    params: Any,
    key: jax.Array,
    num_episodes: int,
) -> np.ndarray:
    """Each member's in-context returns on tasks ``params [task, ...]``.

    Members act by the algorithm's rule (``config.algo.make_agent``) in one
    jitted program (vmapped over their weights), with the same key, so they
    face the same environment randomness.

    Returns:
      ``[S, H, task, episode]`` per-episode returns.
    """
    weights = nnx.merge_state(sweep.state["params"], sweep.state["rest"])
    return member_returns(
        sweep,
        env,
        params,
        key,
        num_episodes,
        weights,
        lambda w: ModelHandle(sweep.graphdef, w),
    )


def member_returns(
    sweep: SweepResult,
    env: Any,
    params: Any,
    key: jax.Array,
    num_episodes: int,
    members: Any,
    model_of: Callable[[Any], Any],
) -> np.ndarray:
    """``[S, H, task, episode]`` returns of every member acting in context.

    ``members`` (leaves ``[M, ...]``) is vmapped over in one jitted program;
    ``model_of(member)`` is one member's model as the algorithm's
    ``config.algo.make_agent`` takes it. Every member runs on tasks
    ``params [task, ...]`` with the same key.
    """
    config = sweep.config
    num_steps = num_episodes * env_horizon(env)

    def one(member):
        agent = config.algo.make_agent(model_of(member), env, num_steps, config)
        history, _ = run_batched_agent(env, agent, params, key, num_steps)
        return history.episode_returns(num_episodes)

    returns = jax.jit(jax.vmap(one))(members)
    num_s, num_h = len(sweep.seeds), len(sweep.settings)
    return np.asarray(returns).reshape(num_s, num_h, *returns.shape[1:])
