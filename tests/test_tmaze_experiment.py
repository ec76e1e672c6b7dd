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
from agentrl.envs.tmaze import TMaze
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


def test_balanced_success_puts_every_memoryless_policy_at_one_half():
    low, high = tmaze_memory.wilson(100, 200)
    assert low < 0.5 < high and abs((low + high) / 2 - 0.5) < 1e-9
    assert tmaze_memory.wilson(200, 200)[0] > 0.98
    goals = np.array([1] * 83 + [-1] * 117)  # an unbalanced draw of sides
    always_up = np.where(goals == 1, 1.0, 0.0)  # returns of "always turn up"
    assert TMaze.success(always_up).mean() == 0.415  # the raw rate: the draw's
    counts = tmaze_memory.side_counts(always_up, goals)
    assert counts == {"up": [83, 83], "down": [0, 117]}
    rate, low, high = tmaze_memory.balanced(counts)
    assert rate == 0.5 and low < 0.5 < high
    remembers = tmaze_memory.side_counts(np.ones(200), goals)
    assert tmaze_memory.balanced(remembers)[1] > 0.95


def test_the_summary_pools_seeds_by_side():
    runs = [
        {"length": 10, "sides": {"up": [90, 90], "down": [110, 110]}},
        {"length": 10, "sides": {"up": [85, 90], "down": [110, 110]}},
        {"length": 50, "sides": {"up": [90, 90], "down": [0, 110]}},
    ]
    for r in runs:
        wins = r["sides"]["up"][0] + r["sides"]["down"][0]
        r.update(successes=wins, episodes=200, walked=1.0, train_seconds=60.0)
        r["balanced_success"] = tmaze_memory.balanced(r["sides"])[0]
    rows = tmaze_memory.summarize(runs)
    assert [r["length"] for r in rows] == [10, 50]
    assert rows[0]["sides"] == {"up": [175, 180], "down": [220, 220]}
    assert rows[0]["bridged"] and rows[0]["per_seed"][0] == 1.0
    assert rows[0]["seeds_above"] == 2
    assert rows[1]["success"] == 0.5 and not rows[1]["bridged"]  # always up
    assert rows[1]["raw_success"] == 0.45 and rows[1]["seeds_above"] == 0
    # one seed that remembers and one that does not: not bridged
    mixed = tmaze_memory.summarize([runs[0], {**runs[2], "length": 10}])
    assert mixed[0]["seeds_above"] == 1 and not mixed[0]["bridged"]


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
    assert len(run["returns"]) == len(run["goals"]) == 4
    assert sum(n for _, n in run["sides"].values()) == 4
    assert record["machine"]["cores"] and record["results"]["load"]
    saved = json.loads((tmp_path / "runs" / "L3-seed0" / "config.json").read_text())
    assert saved["data"]["env_args"] == [["corridor_length", 3]]
    assert saved["algo"]["explore_steps"] == 2 * 4
    # a second probe keeps the run's row (same config); another config trains
    tmaze_memory.main(argv)
    again = json.loads((tmp_path / "results" / "tmaze_memory_smoke.json").read_text())
    assert not run["reused"]
    assert again["results"]["runs"][0] == {**run, "reused": True}
    changed = tmaze_memory._config("smoke", 3, 0, {"train.steps": 3})
    kept = json.loads(
        (tmp_path / "runs" / "L3-seed0" / tmaze_memory.ROW_FILE).read_text()
    )
    assert kept["config"] != tmaze_memory._fingerprint(changed)
