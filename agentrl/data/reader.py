"""Open a history dataset: integrity check, metadata, records, histories.

>>> ds = open_dataset("data/darkroom_q")        # verifies every file
>>> ds.metadata["source"], ds.num_records("train")
>>> history = ds.load_history("train", indices=[0, 1])   # numpy History

Records are read with ``tfds.data_source`` (random access into ArrayRecord
files) and decoded without TensorFlow. Opening checks that ``agentrl.json``
exists (an interrupted write never leaves one), that it is well formed (every
key the reader uses, with its type; sizes that agree; file names that stay
inside the dataset directory: no ``..``, absolute paths or separators) and
that every file it lists has its recorded size and, with ``verify="full"``
(the default), its SHA-256. Opening a split checks that the files TFDS would
read are the dataset's own, listed ones. Values are checked at first read:
every record :meth:`HistoryDataset.records` returns has finite floats (no
NaN/inf); :meth:`HistoryDataset.check_values` (``agentrl data verify``)
reads them all. Whatever is wrong raises :class:`DatasetIntegrityError`
naming the file, never an error from inside TFDS, ArrayRecord or json.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

import agentrl.envs as envs
from agentrl.checks import is_int
from agentrl.data.features import load_tfds, records_to_history
from agentrl.data.files import FORMAT_VERSION, METADATA_FILE, sha256

VERIFY_CHOICES = ("full", "size", "none")


class DatasetIntegrityError(ValueError):
    """A dataset is incomplete, truncated, malformed or was modified after writing."""


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _first_line(err: BaseException) -> str:
    """``"TypeName: first line of the message"`` (library errors can be long)."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}"[:400]


def check_file_name(meta_file: Path, name: Any) -> None:
    """Refuse a listed file name that could point outside the dataset directory."""
    bad = (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or "/" in name
        or "\\" in name
        or "\0" in name
        or Path(name).is_absolute()
    )
    if bad:
        raise DatasetIntegrityError(
            f"{meta_file}: file entry {name!r} is not a plain file name in the "
            "dataset directory (no '..', absolute paths or path separators)"
        )


def _need(meta_file: Path, cond: bool, what: str) -> None:
    if not cond:
        raise DatasetIntegrityError(f"{meta_file}: {what} (modified or damaged)")


def check_metadata(meta_file: Path, m: Any) -> None:
    """Check the metadata's shape: every key the reader uses, with its type.

    Raises :class:`DatasetIntegrityError` naming ``meta_file`` and the key.
    """
    _check_header(meta_file, m)
    _check_task_ids(meta_file, m)
    _check_file_entries(meta_file, m)


def _check_header(meta_file: Path, m: Any) -> None:
    """A JSON object; format version, env, source, sizes, seed, flags."""
    need = functools.partial(_need, meta_file)
    need(isinstance(m, dict), f"must hold a JSON object, got {type(m).__name__}")
    need(
        m.get("format_version") == FORMAT_VERSION,
        f"format_version {m.get('format_version')!r}, this agentrl reads "
        f"{FORMAT_VERSION}",
    )
    for key, fields in (("env", "overrides"), ("source", "settings")):
        named = m.get(key)
        need(
            isinstance(named, dict)
            and isinstance(named.get("name"), str)
            and isinstance(named.get(fields), dict),
            f"{key!r} must be {{'name': str, {fields!r}: {{...}}}}, got {named!r}",
        )
    for key in ("num_tasks", "num_episodes", "horizon", "num_steps"):
        need(
            is_int(m.get(key), 1),
            f"{key!r} must be an integer >= 1, got {m.get(key)!r}",
        )
    seed = m.get("seed")
    need(is_int(seed, 0), f"'seed' must be an integer >= 0, got {seed!r}")
    need(
        m["num_steps"] == m["num_episodes"] * m["horizon"],
        f"'num_steps' {m['num_steps']} must be num_episodes x horizon = "
        f"{m['num_episodes']} x {m['horizon']}",
    )
    for key in ("agentrl_version", "created"):
        need(isinstance(m.get(key), str), f"{key!r} must be a string")
    need(
        m.get("task_space") in ("finite", "continuous"),
        f"'task_space' must be 'finite' or 'continuous', got {m.get('task_space')!r}",
    )
    for key in ("stateless_obs", "has_optimal_action", "has_next_obs"):
        need(
            isinstance(m.get(key, False), bool),
            f"{key!r} must be true or false, got {m.get(key)!r}",
        )


def _check_task_ids(meta_file: Path, m: dict[str, Any]) -> None:
    """The recorded split and each split's task ids (finite: in the train split)."""
    need = functools.partial(_need, meta_file)
    split = m.get("split")
    need(
        isinstance(split, dict)
        and all(
            isinstance(split.get(k), list) and all(is_int(i, 0) for i in split[k])
            for k in ("train", "validation", "test")
        )
        and is_int(split.get("seed"), 0)
        and isinstance(split.get("train_fraction"), int | float),
        "'split' must be {'train': [id, ...], 'validation': [id, ...], "
        "'test': [id, ...], 'seed', 'train_fraction', ...}",
    )
    task_ids = m.get("task_ids")
    need(
        isinstance(task_ids, dict)
        and task_ids
        and all(
            isinstance(v, list) and all(is_int(i, 0) for i in v)
            for v in task_ids.values()
        ),
        "'task_ids' must map each split to a list of task ids >= 0",
    )
    if m["task_space"] == "finite":
        allowed = set(split["train"])
        stray = sorted({i for v in task_ids.values() for i in v} - allowed)
        need(not stray, f"task ids {stray[:5]} are not in the recorded train split")


def _check_file_entries(meta_file: Path, m: dict[str, Any]) -> None:
    """Each listed file: a plain name with its size and SHA-256."""
    need = functools.partial(_need, meta_file)
    files = m.get("files")
    need(isinstance(files, dict) and files, "'files' must list the dataset's files")
    for name, entry in files.items():
        check_file_name(meta_file, name)
        need(
            isinstance(entry, dict)
            and is_int(entry.get("bytes"), 0)
            and isinstance(entry.get("sha256"), str)
            and _SHA256.fullmatch(entry["sha256"]) is not None,
            f"file entry {name!r} must be {{'bytes': int, 'sha256': hex digest}}, "
            f"got {entry!r}",
        )


def verify_files(path: Path, metadata: dict[str, Any], mode: str = "full") -> None:
    """Check size (and SHA-256 when ``mode == "full"``) of every listed file."""
    if mode not in VERIFY_CHOICES:
        raise ValueError(f"`verify` must be one of {VERIFY_CHOICES}, got {mode!r}")
    if mode == "none":
        return
    for name, expected in metadata["files"].items():
        check_file_name(path / METADATA_FILE, name)
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


def _non_finite(tree: Any, prefix: str = "") -> str | None:
    """The name of the first float array of ``tree`` with NaN/inf, else None."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            bad = _non_finite(value, f"{prefix}{key}.")
            if bad is not None:
                return bad
        return None
    x = np.asarray(tree)
    if np.issubdtype(x.dtype, np.floating) and not np.isfinite(x).all():
        return prefix.rstrip(".")
    return None


class HistoryDataset:
    """A dataset written by :func:`~agentrl.data.writer.write_dataset`."""

    def __init__(self, path: str | Path, verify: str = "full"):
        self.path = Path(path)
        meta_file = self.path / METADATA_FILE
        if self.path.exists() and not self.path.is_dir():
            raise DatasetIntegrityError(
                f"{self.path}: is a file, not a dataset directory"
            )
        if not self.path.is_dir():
            raise FileNotFoundError(f"{self.path}: no such dataset directory")
        if not meta_file.is_file():
            raise DatasetIntegrityError(
                f"{meta_file}: missing; {self.path} is not a complete agentrl "
                "dataset (interrupted write?)"
            )
        try:
            self.metadata: dict[str, Any] = json.loads(meta_file.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise DatasetIntegrityError(f"{meta_file}: unreadable ({err})") from None
        check_metadata(meta_file, self.metadata)
        verify_files(self.path, self.metadata, verify)
        self._sources: dict[str, Any] = {}
        self._shards: dict[str, list[tuple[int, Path]]] = {}

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
        env = self.metadata["env"]
        try:
            return envs.make(env["name"], **env["overrides"])
        except (ValueError, TypeError) as err:
            raise DatasetIntegrityError(
                f"{self.path / METADATA_FILE}: its environment {env['name']!r} "
                f"with overrides {env['overrides']} cannot be built: {err}"
            ) from None

    def _check_split(self, split: str) -> None:
        if split not in self.metadata["task_ids"]:
            raise ValueError(
                f"`split` must be one of {self.splits} for {self.path}, got {split!r}"
            )

    # ------------------------------------------------------------ records
    def source(self, split: str) -> Any:
        """The ``tfds.data_source`` of ``split`` (random access, numpy records).

        Only the dataset's own files are opened: every file TFDS's metadata
        names for ``split`` must lie in the dataset directory and be listed
        in ``agentrl.json``, and hold as many records as it lists task ids.
        """
        self._check_split(split)
        if split not in self._sources:
            tfds = load_tfds()
            try:
                builder = tfds.builder_from_directory(str(self.path))
                info = builder.info.splits[split]
                paths = [Path(str(p)) for p in info.filepaths]
                lengths = [int(n) for n in info.shard_lengths]
            except Exception as err:  # TFDS raises many kinds on bad metadata
                raise DatasetIntegrityError(
                    f"{self.path}: TFDS metadata (dataset_info.json, "
                    f"features.json) unreadable for split {split!r}: "
                    f"{_first_line(err)}"
                ) from None
            listed = self.metadata["files"]
            for file in paths:
                if file.parent.resolve() != self.path.resolve() or (
                    file.name not in listed
                ):
                    raise DatasetIntegrityError(
                        f"{self.path / 'dataset_info.json'}: split {split!r} names "
                        f"{file}, which is not one of the dataset's files"
                    )
            if sum(lengths) != self.num_records(split):
                raise DatasetIntegrityError(
                    f"{self.path}: split {split!r} holds {sum(lengths)} records "
                    f"but {METADATA_FILE} lists {self.num_records(split)} task ids"
                )
            try:
                source = builder.as_data_source(split=split)
            except Exception as err:
                raise DatasetIntegrityError(
                    f"{', '.join(map(str, paths))}: cannot open split {split!r}: "
                    f"{_first_line(err)}"
                ) from None
            self._shards[split] = list(
                zip(np.cumsum(lengths).tolist(), paths, strict=True)
            )
            self._sources[split] = source
        return self._sources[split]

    def _shard_of(self, split: str, index: int) -> Path:
        """The file that holds record ``index`` of ``split``."""
        return next(
            (p for end, p in self._shards[split] if index < end),
            self._shards[split][-1][1],
        )

    def record(self, split: str, index: int) -> dict[str, Any]:
        """Record ``index`` of ``split``: ``{field: [step, ...]}``, numpy."""
        return self.records(split, [index])[0]

    def records(self, split: str, indices) -> list[dict[str, Any]]:
        """Records ``indices`` of ``split``, each checked for NaN/inf values."""
        source = self.source(split)
        n = len(self.metadata["task_ids"][split])
        indices = [int(i) for i in indices]
        bad = [i for i in indices if not -n <= i < n]
        if bad:
            raise IndexError(
                f"records {bad[:5]} of split {split!r} of {self.path}: the split "
                f"has {n} records"
            )
        indices = [i % n for i in indices]
        try:
            records = source.__getitems__(indices)
        except Exception as err:  # ArrayRecord / TFDS decoding errors
            files = sorted({str(self._shard_of(split, i)) for i in indices})
            raise DatasetIntegrityError(
                f"{', '.join(files)}: cannot read records of split {split!r} "
                f"({_first_line(err)}); the file is damaged (`agentrl "
                f"data verify {self.path}` checks every file)"
            ) from None
        for i, record in zip(indices, records, strict=True):
            bad = _non_finite(record)
            if bad is not None:
                raise DatasetIntegrityError(
                    f"{self._shard_of(split, i)}: record {i} of split {split!r} "
                    f"has non-finite values (NaN or inf) in {bad!r}"
                )
        return records

    def check_values(self, chunk: int = 256) -> dict[str, int]:
        """Read every record of every split (decodable, finite); ``{split: n}``."""
        counts = {}
        for split in self.splits:
            n = self.num_records(split)
            for lo in range(0, n, chunk):
                self.records(split, range(lo, min(lo + chunk, n)))
            counts[split] = n
        return counts

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
                # the distinct tasks the training histories were made on
                "distinct_train_tasks": len(set(m["task_ids"].get("train", []))),
            },
            "bytes": sum(f["bytes"] for f in m["files"].values()),
            "files": {k: v["bytes"] for k, v in m["files"].items()},
        }


def open_dataset(path: str | Path, verify: str = "full") -> HistoryDataset:
    """Open and verify the dataset at ``path`` (see the module docstring)."""
    return HistoryDataset(path, verify=verify)
