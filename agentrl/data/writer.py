"""Write learning histories as a TFDS ArrayRecord dataset, chunk by chunk.

>>> from agentrl.sources import source_histories
>>> write_dataset(out, env, source_histories("q_learning", env), 1000, 100)

:func:`write_dataset` plans the tasks (:func:`plan_tasks`), asks a
``histories`` callable for the histories of ``chunk_size`` tasks at a time
(one jitted call per chunk) and streams the per-task records (one record
per task, in task order: record ``i`` of a split is its ``i``-th task) into
one ArrayRecord shard per split with ``array_record``'s own writer. The TFDS
metadata (``dataset_info.json``, ``features.json``) is written through
TFDS's public API for externally written data
(``tfds.folder_dataset.write_metadata``), so ``tfds.data_source``,
``tfds.builder_from_directory`` and grain read the dataset with no
TensorFlow installed. It writes whatever histories it is given: the
callable is usually a source algorithm
(:func:`agentrl.sources.source_histories`), but this module knows only the
:class:`~agentrl.history.History` schema, not the sources;
:func:`write_histories` writes histories that already exist (an importer's,
e.g. :mod:`agentrl.data.xland100b`).

At most three chunks of histories are in memory at a time: one being
generated, one waiting and one being encoded and written by a writer thread
(records go to the shard as they are encoded), so the host's encoding and
the file writes overlap the generation of the next chunk on the device.
The bytes depend only on the histories: the same arguments and seed give
byte-identical shards and TFDS metadata, in one process or two (records are
serialized deterministically: :func:`agentrl.data.features.record_serializer`),
and an ``agentrl.json`` that differs only in its ``created`` time.

The dataset is built in a temporary sibling directory and renamed onto
``out`` only when complete, with ``agentrl.json`` (metadata: env and
overrides, source and settings, seed, task ids and split, agentrl version,
and a size and SHA-256 per file) written last, so an interrupted run leaves
nothing that opens as a dataset. The temporary sibling is named after its
process (:func:`agentrl.safeio.temp_sibling`); the next write of ``out``
removes those of killed writers, and puts back a dataset that a writer
killed mid-replacement had moved aside. A full disk or an unwritable
directory raises :class:`agentrl.safeio.StorageError` naming ``out`` and
leaves any previous dataset unchanged; nothing is left in the system
temporary directory.

Splits: for a finite task space (Dark Room goals) the env's task ids are
split ``split_fraction`` / rest with ``seed``, the rest halved into
validation and test ids (recorded), and histories cycle over the *train*
ids (one ``train`` split). For a continuous task space (bandits) the
tasks are ``sample_params(fold_in(task_key, i))`` for ``i < num_tasks``, and
the indices are split into ``train`` and ``test`` splits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import json
import queue
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import agentrl.data.features as features
import agentrl.envs.registry as registry
from agentrl.envs.base import is_bandit
from agentrl.envs.tasks import DEFAULT_VALIDATION_SHARE, TaskSplit, split_task_ids
from agentrl.history import History, check_history
from agentrl.safeio import (
    remove,
    remove_stale_siblings,
    stale_siblings,
    storage_error,
    temp_sibling,
)
from agentrl.version import __version__

#: ``histories(params [task, ...], key, num_episodes, task_id [task]) ->
#: History [task, num_episodes * env.horizon, ...]``: one chunk of tasks.
HistoriesFn = Callable[[Any, jax.Array, int, jax.Array], History]

METADATA_FILE = "agentrl.json"
FORMAT_VERSION = 1
BUILDER_NAME = "agentrl_history"


@dataclasses.dataclass(frozen=True)
class TaskPlan:
    """Which task each record holds: ``task_ids[split] [record]`` and the split."""

    task_ids: dict[str, np.ndarray]
    split: TaskSplit
    finite: bool


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


def plan_tasks(
    env: Any,
    num_tasks: int,
    split_fraction: float,
    seed: int,
    validation_share: float = DEFAULT_VALIDATION_SHARE,
    num_train_tasks: int | None = None,
) -> TaskPlan:
    """Task ids per split for ``num_tasks`` histories (see the module docstring).

    A finite task space is split train / validation / test
    (``validation_share`` of the held-out ids validate; the training ids do
    not depend on it). A continuous one splits record indices train / test;
    its validation and test tasks are fresh draws at evaluation
    (:func:`agentrl.train.rundir.held_out_params`).

    ``num_train_tasks``: the training histories cycle over only this many
    distinct tasks (the first of the shuffled training ids; on a continuous
    family the first training record indices, each index one drawn task),
    the memorisation-to-generalisation axis of the GPICL study; ``None``:
    all of them. The held-out ids are those of the unrestricted split.
    """
    if getattr(env, "num_tasks", None):
        split = env.task_split(split_fraction, seed, validation_share)
        order = np.random.default_rng(seed).permutation(split.train)
        order = order[: _distinct(num_train_tasks, len(order), "training task ids")]
        ids = order[np.arange(num_tasks) % len(order)].astype(np.int32)
        return TaskPlan({"train": ids}, split, True)
    split = split_task_ids(num_tasks, split_fraction, seed)
    train = split.train
    train = train[: _distinct(num_train_tasks, len(train), "training histories")]
    ids = train[np.arange(len(split.train)) % len(train)].astype(np.int32)
    return TaskPlan({"train": ids, "test": split.test}, split, False)


def _distinct(num_train_tasks: int | None, available: int, what: str) -> int:
    """How many distinct training tasks: ``num_train_tasks`` or all ``available``."""
    if num_train_tasks is None:
        return available
    if (
        isinstance(num_train_tasks, bool)
        or not isinstance(num_train_tasks, int)
        or not 1 <= num_train_tasks <= available
    ):
        raise ValueError(
            f"num_train_tasks (data.num_train_tasks) must be an integer in [1, "
            f"{available}] (the split has {available} {what}) or None, got "
            f"{num_train_tasks!r}"
        )
    return num_train_tasks


def training_tasks(env: Any, metadata: dict[str, Any]) -> tuple[Any, np.ndarray]:
    """``(params [task, ...], ids [task])``: a dataset's distinct training tasks.

    In the order the training records first use them, from the dataset's
    ``agentrl.json`` (``task_ids``, ``task_space``, ``seed``): the tasks its
    histories were generated on, rebuilt as :func:`write_dataset` made them.
    """
    records = np.asarray(metadata["task_ids"]["train"], np.int32)
    _, first = np.unique(records, return_index=True)
    ids = records[np.sort(first)]
    finite = metadata.get("task_space") == "finite"
    plan = TaskPlan({"train": ids}, TaskSplit.from_json(metadata["split"]), finite)
    key_tasks, _ = jax.random.split(jax.random.key(int(metadata["seed"])))
    return task_params(env, plan, ids, key_tasks), ids


def task_params(env: Any, plan: TaskPlan, ids: np.ndarray, task_key: jax.Array):
    """Params ``[task, ...]`` of task ``ids``."""
    ids = jnp.asarray(ids, jnp.int32)
    if plan.finite:
        return jax.vmap(env.params_for_task)(ids)
    keys = jax.vmap(lambda i: jax.random.fold_in(task_key, i))(ids)
    return jax.vmap(env.sample_params)(keys)


def file_checksums(directory: Path) -> dict[str, dict[str, Any]]:
    """``{relative name: {"bytes", "sha256"}}`` of every file under ``directory``."""
    out = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        name = path.relative_to(directory).as_posix()
        if name == METADATA_FILE:
            continue
        out[name] = {"bytes": path.stat().st_size, "sha256": sha256(path)}
    return out


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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
    _prepare_out(out, overwrite)
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
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{field}` must be an integer >= 1, got {value!r}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise ValueError(f"`chunk_size` must be an integer >= 1, got {chunk_size!r}")
    if chunk_size < 1:
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


def _prepare_out(out: Path, overwrite: bool) -> None:
    """Undo killed writers of ``out``; refuse an existing one without overwrite."""
    restored = _recover(out)
    if out.exists() and not overwrite:
        how = " (put back: a killed overwrite had moved it aside)" if restored else ""
        raise ValueError(f"`out` {out} already exists{how} (pass overwrite=True)")
    _check_writable(out)


def shard_name(split: str) -> str:
    """The file name of ``split``'s (single) ArrayRecord shard, TFDS's template."""
    return f"{BUILDER_NAME}-{split}.array_record-00000-of-00001"


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
    _prepare_out(out, overwrite)
    tmp = temp_sibling(out)
    existed = out.exists()
    try:
        tmp.mkdir(parents=True)
        spec, first, param_names, lengths = _write_shards(
            tmp, out, splits, metadata, progress
        )
        _write_tfds_metadata(tmp, spec, lengths, description)
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
        _move_into_place(tmp, out)
    except Exception as err:
        after = "the existing dataset is unchanged" if existed else ""
        storage = storage_error(err, f"write the dataset {out}", after)
        if storage is None:
            raise
        raise storage from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _write_shards(
    tmp: Path,
    out: Path,
    splits: dict[str, Iterable[History]],
    metadata: dict[str, Any],
    progress: Callable[[int], None] | None,
) -> tuple[Any, dict[str, Any], list[str], dict[str, int]]:
    """One ArrayRecord shard per split in ``tmp``, each checked for its length.

    A :class:`_ShardWriter` thread encodes and writes each chunk while this
    thread asks ``chunks`` for the next one (the source's jitted call runs
    on the device meanwhile). Returns ``(spec, first record, param names,
    {split: records})``; the first record fixes the feature spec.
    """
    layout = _RecordLayout()
    lengths: dict[str, int] = {}
    for split, chunks in splits.items():
        with _ShardWriter(tmp / shard_name(split), layout, progress) as writer:
            for history in chunks:
                writer.put(history)
        want = len(metadata["task_ids"][split])
        if writer.count != want:
            raise ValueError(
                f"split {split!r} of {out} got {writer.count} histories, its task "
                f"ids list {want}"
            )
        lengths[split] = writer.count
    if layout.spec is None:
        raise ValueError(f"no histories to write into {out}")
    return layout.spec, layout.first, layout.param_names, lengths


class _RecordLayout:
    """The feature spec, first record and param names the first record fixes."""

    def __init__(self):
        self.spec: Any = None
        self.serialize: Callable[[dict[str, Any]], bytes] | None = None
        self.first: dict[str, Any] = {}
        self.param_names: list[str] = []

    def fix(self, record: dict[str, Any], history: History) -> None:
        self.spec, self.first = features.feature_spec(record), record
        self.serialize = features.record_serializer(self.spec)
        params = jax.tree.map(lambda x: x[0], history.params)
        self.param_names = features.param_names(params)


class _ShardWriter:
    """Writes host history chunks into one ArrayRecord shard from a thread.

    ``put(history)`` hands a chunk over (blocking while one is still
    queued: at most one chunk waits, one is being written); leaving the
    ``with`` block waits for the last one and closes the shard, and raises
    what the thread raised. The records go out in the order the chunks
    came, so the bytes are those of a sequential write.
    """

    _DONE = object()

    def __init__(self, path: Path, layout: _RecordLayout, progress):
        from array_record.python.array_record_module import ArrayRecordWriter

        self.layout, self.progress, self.count = layout, progress, 0
        self.error: BaseException | None = None
        self._queue: queue.Queue = queue.Queue(maxsize=1)
        self._writer = ArrayRecordWriter(str(path), "group_size:1")
        self._thread = threading.Thread(
            target=self._run, name=f"agentrl-shard-{path.name}", daemon=True
        )
        self._thread.start()

    def put(self, history: History) -> None:
        if not self._hand_over(history):
            raise self.error or RuntimeError("the shard writer thread stopped")

    def _hand_over(self, item: Any) -> bool:
        """Queue ``item`` unless the thread has stopped (an error): whether queued."""
        while self.error is None and self._thread.is_alive():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            while (history := self._queue.get()) is not self._DONE:
                self._write(history)
        except BaseException as err:  # re-raised in the caller's thread
            self.error = err
        finally:
            self._writer.close()

    def _write(self, history: History) -> None:
        for record in features.history_records(history):
            if self.layout.spec is None:  # the first record fixes the spec
                self.layout.fix(record, history)
            self._writer.write(self.layout.serialize(record))
            self.count += 1
        if self.progress is not None:
            self.progress(history.num_tasks)

    def __enter__(self) -> _ShardWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self._hand_over(self._DONE)  # a thread that stopped on an error needs none
        self._thread.join()
        if self.error is not None and exc_info[0] is None:
            raise self.error


def _write_tfds_metadata(
    directory: Path, spec: Any, lengths: dict[str, int], description: str
) -> None:
    """``dataset_info.json`` + ``features.json`` through TFDS's public API.

    ``tfds.folder_dataset.write_metadata`` describes files written outside a
    TFDS builder; the split infos are given (no file is re-read) and no data
    check runs (it would need TensorFlow). Nothing in them depends on the
    time or the machine: same shards, same bytes.
    """
    import tensorflow_datasets as tfds

    template = tfds.core.ShardedFileTemplate(
        data_dir=directory,
        template="{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}",
        dataset_name=BUILDER_NAME,
        filetype_suffix="array_record",
    )
    infos = [
        tfds.core.SplitInfo(
            name=split,
            shard_lengths=[n],
            num_bytes=(directory / shard_name(split)).stat().st_size,
            filename_template=template.replace(split=split),
        )
        for split, n in lengths.items()
    ]
    tfds.folder_dataset.write_metadata(
        data_dir=directory,
        features=spec,
        split_infos=infos,
        filename_template=template,
        check_data=False,
        description=description,
        homepage="https://github.com/agentrl/agentrl",
        disable_shuffling=True,
    )


def _recover(out: Path) -> bool:
    """Clean up after writers of ``out`` that were killed; True if one is undone.

    A killed writer leaves its temporary build beside ``out`` (removed). One
    killed between moving the dataset it replaced aside and renaming the new
    one into place (before its commit) leaves the old dataset aside: it is
    put back, as if the overwrite had not started.
    """
    restored = False
    for old in stale_siblings(out, ("old",)):
        if out.exists():
            remove(old)
        else:
            with contextlib.suppress(OSError):  # unwritable: _check_writable says
                old.rename(out)
                restored = True
    remove_stale_siblings(out, ("tmp",))
    return restored


def _check_writable(out: Path) -> None:
    """A clear error, before anything is computed, if ``out`` cannot be written."""
    probe = temp_sibling(out)
    try:
        probe.mkdir(parents=True)
        probe.rmdir()
    except OSError as err:
        after = "the existing dataset is unchanged" if out.exists() else ""
        storage = storage_error(err, f"write the dataset {out}", after)
        raise (storage or err) from None


def _move_into_place(built: Path, out: Path) -> None:
    """Rename the complete ``built`` onto ``out``, replacing a previous dataset."""
    if not out.exists():
        try:
            built.rename(out)
        except OSError as err:
            if out.exists():
                raise ValueError(
                    f"`out` {out} was created by another process while this one "
                    "wrote it; nothing was replaced"
                ) from err
            raise
        return
    old = temp_sibling(out, "old")
    out.rename(old)
    try:
        built.rename(out)
    except BaseException:
        old.rename(out)
        raise
    shutil.rmtree(old, ignore_errors=True)
