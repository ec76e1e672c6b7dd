"""A record's ``tf.train.Example`` bytes, written straight in protobuf's wire format.

The dataset's records are TFDS ``tf.train.Example`` protos: a map from the
flattened feature name (``obs``, ``params/goal``, ...) to a ``Feature``
holding one ``bytes_list`` value (the array's raw bytes, for the
``Encoding.BYTES`` tensors), or a packed ``int64_list`` / ``float_list``
(scalars). TFDS builds each proto in Python, feature by feature, about 2 ms
for a 400-step Dark Room record; the writer's thread could not keep up with
a device generating histories. :func:`wire_serializer` writes the same
bytes that ``SerializeToString(deterministic=True)`` of TFDS's proto gives
(map entries sorted by key, every entry's key then value, packed scalars),
with one ``tobytes`` per array and a few byte concatenations:
tests/test_data_writer_pipeline.py checks the bytes equal TFDS's for every
kind of feature the histories use. Dtypes and shapes are checked against
the spec as TFDS checks them.

:func:`batch_serializer` writes the same bytes for a whole chunk of records
at once, with no Python loop over records or steps: every record of a chunk
has the same fields and shapes, so each field's key and length prefixes are
one constant byte string and its payload one column of the chunk's array;
only integer scalars (varints) vary in length, and records are grouped by
those lengths (a few groups) and each group built as one ``[records, bytes]``
matrix.

Wire format used (protobuf encoding): a field is ``varint(number << 3 |
type)`` then its payload; type 2 (length-delimited) payloads are
``varint(length) + bytes``. ``Example.features`` = 1, ``Features.feature``
(a map; each entry a message with key = 1, value = 2) = 1,
``Feature.bytes_list`` = 1, ``float_list`` = 2, ``int64_list`` = 3, and each
list's ``value`` = 1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

_UINT64 = (1 << 64) - 1
_SMALL = [bytes((i,)) for i in range(0x80)]


def varint(n: int) -> bytes:
    """Protobuf's base-128 varint of ``n`` (negative: its 64-bit two's complement)."""
    if 0 <= n < 0x80:
        return _SMALL[n]
    n &= _UINT64
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def length_delimited(number: int, payload: bytes) -> bytes:
    """Field ``number`` of wire type 2 holding ``payload``."""
    return b"".join((_TAGS[number], varint(len(payload)), payload))


#: the tag of length-delimited fields 1..3 (the only ones used)
_TAGS = {n: bytes((n << 3 | 2,)) for n in (1, 2, 3)}


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": x}}`` -> ``{"a/b": x}``, as TFDS flattens features."""
    out = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "/"))
        else:
            out[name] = value
    return out


def _feature_encoder(name: str, feature: Any) -> Callable[[Any], bytes]:
    """``encode(value) -> Feature bytes`` of one flat TFDS feature."""
    dtype, shape = np.dtype(feature.np_dtype), tuple(feature.shape)
    # an Encoding.BYTES tensor is serialized as one bytes value (dtype object)
    as_bytes = np.dtype(feature.get_serialized_info().np_dtype) == np.dtype(object)

    def checked(value: Any) -> np.ndarray:
        x = np.asarray(value)
        if x.dtype != dtype or x.shape != shape:
            raise ValueError(
                f"feature {name!r}: got {x.dtype}{list(x.shape)}, the spec has "
                f"{dtype}{list(shape)}"
            )
        return x

    if as_bytes:
        return lambda v: length_delimited(
            1, length_delimited(1, np.ascontiguousarray(checked(v)).tobytes())
        )
    if dtype.kind in "iub":
        return lambda v: length_delimited(
            3, length_delimited(1, b"".join(varint(int(i)) for i in checked(v).flat))
        )
    if dtype.kind == "f":
        return lambda v: length_delimited(
            2, length_delimited(1, checked(v).astype("<f4").tobytes())
        )
    raise ValueError(f"feature {name!r}: no wire encoding for dtype {dtype}")


def wire_serializer(spec: Any) -> Callable[[dict[str, Any]], bytes]:
    """``serialize(record) -> bytes`` for the flat tensors of ``spec`` (a
    ``tfds.features.FeaturesDict`` of ``Tensor``s and ``Scalar``s)."""
    features = _flatten(_features_of(spec))
    order = sorted(features, key=lambda k: k.encode())
    keys = {name: length_delimited(1, name.encode()) for name in order}
    encoders = {name: _feature_encoder(name, features[name]) for name in order}

    def serialize(record: dict[str, Any]) -> bytes:
        flat = _flatten(record)
        if flat.keys() != features.keys():
            raise ValueError(
                f"record fields {sorted(flat)} differ from the spec's {order}"
            )
        entries = b"".join(
            length_delimited(1, keys[n] + length_delimited(2, encoders[n](flat[n])))
            for n in order
        )
        return length_delimited(1, entries)

    return serialize


def _varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(bytes [n, 10] uint8, lengths [n])``: :func:`varint` of each value."""
    u = values.astype(np.int64).view(np.uint64)  # negatives: two's complement
    shifts = np.arange(10, dtype=np.uint64) * np.uint64(7)
    groups = (u[:, None] >> shifts) & np.uint64(0x7F)
    # the number of 7-bit groups up to the highest non-zero one (at least one)
    nonzero = (u[:, None] >> shifts) != 0
    lengths = np.maximum(1, 10 - np.argmax(nonzero[:, ::-1], axis=1))
    lengths = np.where(nonzero.any(axis=1), lengths, 1)
    more = np.arange(10)[None, :] < (lengths[:, None] - 1)
    return (groups | (more * 0x80).astype(np.uint64)).astype(np.uint8), lengths


def _entry_head(key: bytes, number: int, size: int) -> bytes:
    """The bytes of a map entry before its ``size`` payload bytes: the entry
    ``key`` -> ``Feature`` whose list field ``number`` holds the payload."""
    head = _TAGS[1] + varint(size)  # the list's value field
    head = _TAGS[number] + varint(len(head) + size) + head  # Feature's list
    head = _TAGS[2] + varint(len(head) + size) + head  # the entry's value
    return _TAGS[1] + varint(len(key) + len(head) + size) + key + head


def _column_encoder(name: str, feature: Any, key: bytes):
    """``encode(column [n, ...]) -> (lengths, parts)``: the map entries of
    feature ``name`` for ``n`` records, ``key`` its encoded key.

    Fixed-length entries (arrays as bytes, floats): ``lengths`` is ``None``
    and ``parts`` ``[head bytes, payload [n, size] uint8]``. Integer
    scalars: ``lengths`` [n] is each record's varint length and
    ``parts(k, rows)`` the parts of ``rows``, whose varints have ``k`` bytes.
    """
    dtype, shape = np.dtype(feature.np_dtype), tuple(feature.shape)
    as_bytes = np.dtype(feature.get_serialized_info().np_dtype) == np.dtype(object)

    def checked(column: Any) -> np.ndarray:
        x = np.asarray(column)
        if x.dtype != dtype or x.shape[1:] != shape:
            raise ValueError(
                f"feature {name!r}: got {x.dtype}{list(x.shape[1:])}, the spec "
                f"has {dtype}{list(shape)}"
            )
        return x

    def fixed(number: int, x: np.ndarray) -> tuple[None, list]:
        rows = np.ascontiguousarray(x).reshape(x.shape[0], -1).view(np.uint8)
        return None, [_entry_head(key, number, rows.shape[1]), rows]

    if as_bytes:
        return lambda c: fixed(1, checked(c))
    if dtype.kind == "f":
        return lambda c: fixed(2, checked(c).astype("<f4"))
    if dtype.kind not in "iub":
        raise ValueError(f"feature {name!r}: no wire encoding for dtype {dtype}")

    def ints(column: Any) -> tuple[np.ndarray, Callable]:
        x = checked(column)
        if x.ndim != 1:
            raise ValueError(f"feature {name!r}: a column of integer scalars is [n]")
        values, lengths = _varints(x.reshape(-1))

        def parts(k: int, rows: np.ndarray) -> list:
            return [_entry_head(key, 3, k), values[rows, :k]]

        return lengths, parts

    return ints


def batch_serializer(spec: Any) -> Callable[[dict[str, Any]], list[bytes]]:
    """``serialize(columns) -> [bytes]``: :func:`wire_serializer`'s bytes of
    each record of a chunk, from its columns (the record's nested dict with
    a leading record axis on every array), with no loop over records."""
    features = _flatten(_features_of(spec))
    order = sorted(features, key=lambda k: k.encode())
    encoders = {
        name: _column_encoder(name, features[name], length_delimited(1, name.encode()))
        for name in order
    }

    def serialize(columns: dict[str, Any]) -> list[bytes]:
        flat = _flatten(columns)
        if flat.keys() != features.keys():
            raise ValueError(
                f"record fields {sorted(flat)} differ from the spec's {order}"
            )
        encoded = [encoders[name](flat[name]) for name in order]
        n = {len(p[1]) if v is None else len(v) for v, p in encoded}
        if len(n) != 1:
            raise ValueError(f"columns of different numbers of records: {sorted(n)}")
        n = n.pop()
        varying = [lengths for lengths, _ in encoded if lengths is not None]
        signature = np.stack(varying, axis=1) if varying else np.zeros((n, 0), int)
        keys, group = np.unique(signature, axis=0, return_inverse=True)
        records: list[bytes] = [b""] * n
        for g, key in enumerate(keys.tolist()):
            # one group in the common case: no copy of the payloads
            rows = np.flatnonzero(group.reshape(-1) == g) if len(keys) > 1 else None
            m = n if rows is None else len(rows)
            ks, parts = iter(key), []
            for lengths, enc in encoded:
                if lengths is not None:
                    enc = enc(next(ks), np.arange(n) if rows is None else rows)
                for part in enc:
                    if isinstance(part, bytes):
                        row = np.frombuffer(part, np.uint8)
                        part = np.broadcast_to(row, (m, row.size))
                    elif rows is not None and lengths is None:
                        part = part[rows]
                    parts.append(part)
            width = sum(p.shape[1] for p in parts)
            head = np.frombuffer(_TAGS[1] + varint(width), np.uint8)
            matrix = np.concatenate([np.broadcast_to(head, (m, head.size)), *parts], 1)
            data, width = matrix.tobytes(), matrix.shape[1]
            at = range(n) if rows is None else rows.tolist()
            for j, row in enumerate(at):
                records[row] = data[j * width : (j + 1) * width]
        return records

    return serialize


def _features_of(spec: Any) -> dict[str, Any]:
    """The nested ``{name: feature}`` of a ``FeaturesDict``."""
    out = {}
    for name, feature in spec.items():
        out[name] = _features_of(feature) if hasattr(feature, "items") else feature
    return out
