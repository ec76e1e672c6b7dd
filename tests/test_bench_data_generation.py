"""The data_generation benchmark's memory check: it reads the RSS after
every chunk of one write and judges its slope past the chunks the writer
holds in flight, so neither a one-off peak at start-up hides a leak nor an
allocator's one-off step reads as one."""

import data_generation as dg
import pytest


def _fake_run(monkeypatch, after: list[float], peak: float) -> list:
    calls = []

    def run(tasks, episodes, chunk):
        calls.append((tasks, chunk))
        return {
            "peak_rss_mib": peak,
            "rss_after_chunk_mib": after,
            "seconds": 1.0,
            "dataset_mib": 1.0,
        }

    monkeypatch.setattr(dg, "_rss_run", run)
    return calls


def test_growth_past_the_chunks_in_flight_is_the_target(monkeypatch):
    # grows over the first chunks (in flight, the allocator settling), flat after
    after = [500, 600, 650, 660, 670, 680, 690, 700, 702, 703] + [704.0] * 30
    calls = _fake_run(monkeypatch, after, peak=710)
    result = dg._peak_rss(1000, 100, 100)
    assert calls == [(4000, 100)]  # one process, four times the tasks
    assert result["growth_after_chunk_mib"] == pytest.approx(1.0)
    assert result["rss_at_chunks_mib"]["2"] == 600
    assert dg._rss_target(result)["met"]
    assert "2: 600" in dg._rss_note(result)


def test_one_allocator_step_past_the_chunks_in_flight_is_not_a_leak(monkeypatch):
    """A one-off 61 MiB step at chunk 25, flat before and after (seen on
    2026-11-30 at the cpu sizes, chunks of 34 MiB of histories): ~2.6 MiB
    a chunk over chunks 10-40, under the quarter chunk (8.6 MiB) a leak of
    what the writer wrote would exceed."""
    after = [570.0, 640.0] + [656.0] * 23 + [717.0] * 15
    _fake_run(monkeypatch, after, peak=719)
    result = dg._peak_rss(10000, 100, 1000)
    assert result["growth_after_chunk_mib"] == pytest.approx(61.0)
    assert 1.5 < result["slope_after_chunk_mib"] < 3.5
    assert dg._rss_target(result)["met"]


def test_a_leak_under_a_start_up_peak_fails(monkeypatch):
    """The peak (a one-off at start-up) is above every chunk's RSS, but the
    RSS grows a chunk's histories (3.4 MiB) with every chunk: not met."""
    after = [300 + 3.4 * c for c in range(40)]
    _fake_run(monkeypatch, after, peak=1960)
    result = dg._peak_rss(1000, 100, 100)
    assert result["growth_after_chunk_mib"] == pytest.approx(3.4 * 30)
    assert result["slope_after_chunk_mib"] == pytest.approx(3.4)
    assert not dg._rss_target(result)["met"]
