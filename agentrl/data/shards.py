"""A dataset's TFDS ArrayRecord files: one shard per split, and TFDS's metadata.

>>> spec, first, param_names, lengths = write_shards(tmp, out, splits, meta, None)
>>> write_tfds_metadata(tmp, spec, lengths, "q_learning on darkroom")

:func:`write_shards` streams the per-task records of each split's history
chunks (one record per task, in task order: record ``i`` of a split is its
``i``-th task) into one ArrayRecord shard per split with ``array_record``'s
own writer (:func:`shard_name`, TFDS's file name template). At most three
chunks of histories are in memory at a time: one being generated, one
waiting and one being encoded and written by a writer thread (records go
to the shard as they are encoded), so the host's encoding and the file
writes overlap the generation of the next chunk on the device. The TFDS
metadata (``dataset_info.json``, ``features.json``) is written through
TFDS's public API for externally written data
(``tfds.folder_dataset.write_metadata``), so ``tfds.data_source``,
``tfds.builder_from_directory`` and grain read the dataset with no
TensorFlow installed. The bytes depend only on the histories (records are
serialized deterministically:
:func:`agentrl.data.features.record_serializer`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import jax

import agentrl.data.features as features
from agentrl.history import History

BUILDER_NAME = "agentrl_history"


def shard_name(split: str) -> str:
    """The file name of ``split``'s (single) ArrayRecord shard, TFDS's template."""
    return f"{BUILDER_NAME}-{split}.array_record-00000-of-00001"


def write_shards(
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


def write_tfds_metadata(
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
