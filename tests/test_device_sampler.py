"""The device sampler draws the host sampler's windows, with its frequencies.

On small ragged data (Dark Room hard: episodes end at the goal, several
histories per task) every window the device draws is one that a reference
enumeration, built with the host sampler's own window code, allows; over
many draws the frequencies of (record, window) and of (record, query) and
(first, second) pairs match the exact probabilities of the reference and the
host sampler's empirical ones. Tolerance: a chi-square test (scipy) with
p > 0.001, categories with fewer than 5 expected draws pooled; seeds are
fixed, so the test is deterministic. The batch the device gathers for an
index is exactly the host's for the same index.
"""

import collections
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from agentrl import envs
from agentrl.algos.dpt import DPT
from agentrl.data import ADSampler, DPTSampler, open_dataset, write_dataset
from agentrl.data.device_sampler import (
    BatchSpec,
    DeviceSampler,
    batch_key,
    draw_index,
    episode_tables,
    gather,
    index_tables,
)
from agentrl.data.samplers import pair_rows
from agentrl.envs import grid
from agentrl.sources import source_histories

ROOM = envs.make("darkroom_hard", size=3, horizon=6)  # 9 goals: tasks repeat
DRAWS = 1500  # batches per frequency test
P_MIN = 1e-3


@pytest.fixture(scope="module")
def room(tmp_path_factory):
    out = tmp_path_factory.mktemp("d") / "room"
    source = source_histories("q_learning", ROOM)
    write_dataset(out, ROOM, source, 14, 6, 0, chunk_size=14)
    return open_dataset(out)


@pytest.fixture(scope="module")
def bandit(tmp_path_factory):
    env = envs.make("bernoulli_bandit", num_arms=3, horizon=12)
    out = tmp_path_factory.mktemp("d") / "bandit"
    source = source_histories("dpt_rollin", env)
    write_dataset(out, env, source, 20, 1, 0, env_name="bernoulli_bandit")
    return open_dataset(out)


@pytest.fixture(scope="module")
def uniform_room(tmp_path_factory):
    """DPT's uniform roll-in: 2 x 6 independent transitions a task."""
    env = envs.make("darkroom", size=3, horizon=6)
    out = tmp_path_factory.mktemp("d") / "uniform"
    source = source_histories("dpt_rollin", env, rollin="uniform")
    write_dataset(out, env, source, 10, 2, 0)
    return open_dataset(out)


def _done(sampler):
    return sampler.done_flags()


class _FixedRng:
    """Stands in for a numpy Generator: ``random(n)`` returns fixed values."""

    def __init__(self, *values):
        self.values = list(values)

    def random(self, n):
        return np.full(n, self.values.pop(0))


def _reference_windows(sampler) -> dict:
    """``{(row, idx, mask): probability}`` of every window ``sampler`` may draw,
    built by the host sampler's own ``_episode_windows`` at each choice."""
    done, rows = _done(sampler), sampler.num_records
    if sampler.num_episodes is None or (
        sampler.window_start == "any" and sampler.episode_stride == 1
    ):
        span = sampler.num_steps - sampler.length + 1
        return {
            (r, tuple(range(o, o + sampler.length)), (True,) * sampler.length): 1
            / (rows * span)
            for r in range(rows)
            for o in range(span)
        }
    n, k = sampler.num_episodes, sampler.episode_stride
    lens = episode_tables(done)["lens"]
    out = collections.defaultdict(float)
    for r in range(rows):
        count = int(done[r].sum())
        tail = sampler.window_start == "any" and count - n * k >= 1
        firsts = count - (n - (0 if tail else 1)) * k
        for first in range(firsts):
            offsets = int(lens[r, first]) if tail else 1
            for off in range(offsets):
                rng = _FixedRng((first + 0.5) / firsts, (off + 0.5) / offsets)
                idx, mask = sampler._episode_windows(rng, done[r : r + 1], None)
                key = (r, tuple(idx[0].tolist()), tuple(mask[0].tolist()))
                out[key] += 1 / (rows * firsts * offsets)
    return dict(out)


def _device_windows(device, draws=DRAWS):
    fn = jax.jit(
        jax.vmap(lambda s: draw_index(device.spec, device.data, batch_key(7, s)))
    )
    index = jax.device_get(fn(jnp.arange(draws)))
    return _keys(index["rows"], index["idx"], index["mask"])


def _host_windows(sampler, draws=DRAWS):
    parts = [sampler.window_index(s) for s in range(draws)]
    return _keys(*(np.stack(p) for p in zip(*parts, strict=True)))


def _keys(rows, idx, mask):
    rows, idx, mask = (
        np.asarray(x).reshape(-1, *x.shape[2:]) for x in (rows, idx, mask)
    )
    return [
        (int(r), tuple(i.tolist()), tuple(m.tolist()))
        for r, i, m in zip(rows, idx, mask, strict=True)
    ]


def _fit_p(keys, probs) -> float:
    """Chi-square goodness of fit of drawn ``keys`` to ``probs`` (pooled)."""
    counts = collections.Counter(keys)
    cats = sorted(probs, key=lambda c: probs[c])
    expected = np.array([probs[c] * len(keys) for c in cats])
    observed = np.array([counts[c] for c in cats], float)
    small = expected < 5
    if small.any():
        expected = np.append(expected[~small], expected[small].sum())
        observed = np.append(observed[~small], observed[small].sum())
    return stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue


def _same_p(a, b) -> float:
    """Chi-square homogeneity of two samples of categories."""
    ca, cb = collections.Counter(a), collections.Counter(b)
    cats = [c for c in set(ca) | set(cb) if ca[c] + cb[c] >= 10]
    table = np.array([[ca[c] for c in cats], [cb[c] for c in cats]])
    return stats.chi2_contingency(table).pvalue


AD_CASES = {
    "episode starts": dict(num_episodes=2, window_start="episode"),
    "any start": dict(num_episodes=2, window_start="any"),
    "any start, stride 2": dict(num_episodes=2, episode_stride=2, window_start="any"),
    "episode starts, stride 2": dict(num_episodes=2, episode_stride=2),
    "transitions": dict(num_transitions=7),
}


def _device_draws_follow(host, reference: dict) -> list:
    """The device sampler's windows of ``host``'s settings: each one the
    ``reference`` allows, at its frequencies (chi-square); returned."""
    assert abs(sum(reference.values()) - 1) < 1e-9
    drawn = _device_windows(DeviceSampler(host))
    illegal = [k for k in set(drawn) if k not in reference]
    assert not illegal, illegal[:3]
    assert _fit_p(drawn, reference) > P_MIN
    return drawn


@pytest.mark.parametrize("case", list(AD_CASES))
def test_ad_device_windows_are_legal_with_the_reference_frequencies(room, case):
    host = ADSampler(room, 8, seed=7, **AD_CASES[case])
    reference = _reference_windows(host)
    drawn = _device_draws_follow(host, reference)
    host_drawn = _host_windows(host)
    assert _fit_p(host_drawn, reference) > P_MIN  # the reference is the host's
    assert _same_p(drawn, host_drawn) > P_MIN
    if "padded" in case or host.window_start == "episode":
        assert any(not all(m) for _, _, m in drawn)  # ragged: some padding


def _subset_reference(sampler) -> dict:
    """``{(row, idx, mask): probability}`` of ``"subset"`` windows, enumerated
    apart from the samplers' code: every set of ``num_episodes`` distinct
    episodes of a record is equally likely, placed in history order or by
    (return, history order)."""
    done = _done(sampler)
    reward = sampler.record_columns(("reward",))["reward"]
    n, length = sampler.num_episodes, sampler.length
    out = collections.defaultdict(float)
    for r in range(sampler.num_records):
        ends = np.flatnonzero(done[r]).tolist()
        starts = [0] + [e + 1 for e in ends[:-1]]
        steps = [list(range(a, b + 1)) for a, b in zip(starts, ends, strict=True)]
        combos = list(itertools.combinations(range(len(ends)), n))
        for combo in combos:
            if sampler.episode_window == "subset_by_return":
                combo = sorted(combo, key=lambda e: (reward[r][steps[e]].sum(), e))
            pos = [p for e in combo for p in steps[e]]
            pad = length - len(pos)
            key = (r, tuple(pos + pos[-1:] * pad), (True,) * len(pos) + (False,) * pad)
            out[key] += 1 / (sampler.num_records * len(combos))
    return dict(out)


@pytest.mark.parametrize("window", ["subset", "subset_by_return"])
def test_subset_windows_are_legal_with_the_reference_frequencies(room, window):
    host = ADSampler(room, 8, seed=7, num_episodes=2, episode_window=window)
    reference = _subset_reference(host)
    _device_draws_follow(host, reference)
    host_drawn = _host_windows(host, 600)
    assert set(host_drawn) <= set(reference)
    assert _fit_p(host_drawn, reference) > P_MIN
    # the data hold episodes of return 0 and 1, so the two orders differ
    ordered = [k for k in reference if k[1] != tuple(sorted(k[1]))]
    assert bool(ordered) == (window == "subset_by_return")


def test_subset_windows_need_whole_episodes(room):
    with pytest.raises(ValueError, match="episode_window='subset'.*window_start"):
        ADSampler(room, 8, num_episodes=2, window_start="any", episode_window="subset")
    with pytest.raises(ValueError, match="`episode_window` must be one of"):
        ADSampler(room, 8, num_episodes=2, episode_window="random")


def test_device_batch_equals_the_host_batch_of_the_same_index(room):
    host = ADSampler(room, 8, num_episodes=2, window_start="any", seed=3)
    device = DeviceSampler(host)
    for step in (0, 5):
        index = device.index(step)
        host._index = lambda s, i=index: (i["rows"], i["idx"], i["mask"], None)
        expected, got = host.host_batch(step), device.batch(step)
        assert sorted(got) == sorted(expected)
        for name in expected:
            np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
            assert got[name].dtype == expected[name].dtype, name


def test_device_draws_are_a_pure_function_of_seed_and_step(room):
    host = ADSampler(room, 8, num_episodes=2, window_start="any", seed=3)
    a, b = DeviceSampler(host), DeviceSampler(host)
    for x, y in zip(
        jax.tree.leaves(a.batch(4)), jax.tree.leaves(b.batch(4)), strict=True
    ):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.index(4)["rows"], a.index(5)["rows"])
    other = DeviceSampler(
        ADSampler(room, 8, num_episodes=2, window_start="any", seed=4)
    )
    assert not np.array_equal(a.index(4)["rows"], other.index(4)["rows"])


def _pair_probs(task_ids) -> dict:
    out = {}
    for r, t in enumerate(task_ids):
        others = [s for s, u in enumerate(task_ids) if u == t and s != r] or [r]
        for s in others:
            out[(r, s)] = 1 / (len(task_ids) * len(others))
    return out


@pytest.mark.parametrize("kind", ["ad", "dpt"])
def test_pairs_are_two_histories_of_one_task_at_the_host_frequencies(room, kind):
    if kind == "ad":
        host = ADSampler(room, 8, num_episodes=2, window_start="any", paired=True)
    else:
        host = DPTSampler(room, 8, 4, paired=True)
    ids = host.task_ids
    assert len(set(ids.tolist())) < len(ids)  # some tasks have several records
    device = DeviceSampler(host)
    fn = jax.jit(
        jax.vmap(lambda s: draw_index(device.spec, device.data, batch_key(0, s)))
    )
    rows = np.asarray(fn(jnp.arange(DRAWS))["rows"]).reshape(-1, 2)
    pairs = [tuple(p) for p in rows.tolist()]
    probs = _pair_probs(ids)
    assert set(pairs) <= set(probs)
    assert _fit_p(pairs, probs) > P_MIN
    host_pairs = [
        tuple(p)
        for s in range(DRAWS)
        for p in pair_rows(host.rng(s), ids, 4).reshape(-1, 2).tolist()
    ]
    assert _same_p(pairs, host_pairs) > P_MIN


@pytest.mark.long
def test_dpt_contexts_and_queries(room, bandit):
    for data, size in ((room, 4), (bandit, 5)):
        host = DPTSampler(data, 8, size, seed=2)
        done = _done(host)
        # a terminated step keeps its successor (the next stored observation)
        cut = done & ~host.record_columns(("terminated",))["terminated"]
        device = DeviceSampler(host)
        fn = jax.jit(
            jax.vmap(lambda s, d=device: draw_index(d.spec, d.data, batch_key(2, s)))
        )
        index = jax.device_get(fn(jnp.arange(DRAWS)))
        rows, idx = index["rows"].reshape(-1), index["idx"].reshape(-1, size)
        stored = host.stateless or host.stored_next
        probs = {}
        for r in range(host.num_records):
            successor = ~cut[r] & (np.arange(host.num_steps) < host.num_steps - 1)
            steps = np.arange(host.num_steps) if stored else np.flatnonzero(successor)
            starts = len(steps) - size + 1
            for f in range(starts):
                probs[(r, tuple(steps[f : f + size].tolist()))] = 1 / (
                    host.num_records * starts
                )
        drawn = [(int(r), tuple(i.tolist())) for r, i in zip(rows, idx, strict=True)]
        assert set(drawn) <= set(probs)
        assert _fit_p(drawn, probs) > P_MIN
        query = index["query"].reshape(-1)
        uniform = {q: 1 / host.num_steps for q in range(host.num_steps)}
        assert _fit_p(query.tolist(), uniform) > P_MIN
        decoded = host.decoded()
        batch = device.batch(11)
        i = device.index(11)
        r, q = i["rows"], i["query"]
        np.testing.assert_array_equal(
            batch["context_action"], decoded["action"][r[:, None], i["idx"]]
        )
        np.testing.assert_array_equal(batch["label"], decoded["optimal_action"][r, q])
        np.testing.assert_array_equal(batch["task_id"], host.task_ids[r])
        following = i["idx"] if host.stateless else i["idx"] + 1
        source = decoded["next_obs"] if host.stored_next else decoded["obs"]
        nxt = i["idx"] if host.stored_next else following
        np.testing.assert_array_equal(
            batch["context_next_obs"], source[r[:, None], nxt]
        )


def test_dpt_context_successors_are_the_moves_made(room):
    """A Dark Room hard history stops mid-episode where its episodes ended
    early: its last step's successor is not stored, so no context holds it
    (the device sampler once read the step itself as its successor). The
    goal terminates: there the successor is the next episode's start."""
    host = DPTSampler(room, 16, 4, seed=3)
    assert not _done(host)[:, -1].all()  # some histories are cut mid-episode
    device = DeviceSampler(host)
    size = ROOM.size
    one = lambda c, a: grid.cell_id(grid.move(grid.cell_pos(c, size), a, size), size)  # noqa: E731
    moves = jax.jit(jax.vmap(jax.vmap(one)))
    start = grid.cell_id(grid.start_position(size, "center"), size)
    for step in range(8):
        for batch in (host.batch(step), device.batch(step)):
            moved = moves(batch["context_obs"], batch["context_action"])
            moved = np.where(batch["context_reward"] > 0, start, moved)
            np.testing.assert_array_equal(batch["context_next_obs"], moved)


def test_dpt_queries_beyond_the_context(uniform_room, room, monkeypatch):
    """``query="beyond_context"``: the query step is uniform over the
    history's steps outside the context's window, on the device and on the
    host (whose observations are replaced by step numbers to show them)."""
    n, steps = 4, uniform_room.num_steps
    host = DPTSampler(uniform_room, 8, n, seed=5, query="beyond_context")
    device = DeviceSampler(host)
    draw = jax.vmap(lambda s: draw_index(device.spec, device.data, batch_key(5, s)))
    index = jax.device_get(jax.jit(draw)(jnp.arange(DRAWS // 4)))
    from_device = zip(index["idx"][..., 0].ravel(), index["query"].ravel(), strict=True)
    fetch = host._fetch

    def numbered(rows, *args):
        data = dict(fetch(rows, *args))
        data["obs"] = np.broadcast_to(
            np.arange(steps, dtype=np.int32), (len(rows), steps)
        )
        return data

    monkeypatch.setattr(host, "_fetch", numbered)
    batches = [host.host_batch(step) for step in range(300)]
    from_host = [
        (o, q)
        for b in batches
        for o, q in zip(b["context_obs"][:, 0], b["query_obs"], strict=True)
    ]
    starts = steps - n + 1
    probs = {
        (o, q): 1 / (starts * (steps - n))
        for o in range(starts)
        for q in range(steps)
        if not o <= q < o + n
    }
    for drawn in (list(from_device), from_host):
        drawn = [(int(o), int(q)) for o, q in drawn]
        assert set(drawn) <= set(probs)  # never inside the window
        assert _fit_p(drawn, probs) > P_MIN
    with pytest.raises(ValueError, match="histories longer than the context"):
        DPTSampler(uniform_room, 8, steps, query="beyond_context")
    with pytest.raises(ValueError, match="independent transitions"):
        DPTSampler(room, 8, 4, query="beyond_context")
    with pytest.raises(ValueError, match="`query` must be one of"):
        DPTSampler(uniform_room, 8, 4, query="context")
    with pytest.raises(ValueError, match="algo.query must be one of"):
        DPT(query="context")


def test_episode_tables_match_a_loop():
    rng = np.random.default_rng(0)
    done = rng.random((5, 17)) < 0.3
    done[:, -1] = True
    done[2, :-1] = False
    tables = episode_tables(done)
    for r in range(5):
        ends = np.flatnonzero(done[r])
        starts = np.concatenate([[0], ends[:-1] + 1])
        assert tables["episodes"][r] == len(ends)
        np.testing.assert_array_equal(tables["starts"][r, : len(ends)], starts)
        np.testing.assert_array_equal(tables["lens"][r, : len(ends)], ends - starts + 1)
        assert (tables["lens"][r, len(ends) :] == 0).all()


def _draws(spec, tables, draws=64):
    fn = jax.jit(jax.vmap(lambda s: draw_index(spec, tables, batch_key(0, s))))
    return jax.device_get(fn(jnp.arange(draws)))


def test_any_start_runs_on_with_exactly_one_spare_episode():
    # One record, five episodes of 3 steps (ends at 2, 5, 8, 11, 14).
    # Windows of num_episodes=2, episode_stride=2, starting "any"where:
    # episodes 0 and 2 fit, and episode 4 is there to run on into
    # (count - n * k = 1), so the window starts at a uniform step of episode
    # 0 (0, 1 or 2) and reads on through episodes 2 and 4, never padded.
    # (Without the run-on it would start at the start of episode 0, 1 or 2:
    # steps 0, 3 or 6.)
    done = np.zeros((1, 15), bool)
    done[0, [2, 5, 8, 11, 14]] = True
    spec = BatchSpec(
        kind="windows", batch_size=16, length=6, num_steps=15, num_records=1,
        num_episodes=2, episode_stride=2, window_start="any",
    )  # fmt: skip
    assert not spec.contiguous
    tables = jax.device_put(index_tables(spec, done, np.zeros(1, np.int32)))
    index = _draws(spec, tables)
    steps = np.array([0, 1, 2, 6, 7, 8, 12, 13, 14])  # episodes 0, 2, 4
    idx = index["idx"].reshape(-1, 6)
    starts = idx[:, 0]
    assert set(starts.tolist()) == {0, 1, 2}
    assert index["mask"].all()
    for row in idx:
        np.testing.assert_array_equal(row, steps[row[0] : row[0] + 6])


def test_padding_after_a_short_episode_is_zero_in_every_field():
    # Episodes of 2 and 4 steps; windows of one episode of up to 4 steps:
    # the 2-step episode leaves 2 padded positions, whose fields are zero
    # (the host sampler's batches; the loss's mask and DT's return-to-go read
    # them as "nothing"), while the data themselves are nowhere zero.
    done = np.zeros((1, 6), bool)
    done[0, [1, 5]] = True
    spec = BatchSpec(
        kind="windows", batch_size=32, length=4, num_steps=6, num_records=1,
        num_episodes=1, window_start="episode",
    )  # fmt: skip
    tables = index_tables(spec, done, np.zeros(1, np.int32))
    data = jax.device_put({
        "obs": np.arange(1, 7, dtype=np.int32)[None],
        "action": np.full((1, 6), 3, np.int32),
        "reward": np.full((1, 6), 0.5, np.float32),
        "done": np.ones((1, 6), bool),
        **tables,
    })  # fmt: skip
    index = jax.jit(lambda d: draw_index(spec, d, batch_key(1, 0)))(data)
    batch = jax.device_get(gather(spec, data, index))
    mask = batch["mask"]
    assert (~mask).any() and mask.any()  # both episodes drawn
    for name in ("obs", "action", "reward", "done"):
        assert (batch[name][~mask] == 0).all(), name
        assert (batch[name][mask] != 0).all(), name


def test_any_start_without_a_spare_episode_starts_at_an_episode_start():
    # Four episodes of 3 steps (ends 2, 5, 8, 11); windows of 2 episodes 2
    # apart, "any" start: count - n * k = 0 leaves no episode to run on
    # into, so the window is episodes (0, 2) or (1, 3) from their first step.
    done = np.zeros((1, 12), bool)
    done[0, [2, 5, 8, 11]] = True
    spec = BatchSpec(
        kind="windows", batch_size=16, length=6, num_steps=12, num_records=1,
        num_episodes=2, episode_stride=2, window_start="any",
    )  # fmt: skip
    tables = jax.device_put(index_tables(spec, done, np.zeros(1, np.int32)))
    index = _draws(spec, tables)
    windows = {tuple(row) for row in index["idx"].reshape(-1, 6).tolist()}
    assert windows == {(0, 1, 2, 6, 7, 8), (3, 4, 5, 9, 10, 11)}
    assert index["mask"].all()


def test_dpt_context_starts_reach_the_last_window_of_known_successors():
    # Step 3 only truncated and step 7 (the record's last) have no stored
    # successor: the context steps are 0, 1, 2, 4, 5, 6, and windows of 3
    # start at any of the first 4, the last one included.
    done = np.zeros((1, 8), bool)
    done[0, [3, 7]] = True
    spec = BatchSpec(
        kind="context_set", batch_size=16, length=3, num_steps=8, num_records=1
    )
    assert not spec.contiguous
    tables = index_tables(
        spec, done, np.zeros(1, np.int32), terminated=np.zeros((1, 8), bool)
    )
    index = _draws(spec, jax.device_put(tables))
    windows = {tuple(row) for row in index["idx"].reshape(-1, 3).tolist()}
    assert windows == {(0, 1, 2), (1, 2, 4), (2, 4, 5), (4, 5, 6)}


def test_batch_keys_are_apart_from_the_models_rng_streams():
    # The model's nnx.Rngs(seed) folds a counter into key(seed) for every
    # draw of its streams (parameters, dropout); batches of the same seed
    # must not reuse those keys.
    from flax import nnx

    rngs = nnx.Rngs(3)
    model_keys = [rngs.params() for _ in range(8)] + [rngs.dropout() for _ in range(8)]
    model = {tuple(np.asarray(jax.random.key_data(k)).tolist()) for k in model_keys}
    batches = {
        tuple(np.asarray(jax.random.key_data(batch_key(3, s))).tolist())
        for s in range(16)
    }
    assert len(batches) == 16 and not batches & model
