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
    """Place a host batch (numpy leaves ``[batch, ...]``) across ``data``.

    On several hosts each process passes its own slice of the global batch.
    """
    sharding = data_sharding(mesh)
    if jax.process_count() == 1:
        return jax.device_put(batch, sharding)
    return jax.tree.map(
        lambda x: jax.make_array_from_process_local_data(sharding, np.asarray(x)),
        batch,
    )


def replicate(tree: Any, mesh: Mesh) -> Any:
    return jax.device_put(tree, replicated(mesh))
