"""A folder of source runs already made, so that an evaluation repeating one reads it.

A whole-run source baseline (:mod:`agentrl.evaluate.source_runs`: SAC or
PPO learning from scratch on the held-out tasks) is the costliest part of
evaluating a learner on a MuJoCo family (SAC for 600 episodes on three
HalfCheetah-Vel velocities: ~25 minutes on 2 CPU cores). Every learner of
one family and seed meets the same tasks, keys and source settings, so it
is the same computation: ``agentrl reproduce`` of AD, DPT, RL² and
transformer PPO on one seed ran it four times, with identical results
(session 43's records).

An entry is the run's per-episode returns ``[task, episode]``, stored as
JSON (floats round-trip exactly) under the SHA-256 of everything the
returns depend on (:func:`entry_fields`): the source and its settings
(less those that only change what is recorded beside the run, the
source's ``record_only``: DPT's labels), the episode count, the family and
its arguments, the tasks' parameters and the key (bytes), and the code
and machine that compute them: every ``.py`` file
of the agentrl package and of the modules defining the source and the
environment (plug-ins included), the versions of the numerical packages,
and the device and CPU (MuJoCo's floats differ across CPU models). Any
change to these is a miss, so a stale entry cannot put another
computation's numbers into a result; the cost of that safety is that an
edit anywhere in agentrl recomputes. Entries are written atomically; an
unreadable or mismatched one is recomputed and replaced.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

import agentrl
from agentrl.evaluate.reproduce_record import machine_info
from agentrl.sources.registry import SOURCES
from agentrl.tables import write_json

#: The packages whose versions can change a source run's floats.
NUMERIC_PACKAGES = (
    "jax", "jaxlib", "numpy", "flax", "optax", "brax", "mujoco", "mujoco-mjx",
)  # fmt: skip


def cached_returns(
    folder: Path,
    fields: dict[str, Any],
    compute: Callable[[], np.ndarray],
) -> np.ndarray:
    """The returns ``[task, episode]`` stored under ``fields`` in ``folder``,
    else ``compute()``'s, stored there before they are returned."""
    path = Path(folder) / f"{fields['source']}-{entry_digest(fields)[:24]}.json"
    stored = _read(path, fields)
    if stored is not None:
        print(f"{fields['source']}: its run read from {path}", file=sys.stderr)
        return stored
    returns = np.asarray(compute(), np.float64)
    write_json(path, {"fields": fields, "returns": returns.tolist()}, indent=None)
    return returns


def entry_fields(
    source: str,
    settings: dict[str, Any],
    num_episodes: int,
    env: Any,
    env_key: str,
    params: Any,
    key: jax.Array,
) -> dict[str, Any]:
    """What a source run's returns depend on, as JSON-ready values.

    ``env_key``: the family's name and arguments (as the evaluation keys
    its programs); ``params``: the tasks' parameters ``[task, ...]``;
    ``key``: the source run's PRNG key.
    """
    spec = SOURCES[source]
    kept = {k: v for k, v in settings.items() if k not in spec.record_only}
    return {
        "source": source,
        "settings": json.loads(json.dumps(kept, sort_keys=True, default=str)),
        "num_episodes": int(num_episodes),
        "env": env_key,
        "params_sha256": _tree_digest(params),
        "key_sha256": _tree_digest(jax.random.key_data(key)),
        "code_sha256": code_digest([spec.histories, type(env)]),
        "packages": {name: _version(name) for name in NUMERIC_PACKAGES},
        "machine": machine_info(),
    }


def entry_digest(fields: dict[str, Any]) -> str:
    """SHA-256 (hex) of ``fields`` in canonical JSON."""
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def code_digest(objects: list[Any]) -> str:
    """SHA-256 over the agentrl package's ``.py`` files and those defining
    ``objects`` (a plug-in's source or family lives outside the package)."""
    package = Path(agentrl.__file__).resolve().parent
    files = set(package.rglob("*.py"))
    for obj in objects:
        where = _defining_file(obj)
        if where is not None:
            files.add(where)
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(str(path.relative_to(package) if path.is_relative_to(package)
                          else path).encode())  # fmt: skip
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _defining_file(obj: Any) -> Path | None:
    try:
        where = inspect.getsourcefile(obj)
    except TypeError:  # a builtin, or a class defined interactively
        return None
    return None if where is None else Path(where).resolve()


def _tree_digest(tree: Any) -> str:
    """SHA-256 over each leaf's path, dtype, shape and bytes."""
    digest = hashlib.sha256()
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        array = np.asarray(leaf)
        digest.update(f"{jax.tree_util.keystr(path)}|{array.dtype}|{array.shape}|"
                      .encode())  # fmt: skip
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _read(path: Path, fields: dict[str, Any]) -> np.ndarray | None:
    """The entry's returns, or ``None`` if it is missing, unreadable or was
    made from other fields (a digest collision, or a hand-edited file)."""
    try:
        entry = json.loads(path.read_text())
        if entry["fields"] != fields:
            return None
        returns = np.asarray(entry["returns"], np.float64)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return returns if returns.ndim == 2 else None
