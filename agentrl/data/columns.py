"""Decode a whole split into stacked columns with no per-record Python loop.

A record is a serialized ``tf.train.Example`` whose arrays are raw bytes
(``Encoding.BYTES``): records of one split have the same fields and shapes,
so their bytes differ only in the array payloads and in scalar values
(``task_id``, the env params). :func:`split_columns` reads every record's
bytes at once (ArrayRecord's reader), groups them by length (a varint scalar
can change it), walks ONE exemplar per group with a minimal protobuf reader
to find where each field's payload lies, checks that every other byte (the
field names and lengths) is the exemplar's in every record of the group,
and cuts each field out of the ``[records, bytes]`` matrix as a numpy view:
``np.frombuffer`` over the whole split. Each exemplar is checked against
TFDS's own decoding of it, and float fields for NaN/inf. Anything
unexpected (another layout, a failed check) falls back to
:meth:`~agentrl.data.reader.HistoryDataset.records`, the reference decoder,
which also names a damaged file.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agentrl.data.reader import DatasetIntegrityError, HistoryDataset

LEN, VARINT, FIXED32, FIXED64 = 2, 0, 5, 1


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if byte < 0x80:
            return value, pos


def _fields(buf: bytes, lo: int, hi: int):
    """``(field number, wire type, start, end)`` of each field in ``buf[lo:hi]``."""
    pos = lo
    while pos < hi:
        tag, pos = _varint(buf, pos)
        wire = tag & 7
        if wire == LEN:
            size, pos = _varint(buf, pos)
        elif wire == VARINT:
            size = _varint(buf, pos)[1] - pos
        elif wire in (FIXED32, FIXED64):
            size = 4 if wire == FIXED32 else 8
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")
        yield tag >> 3, wire, pos, pos + size
        pos += size


def example_spans(buf: bytes) -> dict[str, tuple[int, int, bool]]:
    """``{feature name: (start, end, is_bytes)}``: where each feature's value
    lies in a serialized ``tf.train.Example`` (a ``bytes_list`` of one value:
    the payload itself; a numeric list: its packed values)."""
    spans = {}
    for number, _, lo, hi in _fields(buf, 0, len(buf)):
        if number != 1:
            continue
        for entry_no, _, elo, ehi in _fields(buf, lo, hi):
            if entry_no != 1:
                continue
            parts = {n: (a, b) for n, _, a, b in _fields(buf, elo, ehi)}
            name = buf[slice(*parts[1])].decode()
            kind, _, flo, fhi = next(_fields(buf, *parts[2]))
            values = [(a, b) for _, _, a, b in _fields(buf, flo, fhi)]
            if len(values) != 1:
                raise ValueError(f"feature {name!r}: {len(values)} value fields")
            spans[name] = (*values[0], kind == 1)
    return spans


def _flat(record: dict[str, Any], prefix: str = "") -> dict[str, np.ndarray]:
    out = {}
    for key, value in record.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}/"))
        else:
            out[f"{prefix}{key}"] = np.asarray(value)
    return out


def _nest(flat: dict[str, np.ndarray]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in flat.items():
        *path, leaf = name.split("/")
        node = out
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def raw_records(dataset: HistoryDataset, split: str) -> list[bytes]:
    """The serialized records of ``split``, in order (ArrayRecord's reader)."""
    from array_record.python.array_record_data_source import ArrayRecordDataSource

    dataset.source(split)  # checks the split's files are the dataset's own
    paths = [str(path) for _, path in dataset._shards[split]]
    with ArrayRecordDataSource(paths) as source:
        return source.__getitems__(range(len(source)))


def _group_columns(raw, rows, template, fields) -> dict[str, np.ndarray] | None:
    """Columns ``{flat name: [len(rows), ...]}`` of records ``rows`` (one
    length); ``None`` if their layout is not the exemplar's."""
    exemplar = raw[rows[0]]
    spans = example_spans(exemplar)
    matrix = np.frombuffer(b"".join([raw[i] for i in rows]), np.uint8)
    matrix = matrix.reshape(len(rows), len(exemplar))
    fixed = np.ones(len(exemplar), bool)
    for lo, hi, _ in spans.values():
        fixed[lo:hi] = False
    if not (matrix[:, fixed] == matrix[0, fixed]).all():
        return None
    out = {}
    for name in fields:
        lo, hi, is_bytes = spans.get(name, (0, 0, False))
        want = template[name]
        if not is_bytes or hi - lo != want.nbytes:
            return None
        column = np.ascontiguousarray(matrix[:, lo:hi]).view(want.dtype)
        out[name] = column.reshape(len(rows), *want.shape)
        if not np.array_equal(out[name][0], want, equal_nan=True):
            return None
    return out


def split_columns(
    dataset: HistoryDataset, split: str, fields: tuple[str, ...]
) -> dict[str, Any]:
    """Every record of ``split``: ``{field: [R, step, ...]}`` (numpy; dict
    observations nested), decoded at once (see the module docstring)."""
    raw = raw_records(dataset, split)
    lengths = np.array([len(r) for r in raw])
    flat_fields = None
    out: dict[str, np.ndarray] = {}
    for length in np.unique(lengths):
        rows = np.flatnonzero(lengths == length)
        template = _flat(dataset.records(split, [int(rows[0])])[0])
        if flat_fields is None:
            flat_fields = [n for n in template if n.split("/")[0] in fields]
        cols = _group_columns(raw, rows, template, flat_fields)
        if cols is None:
            return _slow_columns(dataset, split, fields)
        for name, col in cols.items():
            if name not in out:
                out[name] = np.empty((len(raw), *col.shape[1:]), col.dtype)
            out[name][rows] = col
    _check_finite(dataset, split, out)
    return _nest(out)


def _check_finite(dataset, split, columns) -> None:
    """Re-read (and so name) the first record with a NaN/inf value."""
    for col in columns.values():
        if np.issubdtype(col.dtype, np.floating):
            bad = ~np.isfinite(col.reshape(len(col), -1)).all(1)
            if bad.any():
                dataset.records(split, [int(np.argmax(bad))])  # raises, naming it
                raise DatasetIntegrityError(f"{dataset.path}: non-finite values")


def _slow_columns(dataset, split, fields) -> dict[str, Any]:
    """The reference decoder, record by record (``HistoryDataset.records``)."""
    import jax

    records = dataset.records(split, range(dataset.num_records(split)))
    return {
        f: jax.tree.map(lambda *x: np.stack(x), *[r[f] for r in records])
        for f in fields
    }
