"""Hand-made histories through the dataset format: integrity checks, shards, summary."""

import json
import os
import shutil

import numpy as np
import pytest

import agentrl.data.shards as shards
from agentrl import envs
from agentrl.data import DatasetIntegrityError, open_dataset, write_dataset
from agentrl.data.columns import raw_records, split_columns
from agentrl.data.reader import check_metadata
from agentrl.data.writer import env_identity, write_histories
from agentrl.history import History

HORIZON, EPISODES = 3, 2
STEPS = HORIZON * EPISODES
TRAIN_IDS = [3, 1, 4, 1, 0]  # task 1 twice: 4 distinct tasks


def hand_history(ids, bad_record=None, bad=np.nan, next_obs=False):
    """Histories ``[len(ids), STEPS]`` whose values say their task and step
    (reward ``task + step / 10``); ``bad_record`` gets a ``bad`` reward."""
    n, s = len(ids), np.arange(STEPS)
    base = np.asarray(ids)[:, None] * 100 + s
    reward = (np.asarray(ids)[:, None] + s / 10).astype(np.float32)
    if bad_record is not None:
        reward[bad_record, 2] = bad
    obs = np.stack([base % 5, base % 7], -1).astype(np.int32)
    return History(
        obs=obs,
        action=(base % 4).astype(np.int32),
        reward=reward,
        terminated=np.broadcast_to(s % HORIZON == 1, (n, STEPS)).copy(),
        truncated=np.broadcast_to(s % HORIZON == HORIZON - 1, (n, STEPS)).copy(),
        episode=np.broadcast_to(s // HORIZON, (n, STEPS)).astype(np.int32),
        optimal_action=None,
        task_id=np.asarray(ids, np.int32),
        params={
            "max_steps_in_episode": np.full(n, HORIZON, np.int32),
            "goal": np.stack([np.asarray(ids) % 5, np.asarray(ids) // 5], -1),
        },
        next_obs=obs + 1 if next_obs else None,
    )


def hand_metadata(train_ids=TRAIN_IDS):
    return {
        "env": {"name": "darkroom", "overrides": {"size": 5, "horizon": HORIZON}},
        "source": {"name": "hand", "settings": {}},
        "seed": 0,
        "num_tasks": len(train_ids),
        "num_episodes": EPISODES,
        "horizon": HORIZON,
        "num_steps": STEPS,
        "stateless_obs": False,
        "task_space": "finite",
        "task_ids": {"train": list(train_ids)},
        "split": {
            "train": [0, 1, 3, 4],
            "validation": [7],
            "test": [9],
            "seed": 0,
            "train_fraction": 0.8,
        },
    }


def write_hand(path, chunks=None, train_ids=TRAIN_IDS, **kw):
    """The dataset of ``train_ids``' hand histories, in chunks of 2 records."""
    if chunks is None:
        chunks = [hand_history(train_ids[i : i + 2]) for i in range(0, 5, 2)]
    return write_histories(path, {"train": chunks}, hand_metadata(train_ids), **kw)


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    return write_hand(tmp_path_factory.mktemp("hand") / "ds")


def edited(src, dst, edit):
    """A copy of dataset ``src`` at ``dst`` with its agentrl.json edited."""
    shutil.copytree(src, dst)
    meta = json.loads((dst / "agentrl.json").read_text())
    edit(meta)
    (dst / "agentrl.json").write_text(json.dumps(meta))
    return dst


def test_records_read_back_in_task_order_with_their_steps(hand):
    h = open_dataset(hand).load_history("train")
    np.testing.assert_array_equal(h.task_id, TRAIN_IDS)
    np.testing.assert_allclose(h.reward[:, 4], np.asarray(TRAIN_IDS) + 0.4, 1e-6)
    assert h.terminated.dtype == bool and h.terminated[0].tolist() == [
        False, True, False, False, True, False,
    ]  # fmt: skip
    assert h.truncated[0].tolist() == [False, False, True, False, False, True]


def test_summary_counts_distinct_tasks_and_every_step(hand):
    summary = open_dataset(hand).summary()
    assert summary["split"]["distinct_train_tasks"] == 4  # 3, 1, 4, 0
    assert summary["records"] == {"train": 5}
    assert summary["transitions"] == 5 * STEPS  # records x steps per history


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (lambda m: m.update(num_tasks=0), "'num_tasks' must be an integer >= 1"),
        (lambda m: m.update(num_steps=STEPS + 1), "'num_steps' 7 must be"),
        (lambda m: m["split"].pop("validation"), "'split' must be"),
        (lambda m: m.update(stateless_obs=0), "'stateless_obs' must be true or"),
        (lambda m: m["task_ids"].update(train=TRAIN_IDS[:4]), "holds 5 records"),
    ],
    ids=["no tasks", "steps past episodes x horizon", "no validation", "0", "extra"],
)
def test_metadata_that_disagrees_is_refused(hand, tmp_path, edit, fragment):
    bad = edited(hand, tmp_path / "bad", edit)
    with pytest.raises(DatasetIntegrityError, match=fragment):
        open_dataset(bad, verify="none").load_history("train")


@pytest.mark.parametrize(
    "name, entry",
    [("..", {"bytes": 1, "sha256": "0" * 64}), ("x", {"bytes": 1, "sha256": "0" * 65})],
    ids=["parent", "long digest"],
)
def test_a_file_entry_must_be_a_plain_name_with_a_digest(hand, name, entry):
    meta = json.loads((hand / "agentrl.json").read_text())
    meta["files"][name] = entry
    with pytest.raises(DatasetIntegrityError, match=repr(name)):
        check_metadata(hand / "agentrl.json", meta)


def test_verify_size_still_checks_every_size(hand, tmp_path):
    bad = shutil.copytree(hand, tmp_path / "trunc")
    (shard,) = bad.glob("*.array_record-*")
    os.truncate(shard, shard.stat().st_size - 1)
    with pytest.raises(DatasetIntegrityError, match=f"{shard.name}: size"):
        open_dataset(bad, verify="size")
    open_dataset(bad, verify="none")  # no file checks at all


def test_record_indices_are_python_ranged(hand):
    ds = open_dataset(hand)
    assert int(ds.record("train", -5)["task_id"]) == TRAIN_IDS[0]
    for index in (5, -6):
        with pytest.raises(IndexError, match="the split has 5 records"):
            ds.records("train", [index])


def test_shards_hold_shard_bytes_over_the_first_record_and_the_rest_last(
    hand, tmp_path, monkeypatch
):
    size = len(raw_records(open_dataset(hand), "train")[0])
    monkeypatch.setattr(shards, "SHARD_BYTES", 2 * size + 1)  # 2 records a shard
    monkeypatch.setattr(shards, "shard_workers", lambda: 1)
    ds = open_dataset(write_hand(tmp_path / "three"))
    names = sorted(p.name for p in ds.path.glob("*.array_record-*"))
    assert [n[-14:] for n in names] == [f"{i:05d}-of-00003" for i in range(3)]
    info = json.loads((ds.path / "dataset_info.json").read_text())
    assert [int(n) for n in info["splits"][0]["shardLengths"]] == [2, 2, 1]
    np.testing.assert_array_equal(ds.load_history("train").task_id, TRAIN_IDS)


def test_a_bad_record_is_reported_in_the_shard_that_holds_it(tmp_path, monkeypatch):
    monkeypatch.setattr(shards, "SHARD_BYTES", 1)  # one record a shard
    monkeypatch.setattr(shards, "shard_workers", lambda: 1)
    chunks = [hand_history(TRAIN_IDS[:3], bad_record=1), hand_history(TRAIN_IDS[3:])]
    ds = open_dataset(write_hand(tmp_path / "nan", chunks))
    ds.records("train", [0, 2, 3, 4])
    with pytest.raises(DatasetIntegrityError, match="00001-of-00005: record 1 "):
        ds.record("train", 1)


def test_a_split_short_of_its_task_ids_is_not_written(tmp_path):
    with pytest.raises(ValueError, match="got 4 histories, its task ids list 5"):
        write_hand(tmp_path / "short", [hand_history(TRAIN_IDS[:4])])
    assert list(tmp_path.iterdir()) == []


def test_bools_are_stored_as_uint8_and_next_obs_is_recorded(tmp_path):
    chunks = [hand_history(TRAIN_IDS, next_obs=True)]
    ds = open_dataset(write_hand(tmp_path / "next", chunks))
    record = ds.record("train", 0)
    assert record["terminated"].dtype == np.uint8  # the format's bool encoding
    assert record["terminated"].tolist() == [0, 1, 0, 0, 1, 0]
    assert ds.metadata["has_next_obs"] is True
    assert ds.metadata["has_optimal_action"] is False
    h = ds.load_history("train")
    np.testing.assert_array_equal(h.next_obs, h.obs + 1)


def test_whole_split_decoding_keeps_records_whose_scalars_swap_lengths(tmp_path):
    """Task id 200 and a param of 3 in one record, 3 and 200 in the next:
    their varints swap lengths, so both records have the same length but
    their arrays lie at other offsets."""
    history = hand_history([0, 0])
    history = history.replace(
        task_id=np.array([200, 3], np.int32),
        params={**history.params, "max_steps_in_episode": np.array([3, 200])},
        obs=np.arange(2 * STEPS * 2, dtype=np.int32).reshape(2, STEPS, 2),
        reward=np.array([np.arange(STEPS), -np.arange(STEPS)], np.float32),
    )
    meta = {**hand_metadata([200, 3]), "task_space": "continuous"}
    ds = open_dataset(write_histories(tmp_path / "swap", {"train": [history]}, meta))
    raw = raw_records(ds, "train")
    assert len(raw[0]) == len(raw[1]) and raw[0] != raw[1]
    columns = split_columns(ds, "train", ("obs", "reward"))
    np.testing.assert_array_equal(columns["obs"], history.obs)
    np.testing.assert_array_equal(columns["reward"], history.reward)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
def test_whole_split_decoding_refuses_non_finite_values(tmp_path, bad):
    chunks = [hand_history(TRAIN_IDS, bad_record=3, bad=bad)]
    ds = open_dataset(write_hand(tmp_path / "bad", chunks))
    with pytest.raises(DatasetIntegrityError, match="record 3 .*non-finite"):
        split_columns(ds, "train", ("obs", "reward"))


BANDIT = envs.make("gaussian_bandit", horizon=4)


def keyed_histories(extra_steps=0):
    """A ``histories`` callable whose rewards are uniform draws of its key."""
    import jax

    def histories(params, key, num_episodes, task_id):
        n, steps = task_id.shape[0], num_episodes * BANDIT.horizon + extra_steps
        zeros = np.zeros((n, steps), np.int32)
        return History(
            obs=zeros,
            action=zeros,
            reward=jax.random.uniform(key, (n, steps)),
            terminated=zeros.astype(bool),
            truncated=zeros.astype(bool),
            episode=zeros,
            optimal_action=None,
            task_id=task_id,
            params=params,
        )

    return histories


def test_every_chunk_of_every_split_gets_its_own_key(tmp_path):
    out = write_dataset(tmp_path / "k", BANDIT, keyed_histories(), 10, 1, chunk_size=2)
    ds = open_dataset(out)
    assert ds.num_records("train") == 8 and ds.num_records("test") == 2
    rows = np.concatenate([ds.load_history(s).reward for s in ("train", "test")])
    assert len({r.tobytes() for r in rows}) == 10  # no two records share a draw


def test_histories_longer_than_the_episodes_are_refused(tmp_path):
    with pytest.raises(ValueError, match="gave 5 steps per task.*needs 4"):
        write_dataset(tmp_path / "x", BANDIT, keyed_histories(1), 4, 1)
    assert list(tmp_path.iterdir()) == []


def test_inferred_overrides_are_the_arguments_that_differ_from_the_default():
    env = envs.make("darkroom", size=5)
    assert env_identity(env, None, None) == ("darkroom", {"size": 5})
    assert env_identity(envs.make("darkroom"), None, None) == ("darkroom", {})
