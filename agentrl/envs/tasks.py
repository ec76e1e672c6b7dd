"""Deterministic train/test splits of finite task spaces.

A split is a pure function of ``(num_tasks, train_fraction, seed)`` computed
with NumPy's PCG64 generator, so the same arguments give the same ids on every
machine; datasets and runs record the split they used.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class TaskSplit:
    """Task ids for training and held-out testing (disjoint, sorted)."""

    train: np.ndarray
    test: np.ndarray
    seed: int
    train_fraction: float

    def to_json(self) -> dict:
        return {
            "train": [int(i) for i in self.train],
            "test": [int(i) for i in self.test],
            "seed": self.seed,
            "train_fraction": self.train_fraction,
        }

    @classmethod
    def from_json(cls, d: dict) -> TaskSplit:
        return cls(
            train=np.asarray(d["train"], dtype=np.int32),
            test=np.asarray(d["test"], dtype=np.int32),
            seed=int(d["seed"]),
            train_fraction=float(d["train_fraction"]),
        )


def split_task_ids(num_tasks: int, train_fraction: float, seed: int) -> TaskSplit:
    """Shuffle ``[0, num_tasks)`` with ``seed`` and cut at ``train_fraction``.

    Both sides get at least one task when ``num_tasks >= 2``.
    """
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    if num_tasks < 2:
        raise ValueError(f"num_tasks must be >= 2 to split, got {num_tasks}")
    perm = np.random.default_rng(seed).permutation(num_tasks)
    n_train = min(max(int(round(train_fraction * num_tasks)), 1), num_tasks - 1)
    return TaskSplit(
        train=np.sort(perm[:n_train]).astype(np.int32),
        test=np.sort(perm[n_train:]).astype(np.int32),
        seed=int(seed),
        train_fraction=float(train_fraction),
    )
