"""The XLand-100B reader's checks and splits (pass 10 of the mutation passes).

Each test builds its own tiny HDF5 file in memory (h5py's ``core`` driver,
nothing on disk, nothing downloaded) and calls the reader's steps with a
stand-in env (``horizon``, ``num_tasks``).
"""

import itertools
import types
from pathlib import Path

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

from agentrl.data import xland100b as xl  # noqa: E402

FILE = Path("tiny.hdf5")
_names = itertools.count()


def _file():
    name = f"mem-{next(_names)}.hdf5"
    return h5py.File(name, "w", driver="core", backing_store=False)


def _group(f, name, ruleset, histories=1, steps=6, view=(3, 3)):
    g = f.create_group(name)
    g.attrs["env-id"] = "XLand-MiniGrid-R1-9x9"
    g.attrs["ruleset-id"] = ruleset
    g.create_dataset("states", data=np.zeros((histories, steps, *view), np.uint8))
    g.create_dataset("actions", data=np.zeros((histories, steps), np.uint8))
    g.create_dataset("rewards", data=np.zeros((histories, steps), np.float16))
    g.create_dataset("dones", data=np.zeros((histories, steps), bool))
    return g


def _env(num_tasks=16, horizon=3):
    return types.SimpleNamespace(num_tasks=num_tasks, horizon=horizon)


def test_groups_are_read_in_numeric_order():
    with _file() as f:
        for n in (10, 2, 0, 1, 11):
            _group(f, str(n), n)
        assert xl._task_groups(FILE, f) == ["0", "1", "2", "10", "11"]


def test_states_with_a_view_that_is_not_square_are_refused():
    with _file() as f:
        _group(f, "0", 0, view=(3, 4))
        with pytest.raises(ValueError, match="0/states is uint8"):
            xl._task_groups(FILE, f)


def test_a_ruleset_id_past_the_table_is_refused():
    with _file() as f:
        _group(f, "0", 15)
        assert xl._import_steps(FILE, f, ["0"], _env(), "xland", {})[2] == {"0": 15}
        _group(f, "1", 16)  # the table holds ids 0 .. 15
        with pytest.raises(ValueError, match=r"ruleset ids \[16\] are not tasks"):
            xl._import_steps(FILE, f, ["0", "1"], _env(), "xland", {})


def test_groups_of_histories_of_other_lengths_are_refused():
    with _file() as f:
        _group(f, "0", 0, steps=6)
        _group(f, "1", 1, steps=7)
        with pytest.raises(ValueError, match=r"groups hold histories of \[6, 7\]"):
            xl._import_steps(FILE, f, ["0", "1"], _env(), "xland", {})


def test_an_episode_still_running_at_the_horizon_is_refused():
    # horizon 3: a step that is the 3rd of its episode must end it (xminigrid
    # truncates there); episodes of 3 and 1 steps, then 3 with a done, pass
    xl._check_episodes(FILE, "0", np.array([[0, 0, 1, 1, 0, 0, 1]], bool), 3)
    with pytest.raises(ValueError, match="longer than the env's horizon 3"):
        xl._check_episodes(FILE, "0", np.array([[0, 0, 1, 0, 0, 0]], bool), 3)


def test_table_mode_draws_distinct_validation_and_test_rulesets_outside_the_file():
    # 10 rulesets in the file of a 16-table: 6 outside; 2 validation, 2 test
    with _file() as f:
        rulesets = {str(i): i for i in range(10)}
        for seed in range(4):
            split = xl._table_split(FILE, f, _env(16), rulesets, 0.6, seed)
            val, test = set(split.validation.tolist()), set(split.test.tolist())
            assert len(val) == 2 and len(test) == 2 and not val & test
            assert val | test <= set(range(10, 16))
            np.testing.assert_array_equal(split.train, np.arange(10))


def test_table_mode_with_few_rulesets_outside_gives_test_ones_first():
    # 4 of 7 in the file: "file" would hold out 1 + 1; 3 outside: both fit.
    # 10 of 12: 2 outside, 2 + 2 wanted: the 2 test ones, no validation one
    with _file() as f:
        split = xl._table_split(
            FILE, f, _env(12), {str(i): i for i in range(10)}, 0.6, 0
        )
        assert len(split.validation) == 0
        assert sorted(split.test.tolist()) == [10, 11]
        split = xl._table_split(
            FILE, f, _env(13), {str(i): i for i in range(10)}, 0.6, 0
        )
        assert len(split.validation) == 1 and len(split.test) == 2
        assert not set(split.validation.tolist()) & set(split.test.tolist())


def test_a_file_of_one_ruleset_holds_out_one_test_ruleset():
    assert xl.held_out_counts(1, 0.8) == (0, 1)


def test_generated_files_hold_one_group_per_ruleset_in_order(tmp_path):
    # 10 histories cycle over the shuffled train rulesets (more histories
    # than rulesets), in chunks of 3: still one group per ruleset, sorted
    pytest.importorskip("xminigrid")
    from agentrl.envs import make
    from agentrl.history import History

    env = make("xland", num_rulesets=6, horizon=3)

    def histories(params, key, num_episodes, task_id):
        n, steps = task_id.shape[0], num_episodes * 3
        zeros = np.zeros((n, steps), np.int32)
        return History(
            obs=np.zeros((n, steps, env.view_size, env.view_size, 2), np.uint8),
            action=zeros,
            reward=zeros.astype(np.float32),
            terminated=zeros.astype(bool),
            truncated=zeros.astype(bool),
            episode=zeros,
            optimal_action=None,
            task_id=np.asarray(task_id),
            params=params,
        )

    path = xl.generate_hdf5(tmp_path / "g.hdf5", env, histories, 10, 1, chunk_size=3)
    with h5py.File(path, "r") as f:
        ids = [int(f[g].attrs["ruleset-id"]) for g in sorted(f, key=int)]
        counts = [f[g]["actions"].shape[0] for g in sorted(f, key=int)]
    assert ids == sorted(set(ids)) and sum(counts) == 10
