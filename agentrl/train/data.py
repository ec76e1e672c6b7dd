"""The data side of a run: make or open the dataset, build the batch sampler.

A run either points at an existing dataset (``data.path``) or generates one
into ``run_dir/dataset`` from the config's env, source and seed (written
atomically, so a killed generation is simply redone). The sampler is the
algorithm's (:meth:`agentrl.algos.Algorithm.make_sampler`).

Integrity: the first time a run uses its dataset (no checkpoint yet) every
file's SHA-256 is checked; a resumed run checks only the files' sizes, so
resuming on XLand-size data does not re-hash it (``agentrl data verify``
does the full check on demand). A dataset the run has just written is
checked by size. The batches themselves are drawn on the device
(:mod:`agentrl.train.batches`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
from tqdm.auto import tqdm

import agentrl.configtools as configtools
import agentrl.data.xland100b as xland100b
import agentrl.train.learned  # noqa: F401 (registers the learned_learner source)
from agentrl.data.reader import DatasetIntegrityError, HistoryDataset, open_dataset
from agentrl.data.writer import write_dataset
from agentrl.data.xland100b import is_hdf5
from agentrl.envs.registry import constructor_args
from agentrl.sources.registry import source_histories
from agentrl.train.checkpoint import complete_steps
from agentrl.train.config import ExperimentConfig


def prepare_dataset(
    config: ExperimentConfig, env: Any, run_dir: Path, progress: bool = True
) -> HistoryDataset:
    """Open ``data.path`` or generate (once) the run's own dataset."""
    data = config.data
    # full checksums on first use, sizes once the run has a checkpoint
    first_use = not complete_steps(Path(run_dir) / "checkpoints")
    if data.path and is_hdf5(data.path):
        return _import_hdf5(config, env, Path(run_dir), progress, first_use)
    if data.path:
        dataset = open_dataset(data.path, verify="full" if first_use else "size")
        _check_same_env(data, dataset.metadata["env"], f"data.path {data.path}")
        _check_same_held_out(data, dataset.metadata, f"data.path {data.path}")
        return dataset
    path = Path(run_dir) / "dataset"
    lead = jax.process_index() == 0
    written = not path.exists()
    if written and lead:
        bar = tqdm(
            total=data.num_tasks, desc="histories", unit="task", disable=not progress
        )
        try:
            args, kwargs = _generation_args(data, env)
            write_dataset(path, *args, progress=bar.update, **kwargs)
        finally:
            bar.close()
    if jax.process_count() > 1:  # the other processes wait for process 0's write
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("agentrl dataset written")
    dataset = open_dataset(path, verify="full" if first_use and not written else "size")
    if not written and not (Path(run_dir) / "config.json").exists():
        # a run stopped before its config.json: the data asked for? (with a
        # config.json, resumable_config compares every data field)
        _check_generated_as_asked(data, env, dataset.metadata, path)
    return dataset


def _check_generated_as_asked(
    data: Any, env: Any, metadata: dict[str, Any], path: Path
) -> None:
    """Refuse the run's own dataset ``path`` if the data config would
    generate other histories (``ValueError`` naming each setting)."""
    where = f"the run's dataset {path}"
    _check_same_env(data, metadata["env"], where)
    histories = _generation_args(data, env)[0][1]
    asked = {
        "source": histories.source,
        "seed": data.seed,
        "num_tasks": data.num_tasks,
        "num_episodes": data.num_episodes,
        "num_train_tasks": data.num_train_tasks,
    }
    there = {k: metadata.get(k) for k in asked}
    if metadata.get("task_space") == "finite":
        asked["split_fraction"] = data.split_fraction
        there["split_fraction"] = metadata["split"]["train_fraction"]
    asked, there = json.loads(json.dumps(asked)), json.loads(json.dumps(there))
    differ = [k for k in asked if asked[k] != there[k]]
    if differ:
        said = "; ".join(f"{k}: {there[k]!r} there, {asked[k]!r} here" for k in differ)
        raise ValueError(
            f"{where} was generated from other data settings ({said}); "
            "remove it to generate these, or train with the settings it has"
        )


def _check_same_env(data: Any, recorded: dict[str, Any], where: str) -> None:
    """Refuse histories (``where`` holds them) of another environment than
    ``data.env`` / ``data.env_args`` (the run is evaluated on the config's)."""
    if recorded["name"] != data.env:
        raise ValueError(
            f"{where} holds {recorded['name']!r} histories but data.env is {data.env!r}"
        )
    saved = constructor_args(data.env, recorded.get("overrides") or {})
    given = constructor_args(data.env, dict(data.env_args))
    differ = sorted(k for k in saved | given if saved.get(k) != given.get(k))
    if differ:
        said = "; ".join(
            f"{k}: {saved.get(k)!r} there, {given.get(k)!r} here" for k in differ
        )
        raise ValueError(
            f"{where} holds {data.env} histories of other "
            f"constructor arguments than data.env_args ({said}); set "
            "data.env_args to the dataset's, or generate data for these"
        )


def _check_same_held_out(data: Any, metadata: dict[str, Any], where: str) -> None:
    """Refuse a dataset (``where`` holds it) imported with another
    ``held_out`` than ``data.held_out``: its split is another one."""
    recorded = xland100b.recorded_held_out(metadata)
    if recorded != data.held_out:
        raise ValueError(
            f"{where} holds rulesets held out with held_out={recorded!r} but "
            f"data.held_out is {data.held_out!r}; set data.held_out={recorded!r}, "
            "or import the file again into a new run_dir"
        )


def _generation_args(data, env) -> tuple[tuple, dict]:
    """Positional ``(env, histories_fn, num_tasks, num_episodes)`` and keyword
    arguments of ``write_dataset`` / ``xland100b.generate_hdf5``: the data
    config's source run on its environment."""
    histories = source_histories(data.source, env, **dict(data.source_args))
    restricted = {}
    if data.num_train_tasks is not None:  # write_dataset's only
        restricted = {"num_train_tasks": data.num_train_tasks}
    return (
        (env, histories, data.num_tasks, data.num_episodes),
        dict(
            seed=data.seed,
            env_name=data.env,
            env_overrides=dict(data.env_args),
            split_fraction=data.split_fraction,
            **restricted,
        ),
    )


def _import_hdf5(config, env, run_dir: Path, progress: bool, first_use: bool):
    """``data.path`` names an XLand-100B-schema file: import it into the run.

    A file that does not exist yet is first generated from the config's
    env and source (agentrl's histories written in that schema). The
    held-out rulesets follow ``data.held_out``; a dataset the run imported
    before with the other one is refused.
    """
    data = config.data
    if data.num_train_tasks is not None:
        raise ValueError(
            "data.num_train_tasks restricts the histories agentrl generates; "
            f"data.path {data.path} is an XLand-100B-schema file (leave "
            "data.num_train_tasks unset)"
        )
    file, path = Path(data.path), run_dir / "dataset"
    if data.held_out == "table" and not file.exists():
        raise ValueError(
            f"data.held_out='table' draws the held-out rulesets of a published "
            f"file from its table; data.path {file} does not exist, and the file "
            "agentrl would generate records its own split, whose held-out "
            "rulesets are outside the file already (leave data.held_out 'file')"
        )
    lead = jax.process_index() == 0
    written = not path.exists()
    if written and lead:
        if not file.exists():
            file.parent.mkdir(parents=True, exist_ok=True)
            args, kwargs = _generation_args(data, env)
            xland100b.generate_hdf5(file, *args, **kwargs)
        bar = tqdm(desc="import", unit="history", disable=not progress)
        try:
            xland100b.import_hdf5(
                file,
                path,
                env_overrides=dict(data.env_args),
                split_fraction=data.split_fraction,
                seed=data.seed,
                progress=bar.update,
                held_out=data.held_out,
            )
        finally:
            bar.close()
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("agentrl dataset imported")
    dataset = open_dataset(path, verify="full" if first_use and not written else "size")
    # the file's env (its env-id, recorded arguments) beside data.env_args:
    # the run acts and is evaluated on data.env_args' env
    _check_same_env(data, dataset.metadata["env"], f"data.path {file}")
    _check_same_held_out(data, dataset.metadata, f"the run's import {path} of {file}")
    return dataset


def make_sampler(config: ExperimentConfig, dataset: HistoryDataset, env: Any):
    """The algorithm's host sampler: its settings (validated) and decoded split.

    A dataset its windows do not fit (a context longer than the histories)
    raises ``ValueError`` naming the algorithm's fields and the data's sizes,
    before anything compiles.
    """
    try:
        return config.algo.make_sampler(dataset, config.train)
    except DatasetIntegrityError:
        raise  # names the damaged file already
    except ValueError as err:
        fields = ", ".join(
            f"algo.{k}={v!r}" for k, v in configtools.field_paths(config.algo).items()
        )
        m = dataset.metadata
        raise ValueError(
            f"cannot draw training windows of algo {config.algo.label!r} ({fields}, "
            f"train.batch_size={config.train.batch_size}) from {dataset.path} "
            f"({m['num_episodes']} episodes of {m['horizon']} steps per history): "
            f"{err}"
        ) from None
