"""benchmarks/eval_compile.py's record says what ran: with fewer than 3
rounds no bootstrap CI (one or two values say nothing), "order alternating"
only when there was a second round, and by default 2 seeds x 3 rounds, so
that the target (the seeds' runs share the model's program) is exercised.
Training and the protocol are replaced by stand-ins: this checks the
record, not the speed."""

import json

import eval_compile
import numpy as np
import pytest

#: before / after seconds of the stand-in protocol, round after round
SECONDS = {"before": [30.0, 50.0, 52.0, 49.0], "after": [20.0, 25.0, 24.0, 26.0]}


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """Stand-in training and protocol; records land in ``tmp_path``; returns
    the calls: ``train`` (name, seeds) and ``measure`` (way)."""
    calls = {"train": [], "measure": []}

    def train_runs(name, preset, seeds, root):
        calls["train"].append((name, seeds))
        return [root / f"{name}-seed{s}" for s in range(seeds)]

    def measure(run_dirs, share):
        way = "after" if share else "before"
        i = sum(w == way for w in calls["measure"])
        calls["measure"].append(way)
        record = {
            "seconds": SECONDS[way][i],
            "compiles": 84 if share else 96,
            "model_program_compiles": 1 if share else 7 * len(run_dirs),
        }
        returns = {f"{s}/model": np.zeros(3) for s in range(len(run_dirs))}
        return record, returns

    monkeypatch.setattr(eval_compile, "train_runs", train_runs)
    monkeypatch.setattr(eval_compile, "measure", measure)
    monkeypatch.setenv("AGENTRL_BENCH_RESULTS", str(tmp_path))
    return calls


def _record(tmp_path):
    payload = json.loads((tmp_path / "eval_compile.json").read_text())
    md = (tmp_path / "eval_compile.md").read_text()
    return payload, md


def test_one_round_records_no_ci_and_no_alternation(fake, tmp_path, capsys):
    eval_compile.main(["--experiments", "ad_darkroom", "--rounds", "1"])
    payload, md = _record(tmp_path)
    speedup = payload["results"]["ad_darkroom"]["speedup"]
    assert speedup["rounds"] == [1.5]
    assert speedup["low"] is None and speedup["high"] is None
    for text in (md, capsys.readouterr().out):
        assert "bootstrap CI" not in text and "[1.50, 1.50]" not in text
    assert "order alternating" not in md
    assert "1 round," in md and "no CI" in md


def test_two_rounds_still_no_ci(fake, tmp_path):
    eval_compile.main(["--experiments", "ad_darkroom", "--rounds", "2"])
    payload, md = _record(tmp_path)
    speedup = payload["results"]["ad_darkroom"]["speedup"]
    assert speedup["rounds"] == [1.5, 2.0]
    assert speedup["low"] is None and speedup["high"] is None
    assert "bootstrap CI" not in md and "order alternating" in md


def test_defaults_are_two_seeds_and_three_rounds_with_a_ci(fake, tmp_path):
    eval_compile.main(["--experiments", "ad_darkroom"])
    assert fake["train"] == [("ad_darkroom", 2)]
    # three rounds, the order reversed in the second
    assert fake["measure"] == ["before", "after", "after", "before", "before", "after"]
    payload, md = _record(tmp_path)
    speedup = payload["results"]["ad_darkroom"]["speedup"]
    assert speedup["rounds"] == pytest.approx([1.5, 2.0, 52 / 24])
    assert speedup["median"] == pytest.approx(2.0)
    assert speedup["low"] <= 2.0 <= speedup["high"]
    assert "median [95% bootstrap CI]" in md and "3 rounds" in md
    assert "2 runs of the smoke preset" in md
    assert payload["targets"][0]["met"] is True


def test_one_seed_does_not_meet_the_sharing_target(fake, tmp_path):
    eval_compile.main(["--experiments", "ad_darkroom", "--seeds", "1"])
    payload, md = _record(tmp_path)
    assert payload["targets"][0]["value"] == 1  # one compile, but nothing shared
    assert payload["targets"][0]["met"] is False
    assert "sharing across seeds is not exercised" in md
