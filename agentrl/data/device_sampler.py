"""Training batches drawn on the device, inside the jitted update.

The training split is decoded once (:func:`split_arrays`) into arrays
``[record, step, ...]`` placed on the device, with small per-record tables
(episode starts and lengths, steps with a known successor, the records of
each task). A batch is then a pure function of ``(seed, step)`` computed
inside the jitted program::

    key = fold_in(fold_in(key(seed), DATA_STREAM), step)
    batch = gather(spec, data, draw_index(spec, data, key))

so no host work is left per update and resuming at step ``k`` draws exactly
the batches an uninterrupted run draws. The windows are those of the host
samplers (:class:`~agentrl.data.samplers.ADSampler`,
:class:`~agentrl.data.samplers.DPTSampler`), which stay as the reference
(``tests/test_device_sampler.py`` checks that every device window is one
the reference may draw, with the same frequencies of rows, offsets and
episodes) and for sweeps; their numpy random streams differ, so the two
give different (equally distributed) batch streams:

- AD / DT / T2MIR-AD: ``num_transitions`` consecutive steps at a uniform
  offset, or ``num_episodes`` episodes ``episode_stride`` apart from a
  uniform first episode, starting at the episode's first step
  (``window_start="episode"``) or at a uniform step of it (``"any"``, when
  the history has an episode after the window to run on into), padded
  (``mask`` False, fields zero) after short episodes; or
  (``episode_window`` ``"subset"``, ``"subset_by_return"``) ``num_episodes``
  distinct episodes drawn uniformly, in history order or by ascending
  return (T2MIR-AD's MuJoCo windows);
- DPT / T2MIR-DPT: ``context_size`` consecutive steps with a known
  successor (a terminated step's is the next stored observation,
  :func:`valid_tables`), a uniform query step and its oracle action;
- ``paired``: rows ``2i, 2i + 1`` from two different records of one task
  where it has several (:func:`~agentrl.data.samplers.pair_rows`).

Uniform integers are ``jax.random.randint`` draws over the same ranges as
the host sampler's ``int(u * n)``. The ``DATA_STREAM`` tag keeps the batch
keys apart from the model's ``nnx.Rngs(seed)`` streams (which fold a
counter into ``key(seed)``).

A split too large for the device streams instead
(:class:`StreamedBatches` in :mod:`agentrl.train.batches`): the same index
draws, computed on the host, gather the windows from records read per batch.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

#: folded into ``key(seed)``: the batch stream's own key
DATA_STREAM = 0xDA7A


@dataclasses.dataclass(frozen=True)
class BatchSpec:
    """The static description of a sampler's windows (hashable: a jit constant).

    ``kind`` is ``"windows"`` (AD's windows of steps) or ``"context_set"``
    (DPT's context sets and queries); ``length`` the window (AD) or context
    (DPT) length in steps.
    """

    kind: str
    batch_size: int
    length: int
    num_steps: int
    num_records: int
    paired: bool = False
    num_episodes: int | None = None
    episode_stride: int = 1
    window_start: str = "episode"
    episode_window: str = "consecutive"
    stateless: bool = False
    stored_next: bool = False
    query: str = "history"

    @property
    def contiguous(self) -> bool:
        """Whether windows are consecutive steps at a uniform offset."""
        if self.kind == "context_set":
            return self.stateless or self.stored_next
        return self.num_episodes is None or (
            self.window_start == "any" and self.episode_stride == 1
        )

    @property
    def fields(self) -> tuple[str, ...]:
        """The record fields the batches read."""
        if self.kind == "windows":
            return ("obs", "action", "reward", "done")
        extra = ("next_obs",) if self.stored_next else ()
        return ("obs", "action", "reward", "optimal_action", *extra)


def spec_of(sampler: Any) -> BatchSpec:
    """The :class:`BatchSpec` of a host ``ADSampler`` or ``DPTSampler``."""
    common = dict(
        batch_size=sampler.batch_size,
        num_steps=sampler.num_steps,
        num_records=sampler.num_records,
        paired=sampler.paired,
    )
    if hasattr(sampler, "context_size"):
        return BatchSpec(
            kind="context_set",
            length=sampler.context_size,
            stateless=sampler.stateless,
            stored_next=sampler.stored_next,
            query=sampler.query,
            **common,
        )
    return BatchSpec(
        kind="windows",
        length=sampler.length,
        num_episodes=sampler.num_episodes,
        episode_stride=sampler.episode_stride,
        window_start=sampler.window_start,
        episode_window=sampler.episode_window,
        **common,
    )


# ----------------------------------------------------------------- tables
def episode_tables(
    done: np.ndarray, reward: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Episodes of each record from ``done [R, S]`` (bool), vectorized.

    Returns ``starts [R, E]``, ``lens [R, E]`` (int32; zero past a record's
    episodes) and ``episodes [R]``, ``E`` the most episodes of any record;
    with ``reward [R, S]`` also ``returns [R, E]`` (float32, each episode's
    reward sum). Only steps up to a record's last ``done`` belong to an
    episode (as in the host sampler).
    """
    rows, ends = np.nonzero(done)
    count = done.sum(1).astype(np.int32)
    width = max(int(count.max(initial=0)), 1)
    slot = np.cumsum(done, 1)[rows, ends] - 1  # the episode each end closes
    end_table = np.zeros((done.shape[0], width), np.int32)
    end_table[rows, slot] = ends
    start_table = np.zeros_like(end_table)
    start_table[:, 1:] = end_table[:, :-1] + 1
    lens = np.where(np.arange(width) < count[:, None], end_table + 1 - start_table, 0)
    tables = {"starts": start_table, "lens": lens.astype(np.int32), "episodes": count}
    if reward is not None:
        total = np.zeros((done.shape[0], done.shape[1] + 1))
        total[:, 1:] = np.cumsum(reward, 1, dtype=np.float64)
        sums = np.take_along_axis(total, end_table + 1, 1) - np.take_along_axis(
            total, start_table, 1
        )
        tables["returns"] = np.where(lens > 0, sums, 0.0).astype(np.float32)
    return tables


def valid_tables(
    done: np.ndarray, context_size: int, terminated: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """DPT's context steps of each record: the steps whose successor is stored.

    ``done [R, S]`` (bool) ends episodes, ``terminated [R, S]`` (bool;
    ``None``: no step terminated) those that ended in the environment.
    Excluded are the steps only truncated (at the time limit: the successor
    is a state the history never shows) and the record's last step (a
    history of an environment whose episodes end early stops mid-episode).
    A terminated step stays (nothing follows a terminal state): its
    successor is read as the next stored step's observation, the next
    episode's first -- the XLand DPT baseline's rule (``next_states =
    states[context_indexes + 1]``, dunnolab/xland-minigrid-datasets
    ``baselines/dpt``), so training contexts show the goal's reward, which
    on families ending at the goal comes only on the terminated step.
    Evaluation's context reads the same there
    (:func:`agentrl.agents.context_set.successor`).

    Returns ``valid [R, S]`` (int32, the record's valid steps first, in
    order) and ``num_valid [R]``. Raises ``ValueError`` if a record has
    fewer than ``context_size`` of them.
    """
    cut = np.array(done, bool)  # a copy
    if terminated is not None:
        cut &= ~np.asarray(terminated, bool)
    cut[:, -1] = True
    num_valid = (~cut).sum(1).astype(np.int32)
    if num_valid.min(initial=context_size) < context_size:
        raise ValueError(
            f"a history has {int(num_valid.min())} steps with a known successor, "
            f"fewer than context_size={context_size}"
        )
    order = np.argsort(cut, axis=1, kind="stable").astype(np.int32)
    return {"valid": order, "num_valid": num_valid}


def check_episode_counts(done: np.ndarray, num_episodes: int, stride: int) -> None:
    """``ValueError`` naming the first record of ``done [R, S]`` with fewer
    complete episodes than a window of ``num_episodes`` episodes
    ``stride`` apart spans (its episodes ran past the horizon), which the
    samplers would otherwise repeat (device) or fail on (host)."""
    need = (num_episodes - 1) * stride + 1
    count = np.asarray(done, bool).sum(1)
    short = np.flatnonzero(count < need)
    if short.size:
        r = int(short[0])
        raise ValueError(
            f"record {r} has {int(count[r])} complete episodes; a window of "
            f"num_episodes={num_episodes} with episode_stride={stride} needs "
            f"{need} ({short.size} of {len(count)} records are short: "
            "episodes longer than the horizon?)"
        )


def pair_tables(task_ids: np.ndarray) -> dict[str, np.ndarray]:
    """Per record: its task's records (``order [R]`` sorted by task), where
    they begin (``task_lo [R]``), how many (``task_count [R]``) and the
    record's place among them (``task_rank [R]``)."""
    order = np.argsort(task_ids, kind="stable")
    sorted_ids = task_ids[order]
    lo = np.searchsorted(sorted_ids, task_ids, "left")
    count = np.searchsorted(sorted_ids, task_ids, "right") - lo
    slot = np.empty_like(order)
    slot[order] = np.arange(len(order))
    as32 = lambda x: np.asarray(x, np.int32)  # noqa: E731
    return {
        "order": as32(order),
        "task_lo": as32(lo),
        "task_count": as32(count),
        "task_rank": as32(slot - lo),
    }


def index_tables(
    spec: BatchSpec,
    done: np.ndarray,
    task_ids: np.ndarray,
    reward: Any = None,
    terminated: Any = None,
) -> dict:
    """The tables :func:`draw_index` needs for ``spec`` (numpy) from ``done
    [R, S]``; ``reward [R, S]`` only for ``episode_window="subset_by_return"``
    and ``terminated [R, S]`` only for DPT on trajectories, which need them."""
    tables = {"task_id": np.asarray(task_ids, np.int32)}
    if spec.paired:
        tables.update(pair_tables(np.asarray(task_ids)))
    if spec.contiguous:
        return tables
    if spec.kind == "context_set":
        if terminated is None:  # else the terminated steps would go missing
            raise ValueError("DPT's context tables need `terminated` [R, S]")
        tables.update(valid_tables(done, spec.length, terminated))
        return tables
    check_episode_counts(done, spec.num_episodes, spec.episode_stride)
    by_return = spec.episode_window == "subset_by_return"
    if by_return and reward is None:
        raise ValueError("episode_window='subset_by_return' needs `reward`")
    tables.update(episode_tables(done, reward if by_return else None))
    return tables


# ------------------------------------------------------------------ draws
def batch_key(seed: int, step: Any) -> jax.Array:
    """The key of training step ``step`` (a traced int is fine)."""
    base = jax.random.fold_in(jax.random.key(seed), DATA_STREAM)
    return jax.random.fold_in(base, step)


def draw_rows(spec: BatchSpec, tables: dict, key: jax.Array) -> jax.Array:
    """Record indices ``[B]``; pairs of one task in rows ``2i, 2i + 1``."""
    if not spec.paired:
        return jax.random.randint(key, (spec.batch_size,), 0, spec.num_records)
    k_first, k_other = jax.random.split(key)
    pairs = spec.batch_size // 2
    first = jax.random.randint(k_first, (pairs,), 0, spec.num_records)
    lo, count = tables["task_lo"][first], tables["task_count"][first]
    draw = jax.random.randint(k_other, (pairs,), 0, jnp.maximum(count - 1, 1))
    other = draw + (draw >= tables["task_rank"][first])  # skip the first record
    pick = tables["order"][lo + jnp.minimum(other, count - 1)]
    second = jnp.where(count > 1, pick, first)
    return jnp.stack([first, second], 1).reshape(-1)


def _offsets(spec: BatchSpec, key: jax.Array) -> jax.Array:
    """``[B, length]`` consecutive steps from a uniform offset."""
    span = spec.num_steps - spec.length + 1
    start = jax.random.randint(key, (spec.batch_size,), 0, span)
    return start[:, None] + jnp.arange(spec.length)


def episode_windows(spec: BatchSpec, tables: dict, rows, key) -> tuple:
    """``(idx [B, T], mask [B, T])``: ``num_episodes`` episodes
    ``episode_stride`` apart, back to back, padded after short ones.

    With ``window_start="any"`` and an episode after the window's last, the
    window starts at a uniform step of its first episode and runs on.
    """
    n, k, length = spec.num_episodes, spec.episode_stride, spec.length
    k_first, k_offset = jax.random.split(key)
    count = tables["episodes"][rows]  # [B]
    j = jnp.arange(n + 1)
    if spec.episode_window == "consecutive":
        tail = (spec.window_start == "any") & (count - n * k >= 1)
        first = jax.random.randint(
            k_first, rows.shape, 0, count - (n - jnp.where(tail, 0, 1)) * k
        )
        chosen = jnp.minimum(first[:, None] + k * j, tables["lens"].shape[1] - 1)
    else:  # column n (the run-on episode) is never used
        tail = jnp.zeros(rows.shape, bool)
        subset = episode_subset(spec, tables, rows, k_first)
        chosen = jnp.concatenate([subset, subset[:, :1]], 1)
    used = (j < n) | tail[:, None]  # [B, n + 1]
    lens = jnp.where(used, tables["lens"][rows[:, None], chosen], 0)
    starts = tables["starts"][rows[:, None], chosen]
    offset = jnp.where(tail, jax.random.randint(k_offset, rows.shape, 0, lens[:, 0]), 0)
    ends = jnp.cumsum(lens, 1)  # [B, n + 1] window position after each episode
    q = offset[:, None] + jnp.arange(length)  # [B, T] position among the episodes
    slot = jnp.minimum((q[:, :, None] >= ends[:, None, :]).sum(-1), n)
    before = jnp.take_along_axis(ends - lens, slot, 1)
    idx = jnp.take_along_axis(starts, slot, 1) + q - before
    filled = jnp.minimum(ends[:, -1] - offset, length)  # [B]
    mask = jnp.arange(length) < filled[:, None]
    last = jnp.take_along_axis(idx, (filled - 1)[:, None], 1)
    return jnp.where(mask, idx, last), mask


def episode_subset(spec: BatchSpec, tables: dict, rows, key) -> jax.Array:
    """``[B, n]`` distinct episodes of each row, uniform over its episodes: in
    history order, or by ascending return (ties in history order)."""
    n, width = spec.num_episodes, tables["lens"].shape[1]
    count = tables["episodes"][rows]
    noise = jax.random.uniform(key, (rows.shape[0], width))
    noise = jnp.where(jnp.arange(width) < count[:, None], noise, 2.0)
    chosen = jnp.sort(jax.lax.top_k(-noise, n)[1], axis=1)  # the n smallest
    if spec.episode_window == "subset_by_return":
        sums = tables["returns"][rows[:, None], chosen]
        chosen = jnp.take_along_axis(chosen, jnp.argsort(sums, 1, stable=True), 1)
    return chosen


def context_steps(spec: BatchSpec, tables: dict, rows, key) -> jax.Array:
    """``[B, N]`` DPT context steps: consecutive steps with a known successor."""
    if spec.contiguous:
        return _offsets(spec, key)
    count = tables["num_valid"][rows] - spec.length + 1
    first = jax.random.randint(key, rows.shape, 0, count)
    pos = first[:, None] + jnp.arange(spec.length)
    return tables["valid"][rows[:, None], pos]


def skip_window(query: Any, first: Any, length: int) -> Any:
    """Steps ``query [B]`` drawn from ``[0, S - length)`` mapped onto the
    steps outside each row's window ``first .. first + length - 1`` (numpy
    or jax): uniform over them (DPT's ``query="beyond_context"``)."""
    return query + length * (query >= first)


def draw_index(spec: BatchSpec, tables: dict, key: jax.Array) -> dict[str, Any]:
    """Which steps a batch takes: ``rows [B]``, ``idx [B, T]``, ``mask [B, T]``
    and (DPT) ``query [B]``; ``idx`` repeats the last real step where
    ``mask`` is False."""
    k_rows, k_win, k_query = jax.random.split(key, 3)
    rows = draw_rows(spec, tables, k_rows)
    if spec.kind == "context_set":
        idx = context_steps(spec, tables, rows, k_win)
        n, beyond = spec.length, spec.query == "beyond_context"
        query = jax.random.randint(k_query, rows.shape, 0, spec.num_steps - n * beyond)
        if beyond:
            query = skip_window(query, idx[:, 0], n)
        return {"rows": rows, "idx": idx, "query": query}
    if spec.contiguous:
        idx = _offsets(spec, k_win)
        return {"rows": rows, "idx": idx, "mask": jnp.ones(idx.shape, bool)}
    idx, mask = episode_windows(spec, tables, rows, k_win)
    return {"rows": rows, "idx": idx, "mask": mask}


# ----------------------------------------------------------------- gather
def gather(spec: BatchSpec, data: dict, index: dict) -> dict[str, Any]:
    """The batch of ``index`` from ``data`` (``{field: [R, S, ...]}`` and
    ``task_id [R]``); the fields and shapes of the host sampler's batches."""
    rows, idx = index["rows"], index["idx"]
    window = lambda x: x[rows[:, None], idx]  # noqa: E731
    task_id = data["task_id"][rows].astype(jnp.int32)
    if spec.kind == "context_set":
        return _dpt_batch(spec, data, index, window, task_id)
    mask = index["mask"]

    def masked(x):
        w = window(x)
        m = mask.reshape(mask.shape + (1,) * (w.ndim - 2))
        return jnp.where(m, w, jnp.zeros((), w.dtype))

    return {
        "obs": jax.tree.map(masked, data["obs"]),
        "action": masked(data["action"]),
        "reward": masked(data["reward"]).astype(jnp.float32),
        "done": masked(data["done"]),
        "mask": mask,
        "task_id": task_id,
    }


def _dpt_batch(spec, data, index, window, task_id) -> dict[str, Any]:
    rows, idx, query = index["rows"], index["idx"], index["query"]
    if spec.stored_next:
        next_obs = jax.tree.map(window, data["next_obs"])
    else:
        following = idx if spec.stateless else idx + 1
        next_obs = jax.tree.map(lambda x: x[rows[:, None], following], data["obs"])
    return {
        "context_obs": jax.tree.map(window, data["obs"]),
        "context_action": window(data["action"]),
        "context_reward": window(data["reward"]).astype(jnp.float32),
        "context_next_obs": next_obs,
        "query_obs": jax.tree.map(lambda x: x[rows, query], data["obs"]),
        "label": data["optimal_action"][rows, query],
        "task_id": task_id,
    }


# ----------------------------------------------------------------- sampler
def split_arrays(sampler: Any) -> dict[str, Any]:
    """The fields ``spec_of(sampler)`` reads, ``[R, S, ...]`` numpy, decoded once.

    ``done`` is ``terminated | truncated``; ``task_id [R]`` per record; DPT
    also gets ``terminated`` (for :func:`valid_tables`).
    """
    decoded = sampler.decoded()
    done = np.logical_or(decoded["terminated"], decoded["truncated"])
    spec = spec_of(sampler)
    out = {f: decoded[f] for f in spec.fields if f != "done"}
    out["done"] = done
    if spec.kind == "context_set":
        out["terminated"] = decoded["terminated"]
    return out


class DeviceSampler:
    """Batches drawn inside the jitted update from device-resident data.

    Built from a host sampler (its settings, validation and decoded split).
    ``data`` is the pytree of arrays the program takes as an argument (never
    a closed-over constant); ``draw(data, step)`` is the batch of ``step``.

    Args:
      sampler: an ``ADSampler`` or ``DPTSampler``.
      put: places the numpy arrays (default ``jax.device_put``; training
        replicates them over the mesh).
    """

    def __init__(self, sampler: Any, put: Any = None):
        self.spec, self.seed = spec_of(sampler), sampler.seed
        self.batch_shapes = sampler.batch_shapes
        arrays = split_arrays(sampler)
        terminated = arrays.pop("terminated", None)
        tables = index_tables(
            self.spec,
            arrays["done"],
            sampler.task_ids,
            arrays.get("reward"),
            terminated,
        )
        if self.spec.kind == "context_set":
            del arrays["done"]  # read only through the tables
        put = jax.device_put if put is None else put
        self.data = put({**arrays, **tables})

    def draw(self, data: dict, step: Any) -> dict[str, Any]:
        """The batch of training step ``step`` (jittable; ``step`` may be traced)."""
        return draw_batch(self.spec, data, self.seed, step)

    def member_draws(self, seeds: list[int]) -> Any:
        """``draw(steps [K]) -> batches [K, S, B, ...]``: the batches of each
        of ``seeds`` (a sweep's members), in one kept program
        (:func:`seeded_draws`) for every seed."""
        draws, data = seeded_draws(self.spec), self.data
        seed_array = jnp.asarray(seeds, jnp.uint32)  # keys as Python ints give
        return lambda steps: draws(data, seed_array, steps)

    def index(self, step: int) -> dict[str, np.ndarray]:
        """:func:`draw_index` of ``step`` on the host (numpy), for tests."""
        fn = jax.jit(lambda d, s: draw_index(self.spec, d, batch_key(self.seed, s)))
        return jax.device_get(fn(self.data, step))

    def batch(self, step: int) -> dict[str, Any]:
        """The batch of ``step`` as numpy arrays (for tests and inspection)."""
        return jax.device_get(jax.jit(self.draw)(self.data, step))


def draw_batch(spec: BatchSpec, data: dict, seed: Any, step: Any) -> dict[str, Any]:
    """The batch of ``step`` of the stream seeded ``seed`` (both may be traced)."""
    return gather(spec, data, draw_index(spec, data, batch_key(seed, step)))


@functools.lru_cache(maxsize=16)
def seeded_draws(spec: BatchSpec) -> Any:
    """``draws(data, seeds [S], steps [K]) -> batches [K, S, B, ...]``: the
    batches :class:`DeviceSampler` ``(spec)`` of each seed draws at each
    step, in ONE jitted program that takes the seeds as arguments (kept per
    ``spec``: every seed and every later call reuses its compilation)."""

    one = functools.partial(draw_batch, spec)
    over_steps = jax.vmap(one, (None, None, 0))
    return jax.jit(jax.vmap(over_steps, (None, 0, None), out_axes=1))


def device_sampler_of(sampler: Any, put: Any = None) -> Any:
    """The device sampler of a host sampler: its own ``device_sampler(put)``
    where it brings one (a learner whose batches are more than windows, such
    as RA-DT's retrieved pieces), else :class:`DeviceSampler`."""
    own = getattr(sampler, "device_sampler", None)
    return own(put) if own is not None else DeviceSampler(sampler, put)
