"""The sorted-episode evaluation benchmark: both agents run and act alike."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


@pytest.mark.long
def test_cached_and_full_pass_agents_act_alike_and_are_recorded(tmp_path, monkeypatch):
    import sorted_eval_throughput

    monkeypatch.setenv("AGENTRL_BENCH_RESULTS", str(tmp_path))
    sorted_eval_throughput.main(["--tasks", "2", "--episodes", "2", "--repeats", "1"])
    record = json.loads((tmp_path / "sorted_eval_throughput.json").read_text())
    results = record["results"]
    assert [r["method"] for r in results["rows"]] == ["cached", "full pass"]
    assert results["greedy_action_agreement"] == 1.0
    assert all(r["env_steps_per_s"] > 0 for r in results["rows"])
