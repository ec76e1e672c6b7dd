"""The window-evaluation benchmark: both readings run, agree until the window
slides, and are recorded."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


@pytest.mark.long
def test_rolling_and_window_agents_run_and_agree_while_the_window_fills(
    tmp_path, monkeypatch
):
    import window_eval_throughput

    monkeypatch.setenv("AGENTRL_BENCH_RESULTS", str(tmp_path))
    window_eval_throughput.main(["--tasks", "2", "--episodes", "6", "--repeats", "1"])
    record = json.loads((tmp_path / "window_eval_throughput_darkroom.json").read_text())
    results = record["results"]
    assert [r["method"] for r in results["rows"]] == ["rolling", "window"]
    assert results["greedy_agreement_filling"] == 1.0
    assert results["greedy_agreement_sliding"] is not None  # 6 episodes slide
    assert all(r["env_steps_per_s"] > 0 for r in results["rows"])
