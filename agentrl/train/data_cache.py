"""Generated datasets kept once per data config, linked into each run that asks again.

A run without ``data.path`` generates its histories into ``RUN/dataset``
(:func:`agentrl.train.data.prepare_dataset`). Runs with the same data
config generate the same histories: AD and T2MIR-AD on one seed, an
experiment and its ``--compare`` partner, every ``--set`` ablation of the
model or the training. On a MuJoCo family that is the costliest step (SAC's
HalfCheetah-Vel histories: 31-43 minutes a seed on 2 CPU cores).

``agentrl reproduce`` calls :func:`share_dataset` before training: a kept
dataset is linked into the new run (:func:`reuse_dataset`), else the run's
own is generated there at once and kept in ``<runs>/datasets/<digest>/``
(:func:`keep_dataset`: hard links to the run's files, copies where a link
cannot be made), so a run started on the same data while this one trains
finds it. ``fit`` then opens the run's dataset in place of generating it
and checks its checksums on first use.

The digest covers every field of the data config but ``path``, the code
that generates it (the agentrl package, and the files defining the source
and the family when they are plug-ins), the numerical packages' versions
and the machine (:mod:`agentrl.provenance`), so a dataset made by other
code or on another CPU is never taken for this one. A source that reads
files named in its settings (``learned_learner``'s ``run_dir``: its
``text`` settings) is never kept: its histories depend on more than the
config says. The entry's ``fields.json`` is written last, so a folder
without it (a writer killed midway) is no entry.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from agentrl.envs.registry import ENVS
from agentrl.envs.registry import make as make_env
from agentrl.provenance import code_digest, json_digest, machine_info, package_versions
from agentrl.safeio import link_tree, remove
from agentrl.sources.registry import SOURCES
from agentrl.tables import write_json
from agentrl.train.data import prepare_dataset

#: The file an entry is complete with: the fields its digest was made from.
FIELDS_FILE = "fields.json"


def dataset_fields(data: Any) -> dict[str, Any] | None:
    """What the dataset of data config ``data`` depends on, as JSON-ready
    values; ``None`` if it is not kept (a path to read, or a source that
    reads files)."""
    spec = SOURCES.get(data.source, None)
    if data.path or spec is None or spec.text:
        return None
    config = {k: v for k, v in dataclasses.asdict(data).items() if k != "path"}
    family = ENVS.get(data.env, None)
    return {
        "data": json.loads(json.dumps(config, sort_keys=True, default=str)),
        "code_sha256": code_digest([spec.histories, spec.build, family]),
        "packages": package_versions(),
        "machine": machine_info(),
    }


def entry_path(folder: Path, fields: dict[str, Any]) -> Path:
    """The entry folder of ``fields`` in ``folder``."""
    return Path(folder) / json_digest(fields)[:24]


def share_dataset(folder: Path, config: Any, run_dir: Path) -> None:
    """``run_dir/dataset`` of ``config``: linked from ``folder`` when kept
    there, else generated into the run and kept. A dataset the run already
    has is left alone and not kept: it may come from other code, which the
    entry's key would not say."""
    data, target = config.data, Path(run_dir) / "dataset"
    fields = dataset_fields(data)  # hashes the package's code: once a call
    if fields is None or target.exists():
        return
    entry = entry_path(folder, fields)
    if _link_entry(entry, fields, target):
        return
    prepare_dataset(config, make_env(data.env, **dict(data.env_args)), Path(run_dir))
    _keep(entry, fields, target)


def reuse_dataset(folder: Path, data: Any, run_dir: Path) -> bool:
    """Link the kept dataset of ``data`` into ``run_dir/dataset`` if the run
    has none and ``folder`` keeps one; whether it did."""
    target = Path(run_dir) / "dataset"
    fields = dataset_fields(data)
    if fields is None or target.exists():
        return False
    return _link_entry(entry_path(folder, fields), fields, target)


def keep_dataset(folder: Path, data: Any, run_dir: Path) -> None:
    """Keep ``run_dir/dataset`` (generated from ``data``) in ``folder``,
    unless it is not kept or an entry for it exists already."""
    source = Path(run_dir) / "dataset"
    fields = dataset_fields(data)
    if fields is not None and source.is_dir():
        _keep(entry_path(folder, fields), fields, source)


def _link_entry(entry: Path, fields: dict[str, Any], target: Path) -> bool:
    """Link ``entry`` into ``target`` if it is complete and made from ``fields``."""
    if _read_fields(entry) != fields:
        return False
    link_tree(entry, target, skip=FIELDS_FILE)
    print(f"histories: the dataset kept in {entry}")
    return True


def _keep(entry: Path, fields: dict[str, Any], source: Path) -> None:
    """``entry``: ``source``'s files and ``fields``, unless it holds them."""
    if _read_fields(entry) == fields:
        return
    if entry.exists():  # incomplete or foreign: replaced
        remove(entry)
    link_tree(source, entry)
    write_json(entry / FIELDS_FILE, fields)


def _read_fields(entry: Path) -> dict[str, Any] | None:
    try:
        return json.loads((entry / FIELDS_FILE).read_text())
    except (OSError, ValueError):
        return None
