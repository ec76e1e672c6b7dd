"""Open a history dataset: integrity check, metadata, records, histories.

>>> ds = open_dataset("data/darkroom_q")        # verifies every file
>>> ds.metadata["source"], ds.num_records("train")
>>> history = ds.load_history("train", indices=[0, 1])   # numpy History

Records are read with ``tfds.data_source`` (random access into ArrayRecord
files) and decoded without TensorFlow. Opening checks that ``agentrl.json``
exists (an interrupted write never leaves one) and that every file it lists
has its recorded size and, with ``verify="full"`` (the default), its SHA-256;
a mismatch raises :class:`DatasetIntegrityError` naming the file.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import numpy as np

from agentrl.data.features import records_to_history
from agentrl.data.writer import FORMAT_VERSION, METADATA_FILE, sha256

VERIFY_CHOICES = ("full", "size", "none")


class DatasetIntegrityError(ValueError):
    """A dataset is incomplete, truncated or was modified after writing."""


def verify_files(path: Path, metadata: dict[str, Any], mode: str = "full") -> None:
    """Check size (and SHA-256 when ``mode == "full"``) of every listed file."""
    if mode not in VERIFY_CHOICES:
        raise ValueError(f"`verify` must be one of {VERIFY_CHOICES}, got {mode!r}")
    if mode == "none":
        return
    for name, expected in metadata["files"].items():
        file = path / name
        if not file.is_file():
            raise DatasetIntegrityError(f"{file}: missing file listed in metadata")
        size = file.stat().st_size
        if size != expected["bytes"]:
            raise DatasetIntegrityError(
                f"{file}: size {size} bytes, expected {expected['bytes']} "
                "(truncated or modified)"
            )
        if mode == "full" and sha256(file) != expected["sha256"]:
            raise DatasetIntegrityError(
                f"{file}: SHA-256 does not match the metadata (modified)"
            )


class HistoryDataset:
    """A dataset written by :func:`~agentrl.data.writer.write_dataset`."""

    def __init__(self, path: str | Path, verify: str = "full"):
        self.path = Path(path)
        meta_file = self.path / METADATA_FILE
        if not self.path.is_dir():
            raise FileNotFoundError(f"{self.path}: no such dataset directory")
        if not meta_file.is_file():
            raise DatasetIntegrityError(
                f"{meta_file}: missing; {self.path} is not a complete agentrl "
                "dataset (interrupted write?)"
            )
        try:
            self.metadata: dict[str, Any] = json.loads(meta_file.read_text())
        except json.JSONDecodeError as err:
            raise DatasetIntegrityError(f"{meta_file}: unreadable ({err})") from err
        if self.metadata.get("format_version") != FORMAT_VERSION:
            raise DatasetIntegrityError(
                f"{meta_file}: format_version {self.metadata.get('format_version')}"
                f", this agentrl reads {FORMAT_VERSION}"
            )
        verify_files(self.path, self.metadata, verify)
        self._sources: dict[str, Any] = {}

    # ----------------------------------------------------------- metadata
    @property
    def splits(self) -> list[str]:
        return list(self.metadata["task_ids"])

    def task_ids(self, split: str) -> np.ndarray:
        """``[record]`` task id of each record of ``split``."""
        self._check_split(split)
        return np.asarray(self.metadata["task_ids"][split], np.int32)

    def num_records(self, split: str) -> int:
        return len(self.task_ids(split))

    @property
    def num_steps(self) -> int:
        return int(self.metadata["num_steps"])

    @property
    def horizon(self) -> int:
        return int(self.metadata["horizon"])

    @functools.cached_property
    def env(self) -> Any:
        """The environment, rebuilt from the recorded name and overrides."""
        from agentrl import envs

        return envs.make(
            self.metadata["env"]["name"], **self.metadata["env"]["overrides"]
        )

    def _check_split(self, split: str) -> None:
        if split not in self.metadata["task_ids"]:
            raise ValueError(
                f"`split` must be one of {self.splits} for {self.path}, got {split!r}"
            )

    # ------------------------------------------------------------ records
    def source(self, split: str) -> Any:
        """The ``tfds.data_source`` of ``split`` (random access, numpy records)."""
        self._check_split(split)
        if split not in self._sources:
            import tensorflow_datasets as tfds

            builder = tfds.builder_from_directory(str(self.path))
            self._sources[split] = builder.as_data_source(split=split)
        return self._sources[split]

    def record(self, split: str, index: int) -> dict[str, Any]:
        """Record ``index`` of ``split``: ``{field: [step, ...]}``, numpy."""
        return self.source(split)[int(index)]

    def records(self, split: str, indices) -> list[dict[str, Any]]:
        source = self.source(split)
        return source.__getitems__([int(i) for i in indices])

    def load_history(self, split: str = "train", indices=None) -> Any:
        """A numpy :class:`~agentrl.history.History` of some records.

        Leaves ``[record, step, ...]``; ``params`` is rebuilt as the env's
        params pytree. Loads every record of ``split`` when ``indices`` is None.
        """
        if indices is None:
            indices = range(self.num_records(split))
        records = self.records(split, list(indices))
        return records_to_history(records, self.env.default_params)

    def summary(self) -> dict[str, Any]:
        """Metadata plus sizes, for ``agentrl data info``."""
        m = self.metadata
        return {
            "path": str(self.path),
            "env": m["env"],
            "source": m["source"],
            "seed": m["seed"],
            "agentrl_version": m["agentrl_version"],
            "created": m["created"],
            "records": {s: self.num_records(s) for s in self.splits},
            "episodes_per_history": m["num_episodes"],
            "steps_per_history": m["num_steps"],
            "transitions": sum(self.num_records(s) for s in self.splits)
            * m["num_steps"],
            "task_space": m["task_space"],
            "split": {
                "seed": m["split"]["seed"],
                "train_fraction": m["split"]["train_fraction"],
                "train_tasks": len(m["split"]["train"]),
                "test_tasks": len(m["split"]["test"]),
            },
            "bytes": sum(f["bytes"] for f in m["files"].values()),
            "files": {k: v["bytes"] for k, v in m["files"].items()},
        }


def open_dataset(path: str | Path, verify: str = "full") -> HistoryDataset:
    """Open and verify the dataset at ``path`` (see the module docstring)."""
    return HistoryDataset(path, verify=verify)
