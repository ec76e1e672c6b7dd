"""The data_generation benchmark's memory check: it reads how the RSS grows
with the number of tasks past the writer's three chunks in flight, at the
peak and at the end, so neither a start-up peak nor a late leak hides."""

import data_generation as dg
import pytest


def _fake_runs(monkeypatch, peak: dict, end: dict) -> list:
    calls = []

    def run(tasks, episodes, chunk):
        calls.append(tasks)
        return {
            "chunks": tasks // chunk,
            "peak_rss_mib": peak[tasks],
            "end_rss_mib": end[tasks],
            "seconds": 1.0,
            "dataset_mib": tasks / 100,
        }

    monkeypatch.setattr(dg, "_rss_run", run)
    return calls


def test_growth_past_the_chunks_in_flight_is_the_target(monkeypatch):
    # grows over the first three chunks (in flight), flat after
    peak = {100: 500, 200: 600, 300: 700, 1000: 705, 2000: 706}
    calls = _fake_runs(monkeypatch, peak, dict(peak))
    result = dg._peak_rss(1000, 100, 100)
    assert calls == [100, 200, 300, 1000, 2000]
    assert result["growth_to_twice_the_tasks_mib"] == pytest.approx(1.0)
    assert result["peak_rss_one_chunk_mib"] == 500
    assert dg._rss_target(result)["met"]
    assert "2: 600 / 600" in dg._rss_note(result)


def test_a_leak_hidden_under_a_start_up_peak_fails(monkeypatch):
    """The peaks are equal (a one-off peak at start-up dominates both), but
    the RSS at the end grows with the tasks: the check must fail."""
    peak = dict.fromkeys([100, 200, 300, 1000, 2000], 1960)
    end = {100: 300, 200: 340, 300: 380, 1000: 660, 2000: 1060}
    _fake_runs(monkeypatch, peak, end)
    result = dg._peak_rss(1000, 100, 100)
    assert result["growth_to_twice_the_tasks_mib"] == pytest.approx(400)
    assert not dg._rss_target(result)["met"]
