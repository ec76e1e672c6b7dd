"""How much learning a dataset's histories hold: episode returns along them.

Algorithm Distillation imitates improvement, so histories whose returns do
not rise leave it nothing to distil (docs/mujoco.md: SAC's 12,000-step
HalfCheetah-Vel histories rose by about a quarter and AD played their last
gait from the first episode). :func:`learning_summary` reads every record of
a split and says how the returns move from the start of the histories to
their end; ``agentrl data info PATH --learning`` prints it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from agentrl.checks import is_int


def record_episode_returns(
    record: dict[str, Any], whole_only: bool = True
) -> np.ndarray:
    """``[episode]`` float64: the return of each episode of one record, in
    order. With ``whole_only`` an episode the history cut off (its last step
    neither terminated nor truncated) is left out."""
    episode = np.asarray(record["episode"], np.int64)
    returns = np.bincount(episode, weights=np.asarray(record["reward"], np.float64))
    ended = np.asarray(record["terminated"], bool) | np.asarray(
        record["truncated"], bool
    )
    if whole_only and returns.size and not ended[-1]:
        returns = returns[:-1]
    return returns


def returns_by_record(
    dataset: Any, split: str = "train", chunk: int = 256, whole_only: bool = True
) -> Iterator[np.ndarray]:
    """Each record's :func:`record_episode_returns`, reading ``chunk`` records
    at a time (the dataset is never decoded whole)."""
    num = dataset.num_records(split)
    for lo in range(0, num, chunk):
        for record in dataset.records(split, range(lo, min(lo + chunk, num))):
            yield record_episode_returns(record, whole_only)


def rank_correlation(x: np.ndarray) -> float:
    """Spearman correlation of ``x [episode]`` with the episode index (NaN
    under two episodes or a constant ``x``). Tied returns share their mean
    rank: Dark Room's and the bandits' returns tie all the time, and ranks
    broken by order would rise with the episode index, reading flat data
    as learning (random Dark Room play once read 0.79)."""
    if x.size < 2 or np.all(x == x[0]):
        return float("nan")
    return float(np.corrcoef(np.arange(x.size), _mean_ranks(x))[0, 1])


def _mean_ranks(x: np.ndarray) -> np.ndarray:
    """``[n]`` ranks of ``x [n]`` from 0, ties given the mean of their ranks."""
    values, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts  # the lowest rank of each distinct value
    return (first + (counts - 1) / 2.0)[inverse]


def _parts(dataset: Any, split: str, bins: int) -> tuple[np.ndarray, np.ndarray, int]:
    """``(parts [history, bins], correlations [history], fewest)`` in one
    streaming pass: each history's episodes in ``bins`` parts, averaged (a
    history of fewer episodes is left out of ``parts``), its rank
    correlation, and the fewest whole episodes of any history. Holds
    ``bins`` numbers a history, not its episodes."""
    parts, correlations, fewest = [], [], None
    for returns in returns_by_record(dataset, split):
        fewest = returns.size if fewest is None else min(fewest, returns.size)
        if returns.size >= bins:
            parts.append([p.mean() for p in np.array_split(returns, bins)])
        correlations.append(rank_correlation(returns))
    if fewest is None:
        raise ValueError(f"split {split!r} of {dataset.path} has no records")
    return np.asarray(parts).reshape(-1, bins), np.asarray(correlations), fewest


def learning_summary(dataset: Any, split: str = "train", bins: int = 10) -> dict:
    """How the episode returns of ``split``'s histories move along them.

    Each history's whole episodes are cut, in order, into ``bins`` nearly
    equal parts (``np.array_split``; fewer parts if a history has fewer
    episodes) and averaged in each; ``curve [bins]`` is the mean over
    histories. Returns ``{"split", "histories", "episodes" (whole episodes
    of the shortest history), "bins" (parts used), "curve", "first", "last",
    "rise" (last - first), "rising" (share of histories whose last part
    beats their first), "rank_correlation" (mean over histories of the
    Spearman correlation of return with episode: 1 a steady rise, 0 none)}``.
    Reads the split once (twice if a history has fewer than ``bins`` whole
    episodes), keeping ``bins`` numbers a history. Raises ``ValueError`` for
    ``bins`` < 2, an empty split or a history of fewer than 2 whole
    episodes.
    """
    if not is_int(bins, 2):
        raise ValueError(f"bins must be an int >= 2, got {bins!r}")
    parts, correlations, fewest = _parts(dataset, split, bins)
    if fewest < bins:  # a short history: every history in that many parts
        if fewest < 2:
            raise ValueError(
                f"a history of split {split!r} of {dataset.path} has {fewest} "
                "whole episode(s): no movement along it to summarise"
            )
        bins = fewest
        parts, correlations, fewest = _parts(dataset, split, bins)
    curve = parts.mean(0)
    finite = np.isfinite(correlations)
    return {
        "split": split,
        "histories": len(parts),
        "episodes": int(fewest),
        "bins": bins,
        "curve": [float(v) for v in curve],
        "first": float(curve[0]),
        "last": float(curve[-1]),
        "rise": float(curve[-1] - curve[0]),
        "rising": float(np.mean(parts[:, -1] > parts[:, 0])),
        "rank_correlation": float(correlations[finite].mean())
        if finite.any()
        else float("nan"),
    }
