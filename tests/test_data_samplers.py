"""AD and DPT samplers: determinism in (seed, step), shapes, alignment, sharding."""

import jax
import numpy as np
import pytest

from agentrl import envs
from agentrl.data import (
    ADSampler,
    DPTSampler,
    data_sharding,
    open_dataset,
    write_dataset,
)
from agentrl.envs import grid
from agentrl.sources import source_histories

ROOM = envs.make("darkroom_hard", size=5, horizon=6)  # terminates: ragged episodes


@pytest.fixture(scope="module")
def room(tmp_path_factory):
    out = tmp_path_factory.mktemp("s") / "room"
    write_dataset(
        out, ROOM, source_histories("dpt_rollin", ROOM), 12, 6, 0, chunk_size=12
    )
    return open_dataset(out)


@pytest.fixture(scope="module")
def bandit(tmp_path_factory):
    env = envs.make("gaussian_bandit", horizon=30)
    out = tmp_path_factory.mktemp("s") / "bandit"
    write_dataset(
        out, env, source_histories("dpt_rollin", env), 10, 1, 0, chunk_size=10
    )
    return open_dataset(out)


def _equal(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)


def test_ad_windows_are_deterministic_and_resumable(room):
    s = ADSampler(room, 8, num_episodes=2, seed=3)
    _equal(s.batch(5), ADSampler(room, 8, num_episodes=2, seed=3).batch(5))
    assert not np.array_equal(s.batch(5)["task_id"], s.batch(6)["task_id"]) or (
        not np.array_equal(s.batch(5)["obs"], s.batch(6)["obs"])
    )
    it = s.iterator(start_step=4)
    _equal(next(it), s.batch(4))
    _equal(next(it), s.batch(5))
    uncached = ADSampler(room, 8, num_episodes=2, seed=3, cache_bytes=0)
    assert uncached._cache is None
    _equal(uncached.batch(5), s.batch(5))


def test_ad_episode_windows_hold_whole_episodes(room):
    s = ADSampler(room, 16, num_episodes=2, seed=0)
    b = s.batch(0)
    assert b["obs"].shape == (16, 12) and b["reward"].shape == (16, 12)
    assert b["done"].dtype == bool and b["task_id"].shape == (16,)
    start = int(grid.cell_id(grid.start_position(5, "center"), 5))
    for row in range(16):
        length = int(b["mask"][row].sum())
        assert b["mask"][row, :length].all() and not b["mask"][row, length:].any()
        assert b["obs"][row, 0] == start  # a window starts on an episode start
        assert b["done"][row, length - 1]  # ... and ends on an episode end
        assert b["done"][row, :length].sum() == 2
        assert not b["done"][row, length:].any() and (b["obs"][row, length:] == 0).all()
    lengths = b["mask"].sum(1)
    assert lengths.min() < 12  # sparse room terminates: ragged windows


def _episodes(record_obs, record_done):
    """The episodes of one record as a list of index arrays."""
    ends = np.flatnonzero(record_done)
    starts = np.concatenate([[0], ends[:-1] + 1])
    return [np.arange(a, b + 1) for a, b in zip(starts, ends, strict=True)]


def test_ad_strided_windows_take_every_kth_episode(room):
    s = ADSampler(room, 16, num_episodes=2, episode_stride=2, seed=0)
    b = s.batch(0)
    records = room.load_history("train")
    done = np.logical_or(records.terminated, records.truncated)
    firsts = set()
    for row in range(16):
        length = int(b["mask"][row].sum())
        window = (b["obs"][row, :length], b["action"][row, :length])
        matches = []
        for r in np.flatnonzero(records.task_id == b["task_id"][row]):
            eps = _episodes(records.obs[r], done[r])
            for e in range(len(eps) - 2):
                pos = np.concatenate([eps[e], eps[e + 2]])
                if len(pos) == length and all(
                    np.array_equal(x[r, pos], w)
                    for x, w in zip((records.obs, records.action), window, strict=True)
                ):
                    matches.append(e)
        assert matches, row  # episodes e and e + 2 of a record of this task
        firsts.update(matches)
        assert b["done"][row, :length].sum() == 2 and not b["mask"][row, length:].any()
    assert len(firsts) > 1  # the first episode is drawn, not fixed
    # stride 1 is the consecutive window, batch for batch
    _equal(
        ADSampler(room, 8, num_episodes=2, episode_stride=1, seed=3).batch(1),
        ADSampler(room, 8, num_episodes=2, seed=3).batch(1),
    )
    with pytest.raises(ValueError, match="spans 7 episodes; histories have 6"):
        ADSampler(room, 4, num_episodes=3, episode_stride=3)
    with pytest.raises(ValueError, match="`episode_stride` must be an integer >= 1"):
        ADSampler(room, 4, num_episodes=2, episode_stride=0)
    with pytest.raises(ValueError, match="needs `num_episodes`"):
        ADSampler(room, 4, num_transitions=4, episode_stride=2)


def test_ad_transition_windows_and_pairs(room):
    s = ADSampler(room, 6, num_transitions=10, paired=True, seed=1)
    b = s.batch(2)
    assert b["action"].shape == (6, 10) and b["mask"].all()
    np.testing.assert_array_equal(b["task_id"][0::2], b["task_id"][1::2])
    records = room.load_history("train")
    # each row is a contiguous slice of a record of that task
    for row in range(6):
        rec = np.flatnonzero(records.task_id == b["task_id"][row])
        hits = [
            (r, o)
            for r in rec
            for o in range(records.num_steps - 9)
            if np.array_equal(records.action[r, o : o + 10], b["action"][row])
            and np.array_equal(records.obs[r, o : o + 10], b["obs"][row])
        ]
        assert hits
    with pytest.raises(ValueError, match="`batch_size` must be even"):
        ADSampler(room, 5, num_transitions=4, paired=True)
    with pytest.raises(
        ValueError, match=r"`num_episodes` must be an integer in \[1, 6\]"
    ):
        ADSampler(room, 4, num_episodes=7)
    with pytest.raises(ValueError, match="exactly one of"):
        ADSampler(room, 4)


def test_dpt_samples_room(room):
    s = DPTSampler(room, 8, context_size=10, seed=0)
    b = s.batch(0)
    assert b["context_obs"].shape == (8, 10) and b["context_next_obs"].shape == (8, 10)
    assert b["context_reward"].dtype == np.float32
    assert b["query_obs"].shape == (8,) and b["label"].shape == (8,)
    _equal(b, DPTSampler(room, 8, context_size=10, seed=0).batch(0))
    start = int(grid.cell_id(grid.start_position(5, "center"), 5))
    for row in range(8):
        goal = grid.cell_pos(b["task_id"][row], 5)
        for t in range(10):  # next_obs is the successor of (obs, action) ...
            pos = grid.cell_pos(b["context_obs"][row, t], 5)
            nxt = grid.move(pos, b["context_action"][row, t], 5)
            reached = bool((nxt == goal).all())
            # ... but the goal terminates: then the next episode's first obs
            want = start if reached else int(grid.cell_id(nxt, 5))
            assert b["context_next_obs"][row, t] == want
            assert b["context_reward"][row, t] == float(reached)
        query = grid.cell_pos(b["query_obs"][row], 5)
        assert int(grid.steer(query, goal)) == b["label"][row]
    with pytest.raises(ValueError, match="`context_size` must be an integer in"):
        DPTSampler(room, 8, context_size=10_000)


@pytest.mark.long
def test_dpt_samples_bandit_and_sharding(bandit):
    mesh = jax.make_mesh((1,), ("data",))
    s = DPTSampler(bandit, 4, context_size=30, sharding=data_sharding(mesh))
    b = s.batch(0)
    assert isinstance(b["label"], jax.Array)
    assert b["context_obs"].sharding.spec == jax.sharding.PartitionSpec("data")
    assert b["context_obs"].shape == (4, 30, 1) and b["query_obs"].shape == (4, 1)
    means = bandit.load_history("train").params.means
    ids = list(bandit.task_ids("train"))
    for row in range(4):
        record = ids.index(int(b["task_id"][row]))
        assert int(b["label"][row]) == int(np.argmax(means[record]))


def test_sharding_must_divide_batch(bandit):
    mesh = jax.make_mesh((1,), ("data",))

    class Fake:  # a 4-device data axis without needing 4 devices
        spec = jax.sharding.PartitionSpec("data")

    Fake.mesh = type("M", (), {"shape": {"data": 4}})()
    with pytest.raises(ValueError, match="divisible by the 4 devices"):
        ADSampler(bandit, 6, num_transitions=5, sharding=Fake())
    ADSampler(bandit, 6, num_transitions=5, sharding=data_sharding(mesh))


def test_dpt_sampler_paired_rows_share_a_history(tmp_path):
    from agentrl import envs
    from agentrl.data import DPTSampler, open_dataset, write_dataset

    env = envs.make("bernoulli_bandit", num_arms=3, horizon=12)
    path = write_dataset(
        tmp_path / "b",
        env,
        source_histories("dpt_rollin", env),
        num_tasks=20,
        num_episodes=1,
        env_name="bernoulli_bandit",
    )
    sampler = DPTSampler(open_dataset(path), 8, 6, paired=True, seed=3)
    batch = sampler.host_batch(0)
    ids = batch["task_id"]
    assert (ids[0::2] == ids[1::2]).all()
    assert len(set(ids[0::2].tolist())) > 1
    # The two rows of a pair are different segments of the same history.
    assert not np.array_equal(
        batch["context_action"][0::2], batch["context_action"][1::2]
    )
    with pytest.raises(ValueError, match="even"):
        DPTSampler(open_dataset(path), 7, 6, paired=True)


def test_batches_are_checked_against_their_declared_shapes(room, bandit, monkeypatch):
    from agentrl.data import check_batch, samplers

    s = ADSampler(room, 4, num_episodes=2, seed=0)
    batch = s.batch(0)
    assert s.batch_shapes["reward"] == (4, 2 * ROOM.horizon)
    assert check_batch(batch, s.batch_shapes) is batch
    with pytest.raises(AssertionError, match="batch field 'reward'"):
        check_batch({**batch, "reward": batch["reward"][:, 1:]}, s.batch_shapes)
    with pytest.raises(AssertionError, match="batch fields differ"):
        check_batch({k: v for k, v in batch.items() if k != "mask"}, s.batch_shapes)
    # The sampler checks its own output: a context one step short is caught.
    take = samplers._take
    monkeypatch.setattr(samplers, "_take", lambda x, idx: take(x, idx[:, :-1]))
    with pytest.raises(AssertionError, match="batch field 'context_obs'"):
        DPTSampler(bandit, 4, 5).batch(0)


# Mutants the tests above let through (session 56's mutation pass).


def test_dpt_labels_are_the_oracle_action_of_the_query_state(room):
    # darkroom_hard's oracle steers from the query cell to the goal (task id
    # = goal cell). On these roll-ins the oracle's action at the step after
    # the query equals the query's in ~80% of draws, so one batch of 8 can
    # miss a label read one step off; 20 batches (160 queries) do not.
    s = DPTSampler(room, 8, context_size=10, seed=0)
    for step in range(20):
        b = s.batch(step)
        for row in range(8):
            goal = grid.cell_pos(b["task_id"][row], 5)
            query = grid.cell_pos(b["query_obs"][row], 5)
            assert int(grid.steer(query, goal)) == b["label"][row], (step, row)
