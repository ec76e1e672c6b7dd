"""AMAGO on the T-Maze (experiments/amago_tmaze.py) and the memory probe
(benchmarks/tmaze_memory.py): the presets hold the reference's settings at
any corridor length; the probe trains and evaluates the smoke preset end to
end under JAX's key-reuse checker (``long``: about a minute on 2 cores)."""

from __future__ import annotations

import json
import sys

import jax
import numpy as np
import pytest
from checkout import BENCHMARKS

from agentrl import envs
from agentrl.train.config import complete_config
from agentrl.train.experiments import load_experiment, load_module

sys.path.insert(0, str(BENCHMARKS))

import tmaze_memory  # noqa: E402


@pytest.mark.parametrize("preset", ["smoke", "cpu", "gpu"])
def test_presets_keep_one_episode_trials_and_the_tmaze_exploration(preset):
    config = load_experiment("amago_tmaze", preset)
    env = envs.make(config.data.env, **dict(config.data.env_args))
    assert config.algo.trial_episodes == 1 and config.algo.explore_window == (0, 4)
    assert config.algo.reward_scale == 100.0  # AMAGO's T-Maze multiplier
    assert config.eval.acting == "greedy" and config.eval.num_episodes == 1
    full = complete_config(config, env)
    assert full.model.max_steps >= env.horizon  # the whole episode in context


def test_length_overrides_keep_the_anneal_in_updates():
    module = load_module("amago_tmaze")
    cpu = load_experiment("amago_tmaze", "cpu")
    assert dict(cpu.data.env_args) == {"corridor_length": 10}
    assert cpu.algo.explore_steps == module.ANNEAL_UPDATES * 11
    at_50 = load_experiment("amago_tmaze", "cpu", module.length_overrides(50))
    assert at_50.algo.explore_steps == module.ANNEAL_UPDATES * 51
    assert tmaze_memory._anneal_updates("cpu") == module.ANNEAL_UPDATES
    assert tmaze_memory._anneal_updates("smoke") == 2


def test_wilson_interval_and_the_summary():
    low, high = tmaze_memory.wilson(100, 200)
    assert low < 0.5 < high and abs((low + high) / 2 - 0.5) < 1e-9
    assert tmaze_memory.wilson(200, 200)[0] > 0.98
    runs = [
        {"length": 10, "successes": 200, "episodes": 200, "success": 1.0},
        {"length": 10, "successes": 190, "episodes": 200, "success": 0.95},
        {"length": 50, "successes": 104, "episodes": 200, "success": 0.52},
    ]
    for r in runs:
        r.update(walked=1.0, train_seconds=60.0)
    rows = tmaze_memory.summarize(runs)
    assert [r["length"] for r in rows] == [10, 50]
    assert rows[0]["success"] == 0.975 and rows[0]["bridged"]
    assert not rows[1]["bridged"]  # 52% is within the memoryless ceiling's reach


@pytest.mark.long
def test_the_probe_trains_and_evaluates_the_smoke_preset(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTRL_BENCH_RESULTS", str(tmp_path / "results"))
    argv = ["--preset", "smoke", "--lengths", "3", "--seeds", "1"]
    argv += ["--runs-dir", str(tmp_path / "runs")]
    with jax.debug_key_reuse(True):
        tmaze_memory.main(argv)
    record = json.loads((tmp_path / "results" / "tmaze_memory_smoke.json").read_text())
    (run,) = record["results"]["runs"]
    assert run["length"] == 3 and run["episodes"] == 4  # the smoke eval tasks
    assert run["oracle_success"] == 1.0 and run["random_success"] <= 0.5
    assert 0.0 <= run["success"] <= 1.0 and np.isfinite(run["mean_return"])
    assert record["machine"]["cores"] and record["results"]["load"]
    saved = json.loads((tmp_path / "runs" / "L3-seed0" / "config.json").read_text())
    assert saved["data"]["env_args"] == [["corridor_length", 3]]
    assert saved["algo"]["explore_steps"] == 2 * 4
