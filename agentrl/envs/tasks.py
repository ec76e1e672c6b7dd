"""Deterministic train / validation / test splits of finite task spaces.

A split is a pure function of ``(num_tasks, train_fraction, seed,
validation_share)`` computed with NumPy's PCG64 generator, so the same
arguments give the same ids on every machine; datasets and runs record the
split they used.

The ids are shuffled once with ``seed``; the first ``round(train_fraction *
num_tasks)`` train, and the rest (the held-out tasks) are cut in two: the
first ``round(validation_share * held_out)`` are *validation* tasks (where
protocol choices such as the acting rule or the checkpoint are made) and the
remainder are *test* tasks (touched once, for the reported number). The
training ids therefore do not depend on ``validation_share``: a three-way
split trains on exactly the tasks of the two-way split with the same seed.
"""

from __future__ import annotations

import dataclasses

import numpy as np

#: Share of the held-out tasks a dataset's split gives to validation.
DEFAULT_VALIDATION_SHARE = 0.5

#: The splits a task can be evaluated on.
EVAL_SPLITS = ("validation", "test")


@dataclasses.dataclass(frozen=True)
class TaskSplit:
    """Task ids for training, validation and held-out testing (disjoint, sorted).

    ``validation`` is empty for a two-way split (``validation_share == 0``,
    or too few held-out tasks).
    """

    train: np.ndarray
    test: np.ndarray
    seed: int
    train_fraction: float
    validation: np.ndarray = dataclasses.field(
        default_factory=lambda: np.zeros((0,), np.int32)
    )
    validation_share: float = 0.0

    def ids(self, which: str) -> np.ndarray:
        """The ids of ``which`` (``"train"``, ``"validation"`` or ``"test"``)."""
        if which not in ("train", *EVAL_SPLITS):
            raise ValueError(
                f"split must be 'train', 'validation' or 'test', got {which!r}"
            )
        return getattr(self, which)

    def to_json(self) -> dict:
        return {
            "train": [int(i) for i in self.train],
            "validation": [int(i) for i in self.validation],
            "test": [int(i) for i in self.test],
            "seed": self.seed,
            "train_fraction": self.train_fraction,
            "validation_share": self.validation_share,
        }

    @classmethod
    def from_json(cls, d: dict) -> TaskSplit:
        """Read :meth:`to_json`'s form."""
        return cls(
            train=np.asarray(d["train"], dtype=np.int32),
            test=np.asarray(d["test"], dtype=np.int32),
            seed=int(d["seed"]),
            train_fraction=float(d["train_fraction"]),
            validation=np.asarray(d["validation"], dtype=np.int32),
            validation_share=float(d["validation_share"]),
        )


def split_task_ids(
    num_tasks: int,
    train_fraction: float,
    seed: int,
    validation_share: float = 0.0,
) -> TaskSplit:
    """Shuffle ``[0, num_tasks)`` with ``seed``; cut train / validation / test.

    Train and test get at least one task each when ``num_tasks >= 2``;
    validation gets at least one when ``validation_share > 0`` and at least
    two tasks are held out, none (a two-way split) when only one is.
    """
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    if not 0.0 <= validation_share < 1.0:
        raise ValueError(f"validation_share must be in [0, 1), got {validation_share}")
    if num_tasks < 2:
        raise ValueError(f"num_tasks must be >= 2 to split, got {num_tasks}")
    perm = np.random.default_rng(seed).permutation(num_tasks)
    n_train = min(max(int(round(train_fraction * num_tasks)), 1), num_tasks - 1)
    held_out = perm[n_train:]
    n_val = 0
    if validation_share > 0 and len(held_out) >= 2:
        n_val = round(validation_share * len(held_out))
        n_val = min(max(int(n_val), 1), len(held_out) - 1)
    return TaskSplit(
        train=np.sort(perm[:n_train]).astype(np.int32),
        test=np.sort(held_out[n_val:]).astype(np.int32),
        seed=int(seed),
        train_fraction=float(train_fraction),
        validation=np.sort(held_out[:n_val]).astype(np.int32),
        validation_share=float(validation_share),
    )
