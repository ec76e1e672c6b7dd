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
its arguments, the tasks' parameters and the key (bytes), and the code and
machine that compute them (:mod:`agentrl.provenance`): every ``.py`` file
of the agentrl package and of the modules defining the source and the
environment (plug-ins included), the versions of the numerical packages,
and the device and CPU (MuJoCo's floats differ across CPU models). Any
change to these is a miss, so a stale entry cannot put another
computation's numbers into a result; the cost of that safety is that an
edit anywhere in agentrl recomputes. Entries are written atomically; an
unreadable or mismatched one is recomputed and replaced.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from agentrl.provenance import (
    code_digest,
    json_digest,
    machine_info,
    package_versions,
    tree_digest,
)
from agentrl.sources.registry import SOURCES
from agentrl.tables import write_json


def cached_returns(
    folder: Path,
    fields: dict[str, Any],
    compute: Callable[[], np.ndarray],
) -> np.ndarray:
    """The returns ``[task, episode]`` stored under ``fields`` in ``folder``,
    else ``compute()``'s, stored there before they are returned."""
    path = Path(folder) / f"{fields['source']}-{json_digest(fields)[:24]}.json"
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
        "params_sha256": tree_digest(params),
        "key_sha256": tree_digest(key),
        "code_sha256": code_digest([spec.histories, type(env)]),
        "packages": package_versions(),
        "machine": machine_info(),
    }


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
