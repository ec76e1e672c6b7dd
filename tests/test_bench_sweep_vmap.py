"""sweep_vmap's part 1: warm rounds alternate the two sides, the warm
speedup is the median per-round ratio, and the target reads the
``steps_per_call`` fixed beforehand (``agentrl sweep``'s default), not the
best of the measured ones."""

import pytest
import sweep_vmap as sv


def test_the_target_reads_the_default_steps_per_call(monkeypatch):
    sides = []  # (K, side) at the start of each side's timing

    # vmapped calls take 1 s; a one-seed call 0.3 s at K=10 and 0.5 s at
    # the others (so K=1 and K=60 look better than the default)
    def fake_sweep(config, env, dataset, seeds, per_call):
        if len(seeds) > 1 or seeds == [0]:
            sides.append((per_call, "vm" if len(seeds) > 1 else "seq"))
        if len(seeds) > 1:
            return 1.0
        return 0.3 if per_call == 10 else 0.5

    monkeypatch.setattr(sv, "_timed_sweep", fake_sweep)
    monkeypatch.setattr(sv, "prepare_dataset", lambda *a, **k: None)
    ad = sv.ad_benchmark(rounds=3)
    assert ad["steps_per_call"] == sv.AD_TARGET_STEPS_PER_CALL == 10
    assert ad["speedup_warm"] == pytest.approx(8 * 0.3)
    assert ad["speedup_warm_by_steps_per_call"]["1"][0] == pytest.approx(4.0)
    assert ad["speedup_warm_ci95"] == pytest.approx([2.4, 2.4])
    # cold: one call of each side; then the rounds alternate the order
    at_10 = [side for k, side in sides if k == 10]
    assert at_10 == ["seq", "vm", "seq", "vm", "vm", "seq", "seq", "vm"]
    target = sv._report_targets(ad, None, [])[0]
    assert target["value"] == pytest.approx(2.4) and not target["met"]
    assert "10 a call" in sv._ad_rows(ad)[0]["workload"]
