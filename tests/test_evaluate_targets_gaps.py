"""Target kinds against their goals: DPT's random ratio, the probe's last episode."""

import numpy as np

from agentrl.configtools import to_dict
from agentrl.evaluate import EvalResult, summarize, targets
from agentrl.tables import write_json
from agentrl.train.experiments import load_experiment


def _regret(finals):
    """Runs ``[seed][task]`` whose cumulative regret ends at ``finals``."""
    return [
        EvalResult("m", np.zeros((len(f), 1)), regret=np.outer(f, [0.5, 1.0]))
        for f in np.asarray(finals, float)
    ]


def test_dpt_regret_is_held_to_half_of_random():
    base = np.full((2, 6), 10.0)
    # 0.6x random, 0.9x Thompson, exactly (a CI of one point)
    combined = {
        "m": _regret(6 * base / 10),
        "thompson": _regret(base * 6 / 9),
        "random": _regret(base),
    }
    summary = summarize(combined, resample="both", num_samples=100)
    thompson, random = targets.targets_for("dpt_bandit", summary, combined, [])
    assert thompson["target"] == 1.2 and thompson["met"]
    assert random["target"] == 0.5 and not random["met"]
    assert abs(random["value"] - 0.6) < 1e-9


def test_the_memory_probe_reads_each_tasks_last_episode(tmp_path):
    config = load_experiment("amago_tmaze", "smoke")
    write_json(tmp_path / "config.json", to_dict(config))
    sides = np.array([1.0, -1.0, 1.0, -1.0])
    # episode 1 misses the goal on every task, the last reaches it
    returns = np.tile([0.0, 1.0], (4, 1))
    meta = {"task_parameter": {"name": "goal", "values": sides.tolist()}}
    combined = {"m": [EvalResult("m", returns, metadata=meta)]}
    summary = summarize(combined, num_samples=100)
    (row,) = targets.targets_for("amago_tmaze", summary, combined, [tmp_path])
    assert row["value"] == 1.0 and row["met"]


def test_beats_its_data_divides_each_seed_by_its_own_data(tmp_path, monkeypatch):
    best = {"seed0": 2.0, "seed1": 4.0}
    monkeypatch.setattr(targets, "data_best_return", lambda d: best[d.parent.name])
    # each seed's learner returns exactly its own data's best: 1x everywhere
    combined = {
        "m": [EvalResult("m", np.full((2, 3), best[s])) for s in ("seed0", "seed1")]
    }
    summary = summarize(combined, resample="both", num_samples=100)
    dirs = [tmp_path / "seed0", tmp_path / "seed1"]
    (row,) = targets.beats_its_data("m", summary, combined, dirs)
    assert row["value"] == 1.0 and row["target"] == 1.0 and not row["met"]


def test_the_default_target_reads_the_normalized_score_where_there_is_one():
    # returns near 100, scores near 0.2: the row is the score's
    returns = np.full((4, 3), 100.0)
    normalized = np.full((4, 3), 0.2)
    combined = {"m": [EvalResult("m", returns, normalized)]}
    summary = summarize(combined, last_k=3, num_samples=100)
    rows = targets.improves("m", summary, combined, [])
    assert len(rows) == 1 and abs(rows[0]["value"] - 0.2) < 1e-9 and rows[0]["met"]
