"""benchmarks/loader.py: the loaders and the train step they are compared
with are timed in alternating rounds (per-round ratios, their median and a
bootstrap CI), a target is met only when its whole CI clears 5x, and a
train step that fails stops the run instead of an assumed rate standing in
for it."""

import json

import loader
import pytest

import agentrl.models


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    """Small datasets (8 tasks) and records written to ``tmp_path``."""
    datasets = loader._datasets
    monkeypatch.setattr(loader, "_datasets", lambda tmp, t, e: datasets(tmp, 8, 5))
    monkeypatch.setenv("AGENTRL_BENCH_RESULTS", str(tmp_path))
    return tmp_path


@pytest.mark.long
def test_a_failing_train_step_stops_the_run(tiny, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no model today")

    monkeypatch.setattr(agentrl.models, "DecisionModel", broken)
    with pytest.raises(RuntimeError, match="no model today"):
        loader.main(["--quick"])
    assert not (tiny / "loader.json").exists()


def test_rounds_alternate_and_each_call_gets_the_next_step():
    calls = []

    def fn(name):
        return lambda step: calls.append((name, step))

    rates = loader.paired_rates(
        {"a": fn("a"), "b": fn("b")}, rounds=3, seconds=0.0, min_calls=2
    )
    assert [len(r) for r in rates.values()] == [3, 3]
    assert all(r > 0 for per_round in rates.values() for r in per_round)
    assert calls[:2] == [("a", 0), ("b", 0)]  # the warm-up
    assert calls[2:6] == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    assert calls[6:10] == [("b", 3), ("b", 4), ("a", 3), ("a", 4)]  # reversed
    assert calls[10:] == [("a", 5), ("a", 6), ("b", 5), ("b", 6)]


def test_targets_are_judged_on_the_ci_of_per_round_ratios():
    # the train step as fast in every round; the cached loader 10x in two
    # rounds and 2x in one: its median ratio 10x, its CI reaching down to 2x
    rates = {
        loader.TRAIN: [4.0, 2.0, 4.0],
        "ad cached": [40.0, 20.0, 8.0],
        loader.GRAIN: [40.0, 20.0, 40.0],
    }
    summary = loader.summarise(rates)
    assert summary["ad cached"]["x_train_step_per_round"] == [10.0, 10.0, 2.0]
    assert summary[loader.GRAIN]["x_train_step_per_round"] == [10.0, 10.0, 10.0]
    cached, grain = loader.targets_of(summary)
    assert cached["value"] == 10.0 and cached["met"] is False
    assert grain["value"] == 10.0 and grain["met"] is True and "ci" in grain


@pytest.mark.long
def test_the_record_holds_per_round_ratios_and_their_ci(tiny):
    loader.main(["--quick", "--rounds", "3", "--seconds", "0.01"])
    payload = json.loads((tiny / "loader.json").read_text())
    loaders = payload["results"]["loaders"]
    assert payload["results"]["rounds"] == 3
    assert len(payload["results"]["train_steps_per_s_per_round"]) == 3
    for name in ("ad cached", loader.GRAIN, "dpt cached"):
        assert len(loaders[name]["x_train_step_per_round"]) == 3
        low, high = loaders[name]["x_train_step_ci95"]
        assert low <= loaders[name]["x_train_step_median"] <= high
    assert [t["ci"] for t in payload["targets"]]
    assert "assumed" not in json.dumps(payload)
