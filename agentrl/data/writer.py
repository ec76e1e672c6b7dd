"""Write learning histories as a TFDS ArrayRecord dataset, chunk by chunk.

>>> from agentrl.sources import source_histories
>>> write_dataset(out, env, source_histories("q_learning", env), 1000, 100)

:func:`write_dataset` plans the tasks (:func:`~agentrl.data.task_plan.plan_tasks`),
asks a ``histories`` callable for the histories of ``chunk_size`` tasks at a
time (one jitted call per chunk) and hands them to :func:`write_histories`,
which streams them into one ArrayRecord shard per split and writes the TFDS
metadata (:mod:`agentrl.data.shards`: a writer thread encodes and writes one
chunk while the next is generated; at most three chunks are in memory). It
writes whatever histories it is given: the callable is usually a source
algorithm (:func:`agentrl.sources.source_histories`), but this module knows
only the :class:`~agentrl.history.History` schema, not the sources;
:func:`write_histories` writes histories that already exist (an
importer's, e.g. :mod:`agentrl.data.xland100b`).

The bytes depend only on the histories: the same arguments and seed give
byte-identical shards and TFDS metadata, in one process or two, and an
``agentrl.json`` that differs only in its ``created`` time.

The dataset is built in a temporary sibling directory and renamed onto
``out`` only when complete, with ``agentrl.json`` (metadata: env and
overrides, source and settings, seed, task ids and split, agentrl version,
and a size and SHA-256 per file) written last, so an interrupted run leaves
nothing that opens as a dataset (:mod:`agentrl.data.files`: killed writers
are undone by the next write of ``out``). A full disk or an unwritable
directory raises :class:`agentrl.safeio.StorageError` naming ``out`` and
leaves any previous dataset unchanged; nothing is left in the system
temporary directory. The splits and the task of each record:
:mod:`agentrl.data.task_plan`.
"""

from __future__ import annotations

import datetime
import json
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import agentrl.envs.registry as registry
from agentrl.checks import is_int
from agentrl.data.files import (
    FORMAT_VERSION,
    METADATA_FILE,
    file_checksums,
    move_into_place,
    prepare_out,
)
from agentrl.data.shards import write_shards, write_tfds_metadata
from agentrl.data.task_plan import TaskPlan, plan_tasks, task_params
from agentrl.envs.base import is_bandit
from agentrl.history import History, check_history
from agentrl.safeio import storage_error, temp_sibling
from agentrl.version import __version__

#: ``histories(params [task, ...], key, num_episodes, task_id [task]) ->
#: History [task, num_episodes * env.horizon, ...]``: one chunk of tasks.
HistoriesFn = Callable[[Any, jax.Array, int, jax.Array], History]


def env_identity(
    env: Any, name: str | None, overrides: dict[str, Any] | None
) -> tuple[str, dict[str, Any]]:
    """``(registry name, constructor overrides)`` that rebuild ``env``.

    Inferred when not given: the registered family whose class is
    ``type(env)``, and the constructor arguments whose attribute on ``env``
    differs from the default.
    """
    if name is None:
        table = dict(registry.ENVS.items())
        matches = [n for n, f in table.items() if f is type(env)]
        if not matches:
            raise ValueError(
                f"cannot tell the registered name of {env!r}; pass `env_name`"
            )
        name = matches[0]
    if overrides is None:
        overrides = {
            k: getattr(env, k)
            for k, default in registry.overrides_of(name).items()
            if hasattr(env, k) and getattr(env, k) != default
        }
    return name, dict(overrides)


def _source_metadata(histories: Any, source: dict[str, Any] | None) -> dict:
    """``{"name", "settings"}`` to record, checked to be plain JSON values."""
    if source is None:
        source = getattr(histories, "source", None)
    if source is None:
        name = getattr(histories, "__name__", type(histories).__name__)
        source = {"name": name, "settings": {}}
    if not isinstance(source, dict) or set(source) != {"name", "settings"}:
        raise ValueError(
            f"`source` must be a dict with keys 'name' and 'settings', got {source!r}"
        )
    if not isinstance(source["name"], str) or not isinstance(source["settings"], dict):
        raise ValueError(
            f"`source` must have a str 'name' and a dict 'settings', got {source!r}"
        )
    try:
        json.dumps(source)
    except (TypeError, ValueError) as err:
        raise ValueError(f"`source` must hold plain JSON values: {err}") from err
    return {"name": source["name"], "settings": dict(source["settings"])}


def write_dataset(
    out: str | Path,
    env: Any,
    histories: HistoriesFn,
    num_tasks: int,
    num_episodes: int,
    seed: int = 0,
    *,
    source: dict[str, Any] | None = None,
    env_name: str | None = None,
    env_overrides: dict[str, Any] | None = None,
    split_fraction: float = 0.8,
    chunk_size: int = 1000,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
    num_train_tasks: int | None = None,
) -> Path:
    """Write ``num_tasks`` histories of ``num_episodes`` episodes into ``out``.

    Args:
      out: the dataset directory (built in a temporary sibling, then renamed).
      env: the environment the histories are of (plans the tasks).
      histories: ``histories(params [task, ...], key, num_episodes, task_id
        [task]) -> History [task, num_episodes * env.horizon, ...]``, called
        once per chunk of ``chunk_size`` tasks, e.g.
        :func:`agentrl.sources.source_histories`.
      num_tasks, num_episodes, seed: sizes and the seed of tasks and histories.
      source: ``{"name": str, "settings": dict}`` recorded in the metadata
        (plain JSON values); defaults to ``histories.source`` where the
        callable has one, else its ``__name__`` with no settings.
      env_name, env_overrides: how to rebuild ``env`` (inferred if omitted).
      split_fraction: the train share of the task split.
      chunk_size: tasks per call of ``histories``.
      overwrite: replace an existing ``out``.
      progress: called with ``n`` after each chunk of ``n`` tasks.
      num_train_tasks: the training histories cycle over this many distinct
        tasks (:func:`plan_tasks`); ``None``: all the split's.

    Returns ``out``. Raises ``ValueError`` before any compile on a bad size,
    ``source`` or an existing ``out`` without ``overwrite``; after the first
    chunk if its histories do not have ``num_episodes * env.horizon`` steps.
    Each chunk is checked with :func:`~agentrl.history.check_history`
    (``AssertionError`` naming the field whose shape disagrees).
    """
    source = _source_metadata(histories, source)
    _check_dataset_sizes(num_tasks, num_episodes, chunk_size)
    env_name, env_overrides = env_identity(env, env_name, env_overrides)
    out = Path(out)
    prepare_out(out, overwrite)
    plan = plan_tasks(
        env, num_tasks, split_fraction, seed, num_train_tasks=num_train_tasks
    )
    key_tasks, key_run = jax.random.split(jax.random.key(seed))
    chunk_size = min(chunk_size, num_tasks)

    def chunks(split: str) -> Iterator[Any]:
        return _split_chunks(
            env, histories, plan, split, key_tasks, key_run, chunk_size, num_episodes
        )

    metadata = _dataset_metadata(
        env,
        plan,
        source,
        env_name,
        env_overrides,
        seed=seed,
        num_tasks=num_tasks,
        num_episodes=num_episodes,
        chunk_size=chunk_size,
        num_train_tasks=num_train_tasks,
    )
    return write_histories(
        out,
        {split: (h for _, h in chunks(split)) for split in plan.task_ids},
        metadata,
        overwrite=overwrite,
        progress=progress,
        description=f"{source['name']} on {env_name}",
    )


def _dataset_metadata(
    env: Any,
    plan: TaskPlan,
    source: dict[str, Any],
    env_name: str,
    env_overrides: dict[str, Any],
    *,
    seed: int,
    num_tasks: int,
    num_episodes: int,
    chunk_size: int,
    num_train_tasks: int | None = None,
) -> dict[str, Any]:
    """The dataset-specific keys of ``agentrl.json`` for :func:`write_dataset`."""
    restricted = {} if num_train_tasks is None else {"num_train_tasks": num_train_tasks}
    return {
        "env": {"name": env_name, "overrides": env_overrides},
        "source": source,
        "seed": seed,
        "num_tasks": num_tasks,
        "num_episodes": num_episodes,
        "horizon": env.horizon,
        "num_steps": num_episodes * env.horizon,
        "chunk_size": chunk_size,
        # a bandit's observation is a constant: contexts need no states
        "stateless_obs": is_bandit(env),
        "task_space": "finite" if plan.finite else "continuous",
        "task_ids": {k: [int(i) for i in v] for k, v in plan.task_ids.items()},
        "split": plan.split.to_json(),
        # the distinct tasks of the training histories, when restricted
        **restricted,
    }


def _check_dataset_sizes(num_tasks: Any, num_episodes: Any, chunk_size: Any) -> None:
    """``num_tasks``, ``num_episodes`` and ``chunk_size`` integers >= 1."""
    for field, value in [("tasks", num_tasks), ("episodes", num_episodes)]:
        if not is_int(value, 1):
            raise ValueError(f"`{field}` must be an integer >= 1, got {value!r}")
    if not is_int(chunk_size, 1):
        raise ValueError(f"`chunk_size` must be an integer >= 1, got {chunk_size!r}")


def _split_chunks(
    env: Any,
    histories: HistoriesFn,
    plan: TaskPlan,
    split: str,
    key_tasks: jax.Array,
    key_run: jax.Array,
    chunk_size: int,
    num_episodes: int,
) -> Iterator[Any]:
    """``(start, host History)`` of ``split``'s tasks, ``chunk_size`` at a time."""
    ids = plan.task_ids[split]
    key_split = jax.random.fold_in(key_run, 0 if split == "train" else 1)
    for c, start in enumerate(range(0, len(ids), chunk_size)):
        chunk = ids[start : start + chunk_size]
        padded = np.resize(chunk, chunk_size)  # same shape: no recompile
        params = task_params(env, plan, padded, key_tasks)
        key = jax.random.fold_in(key_split, c)
        history = histories(params, key, num_episodes, jnp.asarray(padded))
        check_history(history)
        if history.num_steps != num_episodes * env.horizon:
            raise ValueError(
                f"`histories` gave {history.num_steps} steps per task; a "
                f"dataset of {num_episodes} episodes of horizon {env.horizon} "
                f"needs {num_episodes * env.horizon}"
            )
        n = len(chunk)
        yield start, jax.tree.map(lambda x: x[:n], jax.device_get(history))


def write_histories(
    out: str | Path,
    splits: dict[str, Iterable[History]],
    metadata: dict[str, Any],
    *,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
    description: str = "agentrl learning histories",
) -> Path:
    """Write host histories, chunk by chunk, as the dataset ``out``.

    Args:
      out: the dataset directory (built in a temporary sibling, then renamed).
      splits: ``{split: chunks}``; each chunk a numpy
        :class:`~agentrl.history.History` ``[task, step, ...]`` whose tasks
        are the split's next records. Chunks are consumed lazily: the next
        is asked for while a writer thread writes the last (at most three in
        memory).
      metadata: the dataset-specific keys of ``agentrl.json`` (``env``,
        ``source``, ``seed``, ``num_tasks``, ``num_episodes``, ``horizon``,
        ``num_steps``, ``stateless_obs``, ``task_space``, ``task_ids``,
        ``split``; see :func:`write_dataset`). The format version, agentrl
        version, creation time, the record layout and every file's size and
        SHA-256 are added here.
      overwrite: replace an existing ``out``.
      progress: called with ``n`` after each chunk of ``n`` tasks.
      description: the TFDS description.

    Each split must yield as many records as ``metadata["task_ids"]`` lists
    for it (``ValueError`` otherwise; nothing is left behind).
    """
    out = Path(out)
    prepare_out(out, overwrite)
    tmp = temp_sibling(out)
    existed = out.exists()
    try:
        tmp.mkdir(parents=True)
        spec, first, param_names, lengths = write_shards(
            tmp, out, splits, metadata, progress
        )
        write_tfds_metadata(tmp, spec, lengths, description)
        full = {
            "format_version": FORMAT_VERSION,
            "agentrl_version": __version__,
            "created": datetime.datetime.now(datetime.UTC).isoformat(
                timespec="seconds"
            ),
            **metadata,
            "has_optimal_action": "optimal_action" in first,
            "has_next_obs": "next_obs" in first,
            "param_names": param_names,
            "files": file_checksums(tmp),
        }
        (tmp / METADATA_FILE).write_text(json.dumps(full, indent=1))
        move_into_place(tmp, out)
    except Exception as err:
        after = "the existing dataset is unchanged" if existed else ""
        storage = storage_error(err, f"write the dataset {out}", after)
        if storage is None:
            raise
        raise storage from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
