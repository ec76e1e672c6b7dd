"""What a computed result depends on besides its inputs: the code and the machine.

A result kept for reuse (a source baseline's run, a generated dataset) is
valid only for the code and machine that made it: an edit to a learner
changes its numbers, and MuJoCo's floats differ across CPU models. These
helpers describe both as JSON-ready values, so a cache can put them in its
key and miss whenever either changes:

- :func:`code_digest`: SHA-256 over the agentrl package's ``.py`` files and
  those defining given objects (a plug-in's source or family);
- :func:`package_versions`: the numerical packages' versions;
- :func:`machine_info`: the CPU model, core count, device kind and count;
- :func:`tree_digest`: a digest of a pytree of arrays (tasks' parameters, a
  PRNG key), leaf by leaf (also the sweep's task-set ids).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import json
import os
import platform
from pathlib import Path
from typing import Any

import jax
import numpy as np

#: The packages whose versions can change a computation's floats.
NUMERIC_PACKAGES = (
    "jax", "jaxlib", "numpy", "flax", "optax", "brax", "mujoco", "mujoco-mjx",
)  # fmt: skip


def machine_info() -> dict[str, Any]:
    """The CPU model, core count, device kind and count, and JAX version."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    device = jax.devices()[0]
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "device_kind": device.device_kind,
        "platform": device.platform,
        "num_devices": jax.device_count(),
        "jax_version": jax.__version__,
    }


def package_versions() -> dict[str, str | None]:
    """``{package: version}`` of :data:`NUMERIC_PACKAGES` (``None``: absent)."""
    versions: dict[str, str | None] = {}
    for name in NUMERIC_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def code_digest(objects: list[Any]) -> str:
    """SHA-256 over the agentrl package's ``.py`` files and those defining
    ``objects`` (functions or classes; one defined interactively adds none)."""
    package = Path(__file__).resolve().parent
    files = set(package.rglob("*.py"))
    files.update(f for f in map(_defining_file, objects) if f is not None)
    digest = hashlib.sha256()
    for path in sorted(files):
        name = path.relative_to(package) if path.is_relative_to(package) else path
        digest.update(str(name).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def tree_digest(tree: Any, algorithm: str = "sha256") -> str:
    """Hex digest over each leaf's dtype, shape and bytes, in tree order (a
    typed PRNG key by its key data): equal exactly when the arrays are."""
    digest = hashlib.new(algorithm)
    for leaf in jax.tree.leaves(tree):
        if jax.dtypes.issubdtype(getattr(leaf, "dtype", None), jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        array = np.ascontiguousarray(np.asarray(leaf))
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def json_digest(fields: dict[str, Any]) -> str:
    """SHA-256 (hex) of ``fields`` in canonical JSON."""
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _defining_file(obj: Any) -> Path | None:
    try:
        where = inspect.getsourcefile(obj)
    except TypeError:  # a builtin, or a class defined interactively
        return None
    return None if where is None else Path(where).resolve()
