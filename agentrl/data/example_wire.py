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


def _features_of(spec: Any) -> dict[str, Any]:
    """The nested ``{name: feature}`` of a ``FeaturesDict``."""
    out = {}
    for name, feature in spec.items():
        out[name] = _features_of(feature) if hasattr(feature, "items") else feature
    return out
