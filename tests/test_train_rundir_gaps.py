"""Run directories on resume: several checkpoints, what may change, the split."""

import json
import shutil

import pytest

from agentrl import configtools, envs
from agentrl.data import DatasetIntegrityError
from agentrl.train.data import prepare_dataset
from agentrl.train.experiments import load_experiment
from agentrl.train.rundir import read_split, resumable_config

CONFIG = configtools.override(
    load_experiment("ad_darkroom", "smoke"), {"train.steps": 8}
)


def fake_run(run_dir, checkpoints, config=CONFIG):
    """A run directory with ``config.json`` and complete checkpoints of
    ``checkpoints`` ({step: the config it recorded}), no arrays."""
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps(configtools.to_dict(config)))
    for step, recorded in checkpoints.items():
        (run_dir / "checkpoints" / str(step) / "meta").mkdir(parents=True)
        (run_dir / "checkpoints" / str(step) / "_CHECKPOINT_METADATA").write_text("{}")
        meta = {"step": step, "config": configtools.to_dict(recorded)}
        (run_dir / "checkpoints" / str(step) / "meta" / "metadata").write_text(
            json.dumps(meta)
        )
    return run_dir


def with_train(config, **train):
    return configtools.override(config, {f"train.{k}": v for k, v in train.items()})


def test_fewer_steps_than_the_latest_of_several_checkpoints_are_refused(tmp_path):
    run_dir = fake_run(tmp_path / "run", {3: CONFIG, 6: CONFIG})
    with pytest.raises(ValueError, match=r"train\.steps 5 is below .*checkpoint, 6"):
        resumable_config(run_dir, with_train(CONFIG, steps=5))
    assert resumable_config(run_dir, with_train(CONFIG, steps=6)).train.steps == 6


def test_a_resumed_run_may_log_checkpoint_and_keep_differently(tmp_path):
    run_dir = fake_run(tmp_path / "run", {3: CONFIG})
    other = with_train(CONFIG, log_every=3, checkpoint_every=7, keep_checkpoints=9)
    assert resumable_config(run_dir, other) == other
    with pytest.raises(ValueError, match=r"train\.seed: 0 -> 5"):
        resumable_config(run_dir, with_train(CONFIG, seed=5))


def test_a_recorded_split_holds_task_ids_of_the_env(tmp_path):
    env = envs.make("darkroom", size=5)  # tasks 0 .. 24
    (tmp_path / "run.json").write_text(json.dumps({"split": {"test": [0, 24]}}))
    assert read_split(tmp_path, env) == {"test": [0, 24]}
    (tmp_path / "run.json").write_text(json.dumps({"split": {"test": [0, 25]}}))
    with pytest.raises(ValueError, match=r"ids in \[0, 25\)"):
        read_split(tmp_path, env)


def test_a_dataset_is_fully_checked_until_the_run_has_a_checkpoint(
    tiny_ad_config, darkroom_dataset, tmp_path
):
    bad = shutil.copytree(darkroom_dataset, tmp_path / "flipped")
    shard = next(bad.glob("*train.array_record*"))
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes
    shard.write_bytes(bytes(data))
    config = configtools.override(tiny_ad_config(), {"data.path": str(bad)})
    env = envs.make(config.data.env, **dict(config.data.env_args))
    with pytest.raises(DatasetIntegrityError, match="SHA-256"):
        prepare_dataset(config, env, tmp_path / "run", progress=False)
    fake_run(tmp_path / "run", {2: config})  # resumed: sizes only
    assert prepare_dataset(config, env, tmp_path / "run", progress=False).path == bad
