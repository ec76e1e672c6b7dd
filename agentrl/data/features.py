"""Histories <-> per-task records, and the TFDS feature spec of a record.

One record is one task's history, every field ``[step, ...]`` (no task axis):
``obs`` (an array or a nested dict of arrays), ``action``, ``reward``,
``terminated``, ``truncated`` (bools stored as uint8), ``episode``,
optionally ``optimal_action`` and ``next_obs`` (shaped like ``obs``), the
scalar ``task_id`` and ``params`` (the task's env params, a flat dict
``{leaf name: array}`` in the order of ``jax.tree.leaves(params)``).
Arrays are stored as raw bytes (``Encoding.BYTES``), which decode with
``np.frombuffer`` and no TensorFlow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

from agentrl.data.example_wire import batch_serializer, wire_serializer
from agentrl.history import History

ARRAY_FIELDS = ("action", "reward", "terminated", "truncated", "episode")


def _leaf_name(path: tuple) -> str:
    parts = []
    for k in path:
        for attr in ("name", "key", "idx"):
            if hasattr(k, attr):
                parts.append(str(getattr(k, attr)))
                break
    return "__".join(parts) or "value"


def param_names(params: Any) -> list[str]:
    """Names of the leaves of a params pytree, in ``jax.tree.leaves`` order."""
    return [_leaf_name(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]]


def params_to_dict(params: Any) -> dict[str, np.ndarray]:
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    return {_leaf_name(p): np.asarray(v) for p, v in flat}


def params_from_dict(template: Any, values: dict[str, Any]) -> Any:
    """Rebuild a params pytree shaped like ``template`` from its leaf dict."""
    treedef = jax.tree.structure(template)
    return jax.tree.unflatten(treedef, [values[n] for n in param_names(template)])


def _storable(x: Any) -> np.ndarray:
    """Bools are stored as uint8 (TFDS would widen them to int64)."""
    x = np.asarray(x)
    return x.astype(np.uint8) if x.dtype == np.bool_ else x


def _obs_tree(obs: Any) -> Any:
    if isinstance(obs, dict):
        return {k: _obs_tree(v) for k, v in obs.items()}
    if isinstance(obs, list | tuple):
        raise ValueError("observations must be arrays or dicts of arrays")
    return np.asarray(obs)


def history_columns(history: History) -> dict[str, Any]:
    """The records of a host (numpy) history ``[task, step, ...]`` as columns:
    a record's nested dict with the task axis first on every array (views of
    the history's arrays, bools as uint8)."""
    history = jax.device_get(history)
    columns = {
        "obs": jax.tree.map(_storable, _obs_tree(history.obs)),
        **{f: _storable(getattr(history, f)) for f in ARRAY_FIELDS},
        "task_id": np.asarray(history.task_id).astype(np.int32, copy=False),
        "params": params_to_dict(history.params),
    }
    if history.optimal_action is not None:
        columns["optimal_action"] = np.asarray(history.optimal_action)
    if history.next_obs is not None:
        columns["next_obs"] = jax.tree.map(_storable, _obs_tree(history.next_obs))
    return columns


def column_record(columns: dict[str, Any], i: int) -> dict[str, Any]:
    """Record ``i`` of :func:`history_columns`' columns (``task_id`` a numpy
    scalar)."""
    return jax.tree.map(lambda x: x[i], columns)


def history_records(history: History) -> Iterator[dict[str, Any]]:
    """Yield one record per task of a host (numpy) history ``[task, step, ...]``."""
    columns = history_columns(history)
    for i in range(history.num_tasks):
        yield column_record(columns, i)


def load_tfds() -> Any:
    """The ``tensorflow_datasets`` module, imported in the calling thread.

    TFDS imports itself under etils' ``lazy_imports``, which swaps
    ``builtins.__import__`` for every thread while it runs: an import that
    another thread makes meanwhile gets a lazy stand-in instead of the
    module (on a GPU, JAX's function-level ``from jax._src.hijax import
    HiType`` in the main thread broke while the shard writer's thread
    imported TFDS). So the first import must happen while no other thread
    imports: callers that start threads call this before starting them.
    """
    import tensorflow_datasets

    return tensorflow_datasets


def feature_spec(record: dict[str, Any]):
    """A ``tfds.features.FeaturesDict`` matching ``record`` (shapes fixed)."""
    tfds = load_tfds()

    def tensor(x: np.ndarray):
        x = np.asarray(x)
        if x.ndim == 0:
            return tfds.features.Scalar(dtype=x.dtype)
        return tfds.features.Tensor(
            shape=x.shape, dtype=x.dtype, encoding=tfds.features.Encoding.BYTES
        )

    def spec(tree):
        if isinstance(tree, dict):
            return tfds.features.FeaturesDict({k: spec(v) for k, v in tree.items()})
        return tensor(tree)

    return spec(record)


def record_serializer(spec: Any) -> Callable[[dict[str, Any]], bytes]:
    """``serialize(record) -> bytes``: TFDS's ``tf.train.Example`` of
    ``record`` under ``spec``, the bytes of its deterministic serialization.

    Written straight in protobuf's wire format
    (:func:`agentrl.data.example_wire.wire_serializer`, ~5x faster than
    TFDS's Python path); the same bytes as :func:`tfds_serializer`.
    Deterministic: ``spec.serialize_example`` writes the Example's feature
    map in the order of protobuf's hash table, whose seed differs from
    process to process, so the same record gave different bytes in two
    processes; here the map is sorted by key, as ``deterministic=True``
    sorts it. Readers parse either.
    """
    return wire_serializer(spec)


def records_serializer(spec: Any) -> Callable[[dict[str, Any]], list[bytes]]:
    """``serialize(columns) -> [bytes]``: :func:`record_serializer`'s bytes of
    every record of :func:`history_columns`' columns, built for the whole
    chunk at once (:func:`agentrl.data.example_wire.batch_serializer`)."""
    return batch_serializer(spec)


def tfds_serializer(spec: Any) -> Callable[[dict[str, Any]], bytes]:
    """TFDS's own encoding of ``record``, serialized with
    ``deterministic=True``: the reference :func:`record_serializer` equals."""
    from tensorflow_datasets.core.example_serializer import ExampleSerializer

    serializer = ExampleSerializer(spec.get_serialized_info())

    def serialize(record: dict[str, Any]) -> bytes:
        example = serializer.get_tf_example(spec.encode_example(record))
        return example.SerializeToString(deterministic=True)

    return serialize


def records_to_history(records: list[dict[str, Any]], params_template: Any):
    """Stack decoded records into a numpy :class:`History` ``[task, step, ...]``."""

    def stack(*xs):
        return np.stack([np.asarray(x) for x in xs])

    tree = jax.tree.map(stack, *records)
    params = None
    if params_template is not None:
        params = params_from_dict(params_template, tree["params"])
    return History(
        obs=tree["obs"],
        action=tree["action"],
        reward=tree["reward"],
        terminated=tree["terminated"].astype(bool),
        truncated=tree["truncated"].astype(bool),
        episode=tree["episode"],
        optimal_action=tree.get("optimal_action"),
        task_id=tree["task_id"].astype(np.int32),
        params=params,
        next_obs=tree.get("next_obs"),
    )
