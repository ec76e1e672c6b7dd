"""Training batches from a history dataset: AD windows and DPT samples.

Both samplers are pure functions of ``(seed, step)``: ``sampler.batch(step)``
draws its rows and offsets from ``np.random.default_rng([seed, step])``, so
resuming a run at step ``k`` is ``sampler.iterator(start_step=k)``. Batches
are numpy dicts; pass ``sharding`` (e.g. :func:`data_sharding` of a mesh with
a ``"data"`` axis) to get them ``jax.device_put`` on the mesh instead.

:class:`ADSampler` (Algorithm Distillation / AD-ε / T2MIR): ``num_episodes``
consecutive whole episodes at a random episode boundary, or
``num_transitions`` consecutive steps at a random offset; ``episode_stride=k``
takes every k-th episode instead (episodes ``e, e + k, ...``), so a window
shows k episodes of the source's progress per episode and the model is asked
to learn k times faster than the algorithm that made the data.
``window_start="any"`` (what AD uses, as the AD-ε reference code does)
starts an episode window at any step, not only at an episode's first: at
evaluation the model's rolling context starts wherever the last
``num_episodes * horizon`` steps begin, mid-episode as often as not::

    obs [B, T, ...], action [B, T, ...], reward [B, T], done [B, T],
    mask [B, T] (False on padding after short episodes), task_id [B]

``paired=True`` (both samplers) draws ``B / 2`` tasks and two windows (or
context sets) of each, in rows ``2i, 2i + 1`` (for T2MIR's contrastive task
loss), from two *different* histories of the task wherever the data hold
several (:func:`pair_rows`): the positives of the contrastive loss are then
different samples of one task, and a paired batch sees as many distinct
histories as an unpaired one.

:class:`DPTSampler` (DPT): a context of ``context_size`` consecutive
transitions of one history, a query state from the same history and the
oracle's action there::

    context_obs [B, N, ...], context_action [B, N, ...], context_reward [B, N],
    context_next_obs [B, N, ...], query_obs [B, ...], label [B, ...], task_id [B]

A context step's successor is read as the next stored step's observation,
so the context skips the steps where the history does not hold it: episode
ends by truncation only (the time limit: the episode would have gone on
from a state it never shows) and a history's last step (which may end it
mid-episode). A terminated step stays, its successor read as the next
episode's first observation (nothing follows a terminal state): the XLand
DPT baseline's rule, under which the goal's reward, given on the
terminated step, is in training contexts; evaluation's context reads the
same (:func:`~agentrl.data.device_sampler.valid_tables`). Where observations
never change (bandits) ``next_obs == obs``, and where the dataset stores
every step's successor (``next_obs``: DPT's uniform roll-in of independent
transitions) the context is any consecutive steps.

Every batch is checked against the sampler's ``batch_shapes`` (the shapes
above, ``...`` for trailing axes) with ``chex.assert_shape`` before it leaves
the sampler (:func:`check_batch`).

Records are decoded once into memory when the decoded split (estimated
from its first record; the files are compressed several times smaller) is
at most ``cache_bytes`` (default 2 GiB), all at once with no per-record loop
(:func:`~agentrl.data.columns.split_columns`), else read per batch from the
ArrayRecord files through ``tfds.data_source``; ``iterator`` prefetches
batches on ``grain`` threads.
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import numpy as np

from agentrl.checks import is_int
from agentrl.data.columns import split_columns
from agentrl.data.device_sampler import (
    check_episode_counts,
    skip_window,
    spec_of,
    valid_tables,
)
from agentrl.data.reader import HistoryDataset

DEFAULT_CACHE_BYTES = 2 << 30


def data_sharding(mesh: Any, axis: str = "data") -> Any:
    """``NamedSharding`` splitting the leading (batch) axis over ``axis``."""
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(axis))


class _Sampler:
    """Shared plumbing: record access, determinism, placement, iteration."""

    fields: tuple[str, ...] = ()

    def __init__(self, dataset, batch_size, split, seed, sharding, cache_bytes):
        if not isinstance(dataset, HistoryDataset):
            raise ValueError("`dataset` must be a HistoryDataset (open_dataset(path))")
        if not is_int(batch_size, 1):
            raise ValueError(f"`batch_size` must be an integer >= 1, got {batch_size}")
        if not is_int(seed, 0):
            raise ValueError(f"`seed` must be an integer >= 0, got {seed!r}")
        devices = _data_devices(sharding)
        if batch_size % devices:
            raise ValueError(
                f"`batch_size` {batch_size} must be divisible by the {devices} "
                "devices of the sharding's data axis"
            )
        self.dataset, self.batch_size, self.split = dataset, batch_size, split
        self.seed, self.sharding = seed, sharding
        self.num_records = dataset.num_records(split)
        if self.num_records == 0:
            raise ValueError(f"split {split!r} of {dataset.path} has no records")
        self.num_steps = dataset.num_steps
        self.task_ids = dataset.task_ids(split)  # per record
        self._cache, self._flags = None, None
        if cache_bytes is None:  # read at call time: tests may lower it
            cache_bytes = DEFAULT_CACHE_BYTES
        if self.decoded_bytes() <= cache_bytes:
            self._cache = self._decode_split()

    def decoded_bytes(self) -> int:
        """The split's size decoded (what the cache holds), estimated as its
        first record's: the files on disk are compressed, often 7-10x smaller."""
        first = self._decode(np.zeros(1, np.int64))
        leaves = jax.tree.leaves({f: first[f] for f in self.fields if f != "task_id"})
        return sum(x.nbytes for x in leaves) * self.num_records

    def _decode_split(self) -> dict[str, Any]:
        """Every record, decoded at once (``split_columns``)."""
        arrays = tuple(f for f in self.fields if f != "task_id")
        data = split_columns(self.dataset, self.split, arrays)
        for f in ("terminated", "truncated"):
            data[f] = data[f].astype(bool)
        return {**data, "task_id": self.task_ids}

    def decoded(self) -> dict[str, Any]:
        """Every record of the split, ``{field: [R, step, ...]}`` (numpy): the
        in-memory cache, or decoded now when the split is not cached."""
        if self._cache is not None:
            return self._cache
        return self._decode_split()

    def record_columns(self, fields: tuple[str, ...], chunk: int = 256) -> dict:
        """``{field: [R, step, ...]}`` of every record: the cache's, or
        decoded ``chunk`` records at a time."""
        if self._cache is not None:
            return {f: self._cache[f] for f in fields}
        parts: dict[str, list] = {f: [] for f in fields}
        for lo in range(0, self.num_records, chunk):
            rows = np.arange(lo, min(lo + chunk, self.num_records))
            got = self._fetch(rows, fields)
            for f in fields:
                parts[f].append(got[f])
        return {f: np.concatenate(v) for f, v in parts.items()}

    def episode_flags(self, chunk: int = 256) -> dict[str, np.ndarray]:
        """``{"terminated", "truncated"}``, ``[R, step]`` bool, of every record
        (read once: a streamed split's is a pass over its files)."""
        if self._flags is None:
            self._flags = self.record_columns(("terminated", "truncated"), chunk)
        return self._flags

    def done_flags(self, chunk: int = 256) -> np.ndarray:
        """``[R, step]`` bool: episode ends (terminated or truncated) of every
        record."""
        flags = self.episode_flags(chunk)
        return np.logical_or(flags["terminated"], flags["truncated"])

    @property
    def cached(self) -> bool:
        """Whether the split is decoded in memory (else read per batch)."""
        return self._cache is not None

    def _decode(self, rows: np.ndarray) -> dict[str, Any]:
        records = self.dataset.records(self.split, rows)
        for r in records:
            for f in ("terminated", "truncated"):
                r[f] = np.asarray(r[f]).astype(bool)
        return {
            f: jax.tree.map(lambda *x: np.stack(x), *[r[f] for r in records])
            for f in self.fields
        }

    def _fetch(
        self,
        rows: np.ndarray,
        fields: tuple[str, ...] | None = None,
        idx: np.ndarray | None = None,
    ) -> dict[str, Any]:
        """``{field: [len(rows), step, ...]}`` of records ``rows``.

        ``fields``: only these (default all); ``idx [len(rows), T]``: only
        these steps of each row (``[len(rows), T, ...]``; per-record fields
        such as ``task_id`` stay ``[len(rows), ...]``). From the in-memory
        cache this gathers just the window, never whole histories.
        """
        fields = self.fields if fields is None else fields

        def cut(x, r):
            if idx is None or x.ndim < 2 or x.shape[1] != self.num_steps:
                return x[r] if r is not None else x
            if r is None:
                return _take(x, idx)
            return x[r[:, None], idx]

        if self._cache is not None:
            return {
                f: jax.tree.map(lambda x: cut(x, rows), self._cache[f]) for f in fields
            }
        unique, inverse = np.unique(rows, return_inverse=True)
        data = self._decode(unique)
        return {
            f: jax.tree.map(lambda x: cut(x[inverse], None), data[f]) for f in fields
        }

    def rng(self, step: int) -> np.random.Generator:
        if step < 0:
            raise ValueError(f"`step` must be >= 0, got {step}")
        return np.random.default_rng([self.seed, int(step)])

    @property
    def batch_shapes(self) -> dict[str, tuple]:
        """``{field: chex shape}`` of every batch (see :func:`check_batch`)."""
        raise NotImplementedError

    def host_batch(self, step: int) -> dict[str, Any]:
        raise NotImplementedError

    def place(self, batch: dict[str, Any]) -> dict[str, Any]:
        if self.sharding is None:
            return batch
        return jax.device_put(batch, self.sharding)

    def batch(self, step: int) -> dict[str, Any]:
        """The batch of training step ``step`` (numpy, or placed on ``sharding``)."""
        return self.place(self.host_batch(step))

    __call__ = batch

    def iterator(self, start_step: int = 0, num_threads: int = 2, prefetch: int = 4):
        """Batches of steps ``start_step, start_step + 1, ...`` (grain-prefetched)."""
        import grain

        ds = grain.MapDataset.range(start_step, 1 << 62).map(self.host_batch)
        options = grain.ReadOptions(
            num_threads=num_threads, prefetch_buffer_size=prefetch
        )
        for batch in ds.to_iter_dataset(options):
            yield self.place(batch)


def check_batch(batch: dict[str, Any], shapes: dict[str, tuple]) -> dict[str, Any]:
    """Assert that ``batch`` has exactly the fields of ``shapes``, each shaped so.

    ``shapes[field]`` is a chex shape (``...`` matches any trailing axes),
    applied to every leaf of the field (observations may be dicts). Raises
    ``AssertionError`` naming the field; returns ``batch``.
    """
    chex.assert_equal(
        sorted(batch), sorted(shapes), custom_message="batch fields differ"
    )
    for name, shape in shapes.items():
        leaves = jax.tree.leaves(batch[name])
        chex.assert_shape(leaves, shape, custom_message=f"batch field {name!r}")
    return batch


def _data_devices(sharding: Any) -> int:
    if sharding is None:
        return 1
    mesh = getattr(sharding, "mesh", None)
    spec = getattr(sharding, "spec", None)
    if mesh is None or not spec or spec[0] is None:
        return 1
    axes = spec[0] if isinstance(spec[0], tuple) else (spec[0],)
    return int(np.prod([mesh.shape[a] for a in axes]))


def _take(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``x [B, step, ...]`` at ``idx [B, T]`` -> ``[B, T, ...]``."""
    return x[np.arange(x.shape[0])[:, None], idx]


WINDOW_STARTS = ("episode", "any")
#: which episodes an episode window holds: ``"consecutive"`` (AD's: episodes
#: ``e, e + k, ...``), ``"subset"`` (distinct episodes drawn uniformly, in
#: history order) or ``"subset_by_return"`` (the same, ordered by ascending
#: return: T2MIR-AD's MuJoCo loader, ``dataset_sort``)
EPISODE_WINDOWS = ("consecutive", "subset", "subset_by_return")


def pair_rows(rng, task_ids: np.ndarray, num_pairs: int) -> np.ndarray:
    """Rows ``2i, 2i + 1``: two different records of one task (``[2 * num_pairs]``).

    The first record of a pair is uniform over the records; the second is
    uniform over the *other* records of its task, or the same record where
    the task has only one (then the two samples differ only in where they
    are cut from it). So a paired batch sees as many distinct histories as
    an unpaired one wherever the data hold several per task.
    """
    first = rng.integers(0, len(task_ids), num_pairs)
    order = np.argsort(task_ids, kind="stable")
    sorted_ids = task_ids[order]
    lo = np.searchsorted(sorted_ids, task_ids[first], "left")
    count = np.searchsorted(sorted_ids, task_ids[first], "right") - lo
    slot = np.empty_like(order)
    slot[order] = np.arange(len(order))
    rank = slot[first] - lo  # the first record's place among its task's
    draw = (rng.random(num_pairs) * np.maximum(count - 1, 1)).astype(np.int64)
    other = draw + (draw >= rank)  # uniform over the task's other records
    second = np.where(count > 1, order[lo + np.minimum(other, count - 1)], first)
    return np.stack([first, second], 1).reshape(-1)


def _window_length(
    dataset: HistoryDataset,
    num_episodes: int | None,
    num_transitions: int | None,
    episode_stride: int,
) -> int:
    """Steps in an :class:`ADSampler` window: ``num_episodes`` whole episodes
    (``episode_stride`` apart) or ``num_transitions`` steps (exactly one of
    the two given); ``ValueError`` naming the argument if it does not fit
    ``dataset``'s histories."""
    if (num_episodes is None) == (num_transitions is None):
        raise ValueError("give exactly one of `num_episodes`, `num_transitions`")
    if not is_int(episode_stride, 1):
        raise ValueError(
            f"`episode_stride` must be an integer >= 1, got {episode_stride!r}"
        )
    if num_episodes is None:
        if episode_stride != 1:
            raise ValueError("`episode_stride` needs `num_episodes` windows")
        steps = dataset.num_steps
        if not isinstance(num_transitions, int) or not 1 <= num_transitions <= steps:
            raise ValueError(
                f"`num_transitions` must be an integer in [1, {steps}], "
                f"got {num_transitions!r}"
            )
        return num_transitions
    limit = dataset.metadata["num_episodes"]
    if not isinstance(num_episodes, int) or not 1 <= num_episodes <= limit:
        raise ValueError(
            f"`num_episodes` must be an integer in [1, {limit}] (episodes "
            f"per history), got {num_episodes!r}"
        )
    span = (num_episodes - 1) * episode_stride + 1
    if span > limit:
        raise ValueError(
            f"`num_episodes` {num_episodes} with `episode_stride` "
            f"{episode_stride} spans {span} episodes; histories have {limit}"
        )
    return num_episodes * dataset.horizon


def _check_episode_window(
    episode_window: str, num_episodes: int | None, stride: int, window_start: str
) -> None:
    """A ``"subset"`` window is whole episodes (``num_episodes``, stride 1,
    starting at an episode's first step)."""
    if episode_window not in EPISODE_WINDOWS:
        raise ValueError(
            f"`episode_window` must be one of {EPISODE_WINDOWS}, got {episode_window!r}"
        )
    if episode_window != "consecutive" and (
        num_episodes is None or stride != 1 or window_start != "episode"
    ):
        raise ValueError(
            f"`episode_window={episode_window!r}` needs `num_episodes` windows "
            "with `episode_stride=1` and `window_start='episode'`"
        )


class ADSampler(_Sampler):
    """Windows of whole episodes or of transitions (see the module docstring)."""

    fields = ("obs", "action", "reward", "terminated", "truncated", "task_id")

    def __init__(
        self,
        dataset: HistoryDataset,
        batch_size: int,
        *,
        num_episodes: int | None = None,
        num_transitions: int | None = None,
        episode_stride: int = 1,
        window_start: str = "episode",
        episode_window: str = "consecutive",
        paired: bool = False,
        split: str = "train",
        seed: int = 0,
        sharding: Any = None,
        cache_bytes: int | None = None,
    ):
        self.length = _window_length(
            dataset, num_episodes, num_transitions, episode_stride
        )
        if window_start not in WINDOW_STARTS:
            raise ValueError(
                f"`window_start` must be one of {WINDOW_STARTS}, got {window_start!r}"
            )
        _check_episode_window(
            episode_window, num_episodes, episode_stride, window_start
        )
        if num_episodes is None:
            window_start = "any"  # a transition window starts at any step
        if paired and batch_size % 2:
            raise ValueError(
                f"`batch_size` must be even with paired=True, got {batch_size}"
            )
        self.num_episodes, self.paired = num_episodes, paired
        self.episode_stride, self.window_start = episode_stride, window_start
        self.episode_window = episode_window
        super().__init__(dataset, batch_size, split, seed, sharding, cache_bytes)
        if not spec_of(self).contiguous:  # episode windows: enough episodes?
            try:
                check_episode_counts(self.done_flags(), num_episodes, episode_stride)
            except ValueError as err:
                raise ValueError(f"{dataset.path} split {split!r}: {err}") from None

    def _episode_windows(self, rng, done: np.ndarray, reward: np.ndarray | None):
        """``(idx [B, T], mask [B, T])`` of ``num_episodes`` episodes,
        ``episode_stride`` apart, back to back and padded at the end.

        ``window_start="episode"``: the window starts at an episode's first
        step. ``"any"`` (strided windows; stride 1 is a plain offset): it
        starts at a uniform step of its first episode and runs on into the
        episode after its last, as far as the window is long. A ``"subset"``
        window (:data:`EPISODE_WINDOWS`) holds :meth:`_subset`'s episodes.
        """
        n, k, length = self.num_episodes, self.episode_stride, self.length
        idx = np.empty((done.shape[0], length), np.int64)
        mask = np.empty((done.shape[0], length), bool)
        u, v = rng.random(done.shape[0]), rng.random(done.shape[0])
        anywhere = self.window_start == "any"
        for b in range(done.shape[0]):
            ends = np.flatnonzero(done[b])
            starts = np.concatenate([[0], ends[:-1] + 1])
            if self.episode_window != "consecutive":
                chosen, tail = self._subset(rng, reward, b, starts, ends), False
            else:
                tail = anywhere and len(ends) - n * k >= 1
                first = int(u[b] * (len(ends) - (n - (0 if tail else 1)) * k))
                chosen = first + k * np.arange(n + 1 if tail else n)
            pos = np.concatenate([np.arange(starts[e], ends[e] + 1) for e in chosen])
            if tail:  # start anywhere in the first episode
                offset = int(v[b] * (ends[first] + 1 - starts[first]))
                pos = pos[offset : offset + length]
            pos = pos[:length]
            mask[b] = np.arange(length) < len(pos)
            idx[b, : len(pos)] = pos
            idx[b, len(pos) :] = pos[-1]
        return idx, mask

    def _subset(self, rng, reward, b, starts, ends) -> np.ndarray:
        """``num_episodes`` distinct episodes of record ``b``, uniform, in
        history order or (``"subset_by_return"``) by ascending return, ties
        in history order."""
        chosen = np.sort(rng.choice(len(ends), self.num_episodes, replace=False))
        if self.episode_window == "subset_by_return":
            total = np.concatenate([[0.0], np.cumsum(reward[b], dtype=np.float64)])
            sums = total[ends[chosen] + 1] - total[starts[chosen]]
            chosen = chosen[np.argsort(sums, kind="stable")]
        return chosen

    def rows(self, rng) -> np.ndarray:
        """The batch's record indices ``[B]`` (pairs of one task if ``paired``)."""
        if self.paired:
            return pair_rows(rng, self.task_ids, self.batch_size // 2)
        return rng.integers(0, self.num_records, self.batch_size)

    def window_index(self, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rows [B], idx [B, T], mask [B, T])``: the steps batch ``step`` takes.

        ``idx[b, j]`` is the history step of record ``rows[b]`` at window
        position ``j`` (repeated where ``mask`` is False).
        """
        return self._index(step)[:3]

    def _index(self, step: int):
        """:meth:`window_index` and, when it read whole records from disk
        (episode windows, no cache), those records (else ``None``)."""
        rng = self.rng(step)
        rows = self.rows(rng)
        contiguous = self.num_episodes is None or (
            self.window_start == "any" and self.episode_stride == 1
        )
        if contiguous:  # the reference's windows: any step, consecutive
            offsets = rng.integers(0, self.num_steps - self.length + 1, len(rows))
            idx = offsets[:, None] + np.arange(self.length)
            return rows, idx, np.ones(idx.shape, bool), None
        # from disk, read each record once: its episode ends and its window
        whole = None if self._cache is not None else self._fetch(rows)
        by_return = self.episode_window == "subset_by_return"
        needs = ("terminated", "truncated", *(("reward",) if by_return else ()))
        data = self._fetch(rows, needs) if whole is None else whole
        done = np.logical_or(data["terminated"], data["truncated"])
        idx, mask = self._episode_windows(rng, done, data.get("reward"))
        return rows, idx, mask, whole

    def host_batch(self, step: int) -> dict[str, Any]:
        rows, idx, mask, whole = self._index(step)
        if whole is None:
            data = self._fetch(rows, self.fields, idx)
        else:
            data = {
                f: jax.tree.map(lambda x: _take(x, idx) if x.ndim >= 2 else x, whole[f])
                for f in self.fields
            }
        done = np.logical_or(data["terminated"], data["truncated"])

        def window(w):
            m = mask.reshape(mask.shape + (1,) * (w.ndim - 2))
            return np.where(m, w, np.zeros((), w.dtype))

        batch = {
            "obs": jax.tree.map(window, data["obs"]),
            "action": window(data["action"]),
            "reward": window(data["reward"]).astype(np.float32),
            "done": window(done),
            "mask": mask,
            "task_id": np.asarray(data["task_id"], np.int32),
        }
        return check_batch(batch, self.batch_shapes)

    @property
    def batch_shapes(self) -> dict[str, tuple]:
        b, t = self.batch_size, self.length
        return {
            "obs": (b, t, ...),
            "action": (b, t, ...),
            "reward": (b, t),
            "done": (b, t),
            "mask": (b, t),
            "task_id": (b,),
        }


#: where DPT's query step is drawn from (:class:`DPTSampler`)
QUERY_CHOICES = ("history", "beyond_context")


def _check_query(query: str, contiguous: bool, steps: int, context_size: int):
    """``ValueError`` unless ``query`` is a choice the data can serve."""
    if query not in QUERY_CHOICES:
        raise ValueError(f"`query` must be one of {QUERY_CHOICES}, got {query!r}")
    if query == "history":
        return
    if not contiguous:
        raise ValueError(
            "query='beyond_context' needs histories of independent transitions "
            "(DPT's uniform roll-in, --source dpt_rollin rollin=uniform) or a "
            "bandit; a trajectory's other steps are not independent of its context"
        )
    if steps <= context_size:
        raise ValueError(
            f"query='beyond_context' needs histories longer than the context: "
            f"{steps} steps, context_size={context_size} (raise data.num_episodes)"
        )


class DPTSampler(_Sampler):
    """Context sets with a query state and its optimal action (DPT).

    ``query``: ``"history"`` draws the query step uniformly from the
    history; ``"beyond_context"`` from the history's steps outside the
    context's window, so that on independent transitions (the uniform
    roll-in) the query is a state drawn independently of the context, as
    the DPT reference's ``env.sample_state()`` (with ``"history"`` and a
    context of the whole history it is always one of the context's states).
    """

    fields = (
        "obs",
        "action",
        "reward",
        "terminated",
        "truncated",
        "optimal_action",
        "task_id",
    )

    def __init__(
        self,
        dataset: HistoryDataset,
        batch_size: int,
        context_size: int,
        *,
        paired: bool = False,
        split: str = "train",
        seed: int = 0,
        sharding: Any = None,
        cache_bytes: int | None = None,
        query: str = "history",
    ):
        if not dataset.metadata.get("has_optimal_action"):
            raise ValueError(
                f"{dataset.path}: DPT needs optimal_action labels; generate the "
                "dataset from an environment with an oracle (e.g. --source dpt_rollin)"
            )
        self.stateless = bool(dataset.metadata.get("stateless_obs"))
        # independent transitions (uniform roll-in) store every successor
        self.stored_next = bool(dataset.metadata.get("has_next_obs"))
        if self.stored_next:
            self.fields = (*self.fields, "next_obs")
        steps, episodes = dataset.num_steps, dataset.metadata["num_episodes"]
        contiguous = self.stateless or self.stored_next
        # at most `episodes` steps lack a stored successor: each truncated
        # episode fills the horizon (terminated steps keep theirs)
        usable = steps if contiguous else steps - episodes
        if not isinstance(context_size, int) or not 1 <= context_size <= usable:
            raise ValueError(
                f"`context_size` must be an integer in [1, {usable}] (steps with a "
                f"known successor per history), got {context_size!r}"
            )
        if paired and batch_size % 2:
            raise ValueError(
                f"`batch_size` must be even with paired=True, got {batch_size}"
            )
        _check_query(query, contiguous, steps, context_size)
        self.context_size, self.paired, self.query = context_size, paired, query
        super().__init__(dataset, batch_size, split, seed, sharding, cache_bytes)

    def _context_index(self, rng, done, terminated) -> np.ndarray:
        """``[B, N]`` context steps of rows with ``done``, ``terminated [B, S]``
        (:func:`~agentrl.data.device_sampler.valid_tables`)."""
        n = self.context_size
        if self.stateless or self.stored_next:
            offsets = rng.integers(0, self.num_steps - n + 1, done.shape[0])
            return offsets[:, None] + np.arange(n)
        tables = valid_tables(done, n, terminated)  # raises if a row has too few
        first = (rng.random(done.shape[0]) * (tables["num_valid"] - n + 1)).astype(int)
        return np.take_along_axis(tables["valid"], first[:, None] + np.arange(n), 1)

    def host_batch(self, step: int) -> dict[str, Any]:
        rng = self.rng(step)
        if self.paired:  # rows 2i, 2i + 1: two histories of one task
            rows = pair_rows(rng, self.task_ids, self.batch_size // 2)
        else:
            rows = rng.integers(0, self.num_records, self.batch_size)
        n, beyond = self.context_size, self.query == "beyond_context"
        query = rng.integers(0, self.num_steps - n * beyond, self.batch_size)
        data = self._fetch(rows)
        done = np.logical_or(data["terminated"], data["truncated"])
        idx = self._context_index(rng, done, data["terminated"])
        if beyond:
            query = skip_window(query, idx[:, 0], n)
        if self.stored_next:
            next_obs, next_idx = data["next_obs"], idx
        else:
            next_obs, next_idx = data["obs"], (idx if self.stateless else idx + 1)
        b = np.arange(self.batch_size)
        batch = {
            "context_obs": jax.tree.map(lambda x: _take(x, idx), data["obs"]),
            "context_action": _take(data["action"], idx),
            "context_reward": _take(data["reward"], idx).astype(np.float32),
            "context_next_obs": jax.tree.map(lambda x: _take(x, next_idx), next_obs),
            "query_obs": jax.tree.map(lambda x: x[b, query], data["obs"]),
            "label": data["optimal_action"][b, query],
            "task_id": np.asarray(data["task_id"], np.int32),
        }
        return check_batch(batch, self.batch_shapes)

    @property
    def batch_shapes(self) -> dict[str, tuple]:
        b, n = self.batch_size, self.context_size
        return {
            "context_obs": (b, n, ...),
            "context_action": (b, n, ...),
            "context_reward": (b, n),
            "context_next_obs": (b, n, ...),
            "query_obs": (b, ...),
            "label": (b, ...),
            "task_id": (b,),
        }
