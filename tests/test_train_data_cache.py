"""Generated datasets kept and linked into later runs (agentrl.train.data_cache).

- a kept dataset is linked (the same files, no copy) into a run that has
  none, opens there with its checksums, and the entry's ``fields.json``
  stays out of the run;
- another data config (a seed, a source setting) finds nothing; a dataset
  read from a path, and a source that reads files, are never kept;
- an entry a killed writer left without ``fields.json`` is no entry and is
  replaced;
- ``share_dataset`` keeps a dataset it generates at once, before any
  training, so a run started meanwhile on the same data finds it;
- through ``reproduce``: a second experiment with the same data trains on
  the first one's histories without generating any; a dataset a run had
  before (perhaps from other code) is not kept;
- a run's own dataset (a run stopped before its ``config.json``) opened
  by a config that would generate other histories is refused, naming each
  setting; the same config opens it; with a ``config.json`` it is left to
  the resume check.
"""

from __future__ import annotations

import dataclasses
import os
import shutil

import pytest

import agentrl.train.data as train_data
from agentrl.data import open_dataset
from agentrl.envs.registry import make as make_env
from agentrl.evaluate.reproduce import DATASETS, fit_sharing_data
from agentrl.train.data import prepare_dataset
from agentrl.train.data_cache import (
    FIELDS_FILE,
    dataset_fields,
    entry_path,
    keep_dataset,
    reuse_dataset,
    share_dataset,
)
from agentrl.train.experiments import load_experiment


def _config(**data):
    config = load_experiment("ad_darkroom", "smoke")
    return dataclasses.replace(config, data=dataclasses.replace(config.data, **data))


def _generate(config, run_dir):
    env = make_env(config.data.env, **dict(config.data.env_args))
    prepare_dataset(config, env, run_dir, progress=False)


def test_a_kept_dataset_is_linked_into_a_new_run(tmp_path):
    config = _config()
    folder, first, second = tmp_path / "kept", tmp_path / "a", tmp_path / "b"
    assert not reuse_dataset(folder, config.data, second)  # nothing kept yet
    assert not second.exists()
    _generate(config, first)
    keep_dataset(folder, config.data, first)
    assert reuse_dataset(folder, config.data, second)
    made, linked = first / "dataset", second / "dataset"
    names = sorted(p.name for p in made.iterdir())
    assert sorted(p.name for p in linked.iterdir()) == names  # no fields.json
    for name in names:
        assert os.path.samefile(made / name, linked / name)  # links, not copies
    opened = open_dataset(linked, verify="full")
    assert opened.metadata == open_dataset(made).metadata
    assert not reuse_dataset(folder, config.data, second)  # it has one now


def test_a_runs_dataset_of_other_data_settings_is_refused(tmp_path):
    config, run = _config(), tmp_path / "run"
    _generate(config, run)
    _generate(config, run)  # the same settings: opened again
    other = _config(seed=7, source="random", source_args=())
    with pytest.raises(ValueError, match="other data settings") as err:
        _generate(other, run)
    for said in ("seed: 0 there, 7 here", "'q_learning'", "'random'"):
        assert said in str(err.value)
    for field, value in (("num_episodes", 7), ("split_fraction", 0.5)):
        with pytest.raises(ValueError, match=f"{field}: "):
            _generate(_config(**{field: value}), run)
    corner = _config(env_args=(("start", "corner"),))
    with pytest.raises(ValueError, match="start: 'center' there, 'corner' here"):
        _generate(corner, run)
    # a run with its config.json is resumable_config's to judge (a source
    # that gained a setting since must not make its runs unresumable here)
    (run / "config.json").write_text("{}")
    _generate(other, run)


def test_another_config_finds_nothing_and_some_are_never_kept(tmp_path):
    config = _config()
    folder = tmp_path / "kept"
    _generate(config, tmp_path / "a")
    keep_dataset(folder, config.data, tmp_path / "a")
    other_seed = _config(seed=config.data.seed + 1)
    other_source = _config(source_args=(("learning_rate", 0.3),))
    for other in (other_seed, other_source):
        assert dataset_fields(other.data) != dataset_fields(config.data)
        assert not reuse_dataset(folder, other.data, tmp_path / "b")
    assert dataset_fields(_config(path=str(tmp_path / "a" / "dataset")).data) is None
    reads_files = _config(source="learned_learner", source_args=(("run_dir", "x"),))
    assert dataset_fields(reads_files.data) is None


def test_an_incomplete_entry_is_no_entry_and_is_replaced(tmp_path):
    config = _config()
    folder = tmp_path / "kept"
    _generate(config, tmp_path / "a")
    entry = entry_path(folder, dataset_fields(config.data))
    entry.mkdir(parents=True)
    (entry / "half_written").write_text("")
    assert not reuse_dataset(folder, config.data, tmp_path / "b")
    keep_dataset(folder, config.data, tmp_path / "a")
    assert (entry / FIELDS_FILE).is_file() and not (entry / "half_written").exists()
    assert reuse_dataset(folder, config.data, tmp_path / "b")


def test_a_shared_dataset_is_kept_before_training(tmp_path):
    config = _config()
    folder = tmp_path / "kept"
    share_dataset(folder, config, tmp_path / "a")
    assert (tmp_path / "a" / "dataset").is_dir()
    assert not (tmp_path / "a" / "checkpoints").exists()  # nothing trained
    entry = entry_path(folder, dataset_fields(config.data))
    assert (entry / FIELDS_FILE).is_file()
    share_dataset(folder, config, tmp_path / "b")
    assert os.path.samefile(
        tmp_path / "a" / "dataset" / "agentrl.json",
        tmp_path / "b" / "dataset" / "agentrl.json",
    )


@pytest.mark.long
def test_reproduce_trains_a_second_experiment_on_the_first_ones_data(
    tmp_path, monkeypatch
):
    config = load_experiment("ad_darkroom", "smoke")
    short = dataclasses.replace(config.train, steps=4, log_every=2)
    config = dataclasses.replace(config, train=short)
    fit_sharing_data(config, tmp_path / "first")
    assert len(list((tmp_path / DATASETS).iterdir())) == 1

    def no_generation(*args, **kwargs):
        raise AssertionError("the dataset was generated again")

    monkeypatch.setattr(train_data, "write_dataset", no_generation)
    other = dataclasses.replace(config, train=dataclasses.replace(short, lr=1e-4))
    run_dir = fit_sharing_data(other, tmp_path / "second")
    assert (run_dir / "checkpoints").is_dir()
    assert os.path.samefile(
        tmp_path / "first" / "dataset" / "agentrl.json",
        run_dir / "dataset" / "agentrl.json",
    )
    # a run that had its dataset already (made by other code, perhaps) is
    # trained on, but its dataset is not kept under this code's key
    monkeypatch.undo()
    shutil.rmtree(tmp_path / DATASETS)
    fit_sharing_data(other, tmp_path / "second")
    assert not (tmp_path / DATASETS).exists()
    monkeypatch.setattr(train_data, "write_dataset", no_generation)
    with pytest.raises(AssertionError, match="generated again"):
        fit_sharing_data(
            dataclasses.replace(other, data=_config(seed=7).data), tmp_path / "third"
        )
