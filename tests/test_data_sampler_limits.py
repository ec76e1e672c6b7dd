"""Sampler limits: the cache limit is on the decoded split; histories with
fewer complete episodes than a window spans are refused at construction."""

import jax
import numpy as np
import pytest

from agentrl import envs
from agentrl.data import ADSampler, open_dataset, write_dataset, write_histories
from agentrl.data.device_sampler import BatchSpec, index_tables
from agentrl.history import episode_index
from agentrl.sources import source_histories

# 32 histories of 20 episodes of 50 steps: the decoded split (448 kB) is
# larger than its compressed file (one 128 kB block)
ROOM = envs.make("darkroom", size=3, horizon=50)
#: the keys write_histories adds to a dataset's metadata
ADDED = ("format_version", "agentrl_version", "created", "has_optimal_action")
ADDED += ("has_next_obs", "param_names", "files")


@pytest.fixture(scope="module")
def room(tmp_path_factory):
    out = tmp_path_factory.mktemp("l") / "room"
    write_dataset(out, ROOM, source_histories("q_learning", ROOM), 32, 20, 0)
    return open_dataset(out)


def _decoded_size(sampler) -> int:
    data = sampler.decoded()
    fields = [f for f in sampler.fields if f != "task_id"]
    return sum(x.nbytes for f in fields for x in jax.tree.leaves(data[f]))


def test_the_cache_limit_is_on_the_decoded_split_not_the_files(room):
    files = room.metadata["files"]
    disk = sum(v["bytes"] for k, v in files.items() if "-train." in k)
    decoded = _decoded_size(ADSampler(room, 4, num_transitions=5))
    assert disk < decoded
    between = ADSampler(room, 4, num_transitions=5, cache_bytes=(disk + decoded) // 2)
    assert not between.cached
    assert ADSampler(room, 4, num_transitions=5, cache_bytes=decoded).cached
    assert between.decoded_bytes() == decoded  # records of equal shapes: exact


@pytest.fixture(scope="module")
def short(room, tmp_path_factory):
    """``room`` with record 0's episodes run together: one complete episode."""
    history = jax.tree.map(np.asarray, room.load_history("train"))
    truncated = history.truncated.copy()
    truncated[0, :-1] = False
    done = truncated | history.terminated
    history = history.replace(
        truncated=truncated, episode=np.asarray(episode_index(done))
    )
    meta = {k: v for k, v in room.metadata.items() if k not in ADDED}
    out = tmp_path_factory.mktemp("l") / "short"
    return open_dataset(write_histories(out, {"train": [history]}, meta))


@pytest.mark.parametrize(
    ("kw", "need"),
    [
        (dict(num_episodes=2), 2),
        (dict(num_episodes=2, window_start="any", episode_stride=2), 3),
        (dict(num_episodes=2, episode_window="subset"), 2),
        (dict(num_episodes=2, cache_bytes=0), 2),
    ],
)
def test_too_few_episodes_are_refused_naming_the_record(short, kw, need):
    match = rf"split 'train': record 0 has 1 complete episodes.*needs {need} "
    with pytest.raises(ValueError, match=match):
        ADSampler(short, 4, **kw)


def test_windows_that_need_no_episode_boundaries_still_work(short):
    ADSampler(short, 4, num_transitions=7).batch(0)
    ADSampler(short, 4, num_episodes=2, window_start="any").batch(0)


def test_the_device_tables_refuse_too_few_episodes():
    """A record of 40 steps whose episodes ran long: 2 complete episodes,
    4 wanted (the device sampler once repeated episodes to fill them)."""
    done = np.zeros((1, 40), bool)
    done[0, [14, 33]] = True
    spec = BatchSpec(
        kind="windows",
        batch_size=1,
        length=40,
        num_steps=40,
        num_records=1,
        num_episodes=4,
    )
    with pytest.raises(ValueError, match="record 0 has 2 complete episodes.*needs 4"):
        index_tables(spec, done, np.zeros(1, np.int32))
