"""Device mesh, batch sharding and multi-host start-up, all in one place.

Data parallelism is ``jax.jit`` over arrays placed with ``NamedSharding`` on a
``jax.make_mesh`` mesh (no ``pmap``): the batch is split along the mesh's
``data`` axis, parameters and optimizer state are replicated, and XLA inserts
the gradient all-reduce. A ``sweep`` axis can hold vmapped seeds or
hyperparameters. Axes are ``AxisType.Auto`` because gymnax-style environment
code runs inside the same programs and fails under Explicit axes.

Multi-host: set ``AGENTRL_COORDINATOR`` (host:port), ``AGENTRL_NUM_PROCESSES``
and ``AGENTRL_PROCESS_ID`` (or the standard ``JAX_*`` cluster variables) and
call :func:`initialize_distributed` before any other JAX call; the same mesh
code then spans every process's devices.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

DATA = "data"
SWEEP = "sweep"


def initialize_distributed() -> bool:
    """Start multi-host JAX from environment variables; False if single-host."""
    coordinator = os.environ.get("AGENTRL_COORDINATOR")
    if coordinator is None:
        return False
    num = int(os.environ["AGENTRL_NUM_PROCESSES"])
    pid = int(os.environ["AGENTRL_PROCESS_ID"])
    # CPU processes need a collectives backend for cross-process reductions.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=coordinator, num_processes=num, process_id=pid
    )
    return True


def make_mesh(num_data: int | None = None, num_sweep: int = 1) -> Mesh:
    """A ``(sweep, data)`` mesh over all devices (``num_data`` defaults to all)."""
    total = jax.device_count()
    if num_data is None:
        num_data = total // num_sweep
    if num_data * num_sweep != total or num_data < 1:
        raise ValueError(
            f"mesh: sweep ({num_sweep}) x data ({num_data}) must equal the "
            f"{total} visible devices"
        )
    auto = jax.sharding.AxisType.Auto
    return jax.make_mesh((num_sweep, num_data), (SWEEP, DATA), axis_types=(auto, auto))


# Not imported from agentrl.data.samplers: importing agentrl.data starts the
# XLA backend, after which jax.distributed.initialize (above) must fail.
def data_sharding(mesh: Mesh) -> NamedSharding:
    """Leading (batch) axis split over ``data``; everything else replicated."""
    return NamedSharding(mesh, P(DATA))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def check_batch_divisible(batch_size: int, mesh: Mesh) -> None:
    n = mesh.shape[DATA]
    if batch_size % n:
        raise ValueError(
            f"train.batch_size ({batch_size}) must be divisible by the number of "
            f"data-parallel devices ({n})"
        )


def shard_batch(batch: Any, mesh: Mesh) -> Any:
    """Place the global host batch (numpy leaves ``[batch, ...]``) on ``data``.

    Every process computes the same global batch (samplers are pure functions
    of ``(seed, step)``); on several hosts each process contributes its own
    contiguous slice of rows, so no data crosses the network.
    """
    sharding = data_sharding(mesh)
    if jax.process_count() == 1:
        return jax.device_put(batch, sharding)
    count, index = jax.process_count(), jax.process_index()

    def local(x):
        x = np.asarray(x)
        rows = x.shape[0] // count
        part = x[index * rows : (index + 1) * rows]
        return jax.make_array_from_process_local_data(sharding, part, x.shape)

    return jax.tree.map(local, batch)


def replicate(tree: Any, mesh: Mesh) -> Any:
    """Copy every leaf to all devices of ``mesh`` (each process has the value)."""
    sharding = replicated(mesh)
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)

    def put(x):
        if not isinstance(x, jax.Array | np.ndarray):
            return x
        is_key = jnp.issubdtype(x.dtype, jax.dtypes.prng_key)
        data = np.asarray(jax.random.key_data(x) if is_key else x)
        out = jax.make_array_from_callback(data.shape, sharding, lambda i: data[i])
        return (
            jax.random.wrap_key_data(out, impl=jax.random.key_impl(x))
            if is_key
            else out
        )

    return jax.tree.map(put, tree)
