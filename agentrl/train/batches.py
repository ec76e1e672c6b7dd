"""Where a data learner's batches come from, behind one interface.

A training call runs ``count`` updates from step ``start`` in one jitted
program (:func:`agentrl.train.step.make_train_call`). Its batches come from
``call_data(start, count)`` (an argument of the program) and
``draw(data, start, i)`` (inside it, for update ``i`` of the call):

- :class:`DeviceBatches`, THE training path for a split that fits the
  device: the split sits on the device (replicated over the mesh) and
  ``draw`` is :class:`~agentrl.data.device_sampler.DeviceSampler`'s draw of
  step ``start + i``; ``call_data`` is the same arrays every call, so the
  host only dispatches.
- :class:`StreamedBatches`, for a split larger than the sampler's cache
  (``agentrl.data.samplers.DEFAULT_CACHE_BYTES``): the same index draws,
  computed on the device from per-record tables (episode ends, task ids:
  one pass over the data), select windows that are read from the ArrayRecord
  files on grain's threads and gathered on the host; ``call_data`` stacks the
  call's ``count`` batches (``[count, B, ...]``, sharded over ``data``) and
  ``draw`` takes the ``i``-th. The batches equal the device path's, so a
  run gives the same parameters either way (``tests/test_train_data_reader``).
  Its program compiles once per distinct call length.
"""

from __future__ import annotations

import itertools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import agentrl.train.parallel as parallel
from agentrl.data.device_sampler import (
    batch_key,
    device_sampler_of,
    draw_index,
    gather,
    index_tables,
    spec_of,
)


def make_batches(sampler: Any, mesh: Any):
    """:class:`DeviceBatches` if ``sampler``'s split is cached, else streamed."""
    if getattr(sampler, "cached", True):
        return DeviceBatches(sampler, mesh)
    return StreamedBatches(sampler, mesh)


class DeviceBatches:
    """Batches drawn inside the program from the split on the device."""

    fixed_shapes = True  # the same arguments every call

    def __init__(self, sampler: Any, mesh: Any):
        put = lambda t: parallel.replicate(t, mesh)  # noqa: E731
        self.sampler = device_sampler_of(sampler, put)

    def call_data(self, start: int, count: int) -> Any:
        return self.sampler.data

    def draw(self, data: Any, start: Any, i: Any) -> dict[str, Any]:
        return self.sampler.draw(data, start + i)

    def close(self) -> None:
        pass


class StreamedBatches:
    """Batches read from disk on the host (see the module docstring)."""

    fixed_shapes = False  # [count, B, ...]: one program per call length

    def __init__(self, sampler: Any, mesh: Any, prefetch: int = 4):
        self.sampler, self.mesh, self.prefetch = sampler, mesh, prefetch
        self.spec, seed = spec_of(sampler), sampler.seed
        by_return = self.spec.episode_window == "subset_by_return"
        reward = sampler.record_columns(("reward",))["reward"] if by_return else None
        # DPT on trajectories: its terminated steps stay context steps
        steps = self.spec.kind == "context_set" and not self.spec.contiguous
        terminated = sampler.episode_flags()["terminated"] if steps else None
        self.tables = index_tables(
            self.spec, sampler.done_flags(), sampler.task_ids, reward, terminated
        )
        self._index = jax.jit(lambda t, s: draw_index(self.spec, t, batch_key(seed, s)))
        self._gather = jax.jit(lambda d, i: gather(self.spec, d, i))
        self._stream, self._next = None, None

    def host_batch(self, step: int) -> dict[str, Any]:
        """The batch of ``step`` (numpy): the device path's batch."""
        index = jax.device_get(self._index(self.tables, step))
        rows = index["rows"]
        fields = (*self.sampler.fields,)
        records = self.sampler._fetch(rows, fields)
        local = {f: records[f] for f in fields if f not in ("terminated", "truncated")}
        local["done"] = np.logical_or(records["terminated"], records["truncated"])
        local["task_id"] = self.tables["task_id"][rows]
        index["rows"] = np.arange(len(rows))
        return jax.device_get(self._gather(local, index))

    def _batches(self, start: int):
        if self._next != start:  # a new position: restart the prefetching stream
            self.close()
            self._stream = self._iterate(start)
        return self._stream

    def _iterate(self, start: int):
        import grain

        ds = grain.MapDataset.range(start, 1 << 62).map(self.host_batch)
        options = grain.ReadOptions(num_threads=2, prefetch_buffer_size=self.prefetch)
        yield from ds.to_iter_dataset(options)  # close() ends grain's threads

    def call_data(self, start: int, count: int) -> Any:
        stream = self._batches(start)
        batches = [
            parallel.shard_batch(b, self.mesh) for b in itertools.islice(stream, count)
        ]
        self._next = start + count
        return jax.tree.map(lambda *xs: jnp.stack(xs), *batches)

    def draw(self, data: Any, start: Any, i: Any) -> dict[str, Any]:
        return jax.tree.map(lambda x: x[i], data)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
        self._stream, self._next = None, None
