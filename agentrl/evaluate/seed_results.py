"""A reproduction's results of one seed, kept beside its run.

``agentrl reproduce`` writes each seed's evaluation results and protocol
record to ``<run>-results.json`` with the config that made them, so seeds
can run in parallel processes and a last invocation over all of them only
reports. A cache is read back only under the same config (but
:data:`CACHE_IGNORES`) and the same agentrl code (the digest of its ``.py``
files); otherwise it says what changed and the seed is evaluated again (its
training run is reused as it is).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import agentrl.configtools as configtools
import agentrl.evaluate.controls as ctl
from agentrl.evaluate.reproduce_report import eval_result
from agentrl.provenance import code_digest
from agentrl.tables import write_json

#: Settings that change no result of a seed (logging, checkpoint cadence,
#: how updates are dispatched): a cache that differs only there is reused.
CACHE_IGNORES = (
    "train.log_every",
    "train.checkpoint_every",
    "train.keep_checkpoints",
    "train.steps_per_call",
    "model.moe_dispatch",
)


def save(path: Path, results: dict, record: dict, config: Any) -> None:
    """Write a seed's ``{method: EvalResult}``, its protocol ``record`` and
    the ``config`` they were computed with to ``path``."""
    runs = {m: r.to_json() for m, r in results.items()}
    saved = {
        "runs": runs,
        "protocol": record,
        "config": configtools.to_dict(config),
        "code_sha256": code_digest([]),
    }
    write_json(path, saved, indent=None)


def load(path: Path, config: Any) -> tuple[dict, dict]:
    """A seed's cached ``(results, record)``, or ``({}, {})`` where they were
    computed with another config than ``config`` or by other agentrl code
    (said, then redone; a cache from before caches recorded their code,
    session 51, counts as other code)."""
    saved = json.loads(path.read_text())
    then = saved.get("config")
    changed = changed_fields(then, config) if then is not None else []
    code, now = saved.get("code_sha256"), code_digest([])
    if code != now:
        was = "not recorded" if code is None else code[:12]
        changed.append(f"agentrl's code: {was} -> {now[:12]}")
    if changed:
        print(f"{path.name}: computed with {'; '.join(changed)}; evaluated again")
        return {}, {}
    results = {m: eval_result(run) for m, run in saved["runs"].items()}
    return results, saved["protocol"]


def changed_fields(then: dict, config: Any) -> list[str]:
    """``"field: then -> now"`` for each setting that differs (but
    :data:`CACHE_IGNORES`)."""
    old, new = configtools.flat_fields(then), configtools.flat_fields(config)
    return [
        f"{k}: {old.get(k)!r} -> {new.get(k)!r}"
        for k in sorted(old.keys() | new.keys())
        if old.get(k) != new.get(k) and k not in CACHE_IGNORES
    ]


def missing_controls(results: dict, config: Any) -> list[str]:
    """The context controls a seed's cached results lack."""
    label = config.algo.label
    return [c for c in ctl.CONTEXT_CONTROLS if f"{label}/{c}" not in results]


def expert_stale(ed: str, results: dict, record: dict, episodes: int) -> bool:
    """Whether the seed lacks its expert-distillation result ``ed`` on
    ``episodes`` last episodes."""
    done = record.get("expert_distillation", {}).get("episodes")
    return ed not in results or done != episodes
