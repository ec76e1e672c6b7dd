"""Sweeps of online learners: ``S`` seeds x ``H`` traced settings, one program.

An algorithm trained by RL (RL², transformer PPO, AMAGO)
has no dataset: its training run is its program
(:meth:`~agentrl.algos.Algorithm.make_online_train`), ``init(key, hparams)``
then ``train.steps`` calls of ``update(state, hparams)``. Here both are
vmapped over a leading *member* axis of size ``M = S * H`` (seed-major:
member ``m`` is seed ``seeds[m // H]`` with traced setting ``m % H``), and
the updates run in jitted ``lax.scan`` chunks of ``steps_per_call``, so
member ``m`` follows exactly the run :func:`agentrl.train.fit` makes with
that seed and setting (the same program; :func:`train_members`
is the whole run in one call, this is the same run in resumable chunks).
With several devices the members are spread over the mesh's ``sweep`` axis.

Checkpoints (the whole vmapped trainer state: weights, optimizer, every
environment and hidden state, the PRNG keys) and the metrics so far go to
``checkpoint_dir`` exactly as the distilled sweep's
(:func:`agentrl.sweep.train.train_sweep`), so a killed sweep resumes to the
same table. :func:`evaluate_online_members` acts every member in context
on the held-out tasks (:func:`held_out_online`: validation by default) in
one jitted program.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import agentrl.train.parallel as parallel
from agentrl.envs.registry import make as make_env
from agentrl.online.program import task_split_json
from agentrl.sweep.train import (
    SweepResult,
    check_members,
    member_hparams,
    member_metrics,
    member_returns,
    run_member_chunks,
    sweep_mesh,
)
from agentrl.train.config import ExperimentConfig, complete_config
from agentrl.train.rundir import eval_tasks


@dataclasses.dataclass
class OnlineSweep(SweepResult):
    """The outcome of :func:`online_sweep` (``metrics``: ``loss``,
    ``trial_return`` ...; ``NaN`` where an update saw no trial end).

    Attributes:
      program: the algorithm's :class:`~agentrl.online.program.OnlineProgram`.
    """

    program: Any = None

    def member_weights(self, member: int) -> Any:
        """The policy of member ``m`` (what ``load_run(...).model`` is for ``fit``)."""
        one = jax.tree.map(lambda x: x[member], self.state)
        return self.program.weights(one)


def member_keys(seeds: list[int], num_settings: int) -> jax.Array:
    """``[S * H]`` keys: member ``m``'s is ``jax.random.key(seeds[m // H])``,
    the key :func:`agentrl.train.fit` makes from that seed (seeds below
    2**32, as uint32). Made in one vmapped call: stacking separately made
    keys counts as using them under ``jax_debug_key_reuse``."""
    member_seeds = jnp.repeat(jnp.asarray(seeds, jnp.uint32), num_settings)
    return jax.vmap(jax.random.key)(member_seeds)


def _member_sharding(num_members: int) -> NamedSharding:
    """Members on the ``sweep`` axis of a mesh of ``gcd(M, devices)`` devices."""
    return NamedSharding(sweep_mesh(num_members), P(parallel.SWEEP))


@functools.lru_cache(maxsize=8)
def _compiled(config: ExperimentConfig):
    """``(init [M], run(state [M], hp [M], length) -> (state, metrics [K, M]))``.

    Cached on the (hashable, completed) config, so a resumed sweep in the
    same process does not trace again.
    """
    env = make_env(config.data.env, **dict(config.data.env_args))
    program = config.algo.make_online_train(config, env)
    update = jax.vmap(program.update)

    def run(state, hp, length):
        return jax.lax.scan(lambda s, _: update(s, hp), state, None, length)

    init = jax.jit(jax.vmap(program.init))
    return program, init, jax.jit(run, static_argnums=2, donate_argnums=0)


def online_sweep(
    config: ExperimentConfig,
    env: Any,
    seeds: list[int],
    settings: list[dict[str, float]] | None = None,
    *,
    steps_per_call: int = 10,
    progress: bool = False,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 0,
) -> OnlineSweep:
    """Train every (seed, traced setting) member of an online learner at once.

    Args:
      config: the experiment (an online learner); ``train.steps``
        updates are run.
      env: its environment.
      seeds: ``S`` distinct seeds (the trainer's key ``jax.random.key(seed)``,
        as :func:`~agentrl.train.fit` uses ``train.seed``).
      settings: ``H`` dicts of traced fields (``{"algo.ent_coef": 0.0}``,
        ``{"lr": 1e-3}``); default ``[{}]``.
      steps_per_call: updates per jitted ``lax.scan`` chunk.
      checkpoint_dir, checkpoint_every: as
        :func:`agentrl.sweep.train.train_sweep` (resumable chunks).

    Returns:
      :class:`OnlineSweep` with ``metrics[name] [S, H, steps]``.
    """

    if not config.algo.by_training(from_data=False, online=True):
        raise ValueError(
            f"online_sweep needs an online learner (RL², transformer PPO, AMAGO); "
            f"{config.algo.label} learns from data: use train_sweep"
        )
    seeds, settings = check_members(seeds, settings, steps_per_call)
    num_s, num_h = len(seeds), len(settings)
    full = complete_config(config, env)
    hp = member_hparams(full, settings, num_s)
    program, init, run = _compiled(full)
    start = time.perf_counter()
    keys = member_keys(seeds, num_h)
    # members over gcd(M, devices) devices (the mesh's sweep axis); the
    # jitted programs follow their inputs' placement
    member_spec = _member_sharding(num_s * num_h)
    keys, hp = jax.device_put((keys, hp), member_spec)
    state = jax.device_put(init(keys, hp), member_spec)
    state, host, first = run_member_chunks(
        state,
        lambda state, lo, hi: run(state, hp, hi - lo),
        full.train.steps,
        steps_per_call,
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every,
        progress=progress,
        unit="update",
    )
    seconds = time.perf_counter() - start
    metrics = {
        k: v.astype(np.float64) for k, v in member_metrics(host, num_s, num_h).items()
    }
    return OnlineSweep(
        full, seeds, settings, metrics, state, seconds, first, program=program
    )


def held_out_online(env: Any, config: ExperimentConfig, which: str = "validation"):
    """``params [task, ...]``: the held-out ``which`` tasks (``"validation"``
    or ``"test"``) ``agentrl eval --split WHICH`` gives a run of ``config``
    (the split ``fit`` records for it; fresh draws if continuous)."""
    split = task_split_json(env, config.data)
    return eval_tasks(env, split, config.eval, which)[0]


def evaluate_online_members(
    sweep: OnlineSweep, env: Any, params: Any, key: jax.Array, num_episodes: int
) -> np.ndarray:
    """Each member acting in context on tasks ``params [task, ...]``.

    The algorithm's own agent (``config.algo.make_agent`` on the member's
    policy, as ``agentrl eval`` acts a run), all members in one jitted
    program vmapped over the trainer states, with the same key.

    Returns:
      ``[S, H, task, episode]`` per-episode returns.
    """
    return member_returns(
        sweep, env, params, key, num_episodes, sweep.state, sweep.program.weights
    )


def train_members(
    config: Any,
    env: Any,
    seeds: list[int],
    settings: list[dict[str, float]] | None = None,
):
    """Train ``S`` seeds x ``H`` traced settings of an online learner in ONE jit.

    Member ``m`` is seed ``seeds[m // H]`` with ``settings[m % H]`` (dicts of
    traced fields by path, e.g. ``{"train.lr": 3e-4, "algo.ent_coef": 0.0}``)
    and follows exactly the run :func:`agentrl.train.fit` makes with that
    seed and setting (the same program, vmapped).

    Returns:
      ``(state, metrics)``: the final trainer state with leaves ``[S * H,
      ...]`` (``program.weights`` of a member's slice is its policy) and
      metrics ``{name: [S, H, train.steps]}``.
    """
    full = complete_config(config, env)
    program = full.algo.make_online_train(full, env)
    settings = list(settings or [{}])
    num_s, num_h = len(seeds), len(settings)
    hparams = member_hparams(full, settings, num_s)
    keys = member_keys(seeds, num_h)
    state, metrics = jax.jit(jax.vmap(program))(keys, hparams)
    metrics = {k: v.reshape(num_s, num_h, *v.shape[1:]) for k, v in metrics.items()}
    return state, metrics
