"""A dataset's TFDS ArrayRecord files: the shards of each split, and TFDS's metadata.

>>> spec, first, param_names, lengths = write_shards(tmp, out, splits, meta, None)
>>> write_tfds_metadata(tmp, spec, lengths, "q_learning on darkroom")

:func:`write_shards` streams the per-task records of each split's history
chunks (one record per task, in task order: record ``i`` of a split is its
``i``-th task) into the split's ArrayRecord shards with ``array_record``'s
own writer (:func:`shard_name`, TFDS's file name template). A writer thread
encodes each chunk (all its records at once:
:func:`agentrl.data.features.records_serializer`) while the next chunk is
generated on the device.

A split whose records fit in :data:`SHARD_BYTES` is one shard, written by
that thread. A larger split is cut into shards of a fixed number of records
(``SHARD_BYTES`` over the first record's size, the last shard the rest: the
layout depends only on the histories, never on the machine). With two or
more :func:`shard_workers` its shards are compressed and written by that
many processes, several at once, while the thread encodes the next chunks
(ArrayRecord's writer holds the GIL while it compresses, so threads would
take turns); with one, the thread writes them one after another. Either
way the files are the same bytes. At most three chunks of histories are
in memory at a time (one being generated, one waiting, one being encoded),
plus, with processes, the encoded records of up to ``shard_workers() + 1``
shards on their way to disk.

The TFDS metadata (``dataset_info.json``, ``features.json``) is written
through TFDS's public API for externally written data
(``tfds.folder_dataset.write_metadata``), so ``tfds.data_source``,
``tfds.builder_from_directory`` and grain read the dataset with no
TensorFlow installed. The bytes depend only on the histories (records are
serialized deterministically:
:func:`agentrl.data.features.record_serializer`).
"""

from __future__ import annotations

import os
import queue
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import jax

import agentrl.data.features as features
from agentrl.history import History

BUILDER_NAME = "agentrl_history"


#: uncompressed bytes of records per shard (a split with more is cut into
#: shards written in parallel)
SHARD_BYTES = 64 * 2**20


def shard_name(split: str, index: int = 0, count: int = 1) -> str:
    """The file name of shard ``index`` of ``count`` of ``split``, TFDS's template."""
    return f"{BUILDER_NAME}-{split}.array_record-{index:05d}-of-{count:05d}"


def shard_workers() -> int:
    """Processes that write shards: the cores this process may use, less one
    (it generates and encodes the chunks), at least one, at most 32."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores - 1, 32))


def write_shards(
    tmp: Path,
    out: Path,
    splits: dict[str, Iterable[History]],
    metadata: dict[str, Any],
    progress: Callable[[int], None] | None,
) -> tuple[Any, dict[str, Any], list[str], dict[str, list[int]]]:
    """The ArrayRecord shards of each split in ``tmp``, each split checked for
    its length.

    A :class:`_ShardWriter` thread encodes and writes each chunk while this
    thread asks ``chunks`` for the next one (the source's jitted call runs
    on the device meanwhile). Returns ``(spec, first record, param names,
    {split: records per shard})``; the first record fixes the feature spec.
    Whatever stops the write (an error, Ctrl-C) first stops the shard
    processes, so nothing writes into ``tmp`` once this returns or raises.
    """
    layout = _RecordLayout()
    lengths: dict[str, list[int]] = {}
    pool = _Pool()
    try:
        for split, chunks in splits.items():
            want = len(metadata["task_ids"][split])
            with _ShardWriter(tmp, split, want, layout, progress, pool) as writer:
                for history in chunks:
                    writer.put(history)
            if writer.count != want:
                raise ValueError(
                    f"split {split!r} of {out} got {writer.count} histories, its "
                    f"task ids list {want}"
                )
            lengths[split] = writer.shard_lengths
    finally:
        pool.close()
    if layout.spec is None:
        raise ValueError(f"no histories to write into {out}")
    return layout.spec, layout.first, layout.param_names, lengths


#: one record per chunk: random access reads one record
_OPTIONS = "group_size:1"

#: a shard process: reads jobs (path length and record count as u64, the
#: path, each record's length as u64, the records) from stdin, writes each
#: as an ArrayRecord file and answers b"ok", or b"er" and the error. It
#: imports neither agentrl nor JAX, and leaves Ctrl-C to its parent.
_WORKER = f"""
import signal, struct, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
from array_record.python.array_record_module import ArrayRecordWriter
src, dst = sys.stdin.buffer, sys.stdout.buffer
def read(n):
    data = src.read(n)
    if len(data) != n:
        sys.exit(0)
    return data
while True:
    size, count = struct.unpack("<QQ", read(16))
    path = read(size).decode()
    lengths = struct.unpack(f"<{{count}}Q", read(8 * count))
    data = memoryview(read(sum(lengths)))
    try:
        writer = ArrayRecordWriter(path, {_OPTIONS!r})
        at = 0
        for n in lengths:
            writer.write(bytes(data[at : at + n]))
            at += n
        writer.close()
        reply = b"ok"
    except Exception as err:
        reply = b"er" + f"{{type(err).__name__}}: {{err}}".encode()[:4000]
    dst.write(struct.pack("<Q", len(reply)) + reply)
    dst.flush()
"""


class _Pool:
    """The shard processes (:data:`_WORKER`), started at the first shard that
    needs them. Shard ``i`` goes to process ``i % workers``, which must have
    answered for its last shard first: at most ``workers`` in flight."""

    def __init__(self):
        self.workers = shard_workers()
        self._procs: list[subprocess.Popen] = []
        self._busy: list[bool] = []
        self._jobs = 0

    def submit(self, path: Path, records: list[bytes]) -> None:
        """Write ``records`` as the file ``path`` in the next process."""
        if not self._procs:
            for _ in range(self.workers):
                self._procs.append(
                    subprocess.Popen(
                        [sys.executable, "-c", _WORKER],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                    )
                )
                self._busy.append(False)
        i = self._jobs % self.workers
        self._wait(i)
        name = str(path).encode()
        lengths = [len(r) for r in records]
        stdin = self._procs[i].stdin
        stdin.write(struct.pack("<QQ", len(name), len(lengths)))
        stdin.write(name + struct.pack(f"<{len(lengths)}Q", *lengths))
        stdin.write(b"".join(records))
        stdin.flush()
        self._busy[i], self._jobs = True, self._jobs + 1

    def _wait(self, i: int) -> None:
        """Wait for process ``i``'s shard; raise the error it met."""
        if not self._busy[i]:
            return
        self._busy[i] = False
        stdout = self._procs[i].stdout
        size = stdout.read(8)
        reply = stdout.read(struct.unpack("<Q", size)[0]) if len(size) == 8 else b""
        if reply[:2] != b"ok":
            why = reply[2:].decode(errors="replace") or "it exited"
            raise RuntimeError(f"a shard process failed: {why}")

    def drain(self) -> None:
        """Wait for every shard in flight."""
        for i in range(len(self._procs)):
            self._wait(i)

    def close(self) -> None:
        """Stop the processes (killed if still writing) and wait for them."""
        for busy, proc in zip(self._busy, self._procs, strict=True):
            if busy:
                proc.kill()
            try:
                proc.stdin.close()  # an idle process exits at the end of its input
            except OSError:
                pass
        for proc in self._procs:
            proc.wait()
            proc.stdout.close()
        self._procs, self._busy = [], []


class _RecordLayout:
    """The feature spec, first record and param names the first record fixes."""

    def __init__(self):
        self.spec: Any = None
        self.serialize: Callable[[dict[str, Any]], list[bytes]] | None = None
        self.first: dict[str, Any] = {}
        self.param_names: list[str] = []

    def fix(self, record: dict[str, Any], history: History) -> None:
        self.spec, self.first = features.feature_spec(record), record
        self.serialize = features.records_serializer(self.spec)
        params = jax.tree.map(lambda x: x[0], history.params)
        self.param_names = features.param_names(params)


class _ShardWriter:
    """Writes host history chunks into the shards of one split from a thread.

    ``put(history)`` hands a chunk over (blocking while one is still
    queued: at most one chunk waits, one is being encoded); leaving the
    ``with`` block waits for the last one and its shards, closes them, and
    raises what the thread (or a shard process) raised. The records go out
    in the order the chunks came, so the bytes are those of a sequential
    write. ``shard_lengths`` is the records of each shard.
    """

    _DONE = object()

    def __init__(self, tmp: Path, split: str, want: int, layout, progress, pool):
        self.tmp, self.split, self.want, self.pool = tmp, split, want, pool
        self.layout, self.progress, self.count = layout, progress, 0
        self.shard_lengths: list[int] = []
        self.error: BaseException | None = None
        self._stopped = False  # the caller stopped: write no further shard
        self._per_shard = 0  # records per shard, fixed by the first record
        self._num_shards = 0
        self._writer: Any = None  # the shard this thread is writing
        self._pending: list[bytes] = []  # records of the next pooled shard
        self._queue: queue.Queue = queue.Queue(maxsize=1)
        features.load_tfds()  # here, not first in the thread (see load_tfds)
        self._thread = threading.Thread(
            target=self._run, name=f"agentrl-shards-{split}", daemon=True
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
            if not self._stopped:
                self._finish()
        except BaseException as err:  # re-raised in the caller's thread
            self.error = err
        finally:
            if self._writer is not None:
                self._writer.close()

    def _write(self, history: History) -> None:
        if history.num_tasks == 0:
            return
        columns = features.history_columns(history)
        if self.layout.spec is None:  # the first record fixes the spec
            self.layout.fix(features.column_record(columns, 0), history)
        records = self.layout.serialize(columns)
        if not self._num_shards:  # the first record fixes the shards
            self._per_shard = max(1, SHARD_BYTES // len(records[0]))
            self._num_shards = max(1, -(-self.want // self._per_shard))
        self.count += len(records)
        if self._num_shards == 1 or self.pool.workers < 2:
            self._write_here(records)
        else:
            self._pending += records
            while len(self._pending) >= self._per_shard:
                self._submit(self._pending[: self._per_shard])
                self._pending = self._pending[self._per_shard :]
        if self.progress is not None:
            self.progress(history.num_tasks)

    def _write_here(self, records: list[bytes]) -> None:
        """Write ``records`` into the shards from this thread, one after another."""
        for record in records:
            if self._writer is None:
                self._writer = self._open(len(self.shard_lengths))
                self.shard_lengths.append(0)
            self._writer.write(record)
            self.shard_lengths[-1] += 1
            if self.shard_lengths[-1] == self._per_shard:
                self._writer.close()
                self._writer = None

    def _open(self, index: int) -> Any:
        from array_record.python.array_record_module import ArrayRecordWriter

        path = self.tmp / shard_name(self.split, index, max(1, self._num_shards))
        return ArrayRecordWriter(str(path), _OPTIONS)

    def _submit(self, records: list[bytes]) -> None:
        """Hand one shard's records to the pool (at most ``workers`` in flight)."""
        path = self.tmp / shard_name(
            self.split, len(self.shard_lengths), self._num_shards
        )
        self.pool.submit(path, records)
        self.shard_lengths.append(len(records))

    def _finish(self) -> None:
        """Write the last shard and wait for every shard of the split."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._pending:
            self._submit(self._pending)
            self._pending = []
        self.pool.drain()
        if not self.shard_lengths:  # no records: one empty shard
            self._open(0).close()
            self.shard_lengths = [0]

    def __enter__(self) -> _ShardWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self._stopped = exc_info[0] is not None
        self._hand_over(self._DONE)  # a thread that stopped on an error needs none
        self._thread.join()
        if self.error is not None and exc_info[0] is None:
            raise self.error


def write_tfds_metadata(
    directory: Path, spec: Any, lengths: dict[str, list[int]], description: str
) -> None:
    """``dataset_info.json`` + ``features.json`` through TFDS's public API.

    ``tfds.folder_dataset.write_metadata`` describes files written outside a
    TFDS builder; the split infos are given (no file is re-read) and no data
    check runs (it would need TensorFlow). Nothing in them depends on the
    time or the machine: same shards, same bytes.
    """
    tfds = features.load_tfds()
    template = tfds.core.ShardedFileTemplate(
        data_dir=directory,
        template="{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}",
        dataset_name=BUILDER_NAME,
        filetype_suffix="array_record",
    )
    infos = [
        tfds.core.SplitInfo(
            name=split,
            shard_lengths=list(shards),
            num_bytes=sum(
                (directory / shard_name(split, i, len(shards))).stat().st_size
                for i in range(len(shards))
            ),
            filename_template=template.replace(split=split),
        )
        for split, shards in lengths.items()
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
