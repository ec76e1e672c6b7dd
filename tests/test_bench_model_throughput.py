"""``model_throughput`` compares like with like, under the same load.

Until session 54 the MoE / dense step-time target timed dense then MoE
(best of 2 each, one after the other: 0.98 or 1.15 by order), the decoding
speedup set cached decoding at batch 32 against recomputing at batch 4
(a single call against a best of 2), and ``compile_s`` was the first call
(compile and one executed step). Now: alternating rounds
(:func:`common.paired_rounds`), both decoders at the same batch, targets on
the median per-round ratio judged by its whole CI, and ``compile_s`` the
``lower().compile()`` alone. A tiny model keeps the tests fast.
"""

from __future__ import annotations

import time

import common
import jax
import model_throughput as mt
import pytest
import train_throughput

#: seconds the first executed training step sleeps
NAP = 8.0


@pytest.fixture
def tiny(monkeypatch):
    """model_throughput's model at width 16, 2 layers, 2 heads."""
    for name, value in dict(D=16, LAYERS=2, HEADS=2, D_FF=64, EXPERT_FF=21).items():
        monkeypatch.setattr(mt, name, value)


@pytest.fixture
def paired(monkeypatch):
    """Every :func:`common.paired_rounds` call's candidates and batch sizes."""
    calls = []
    real = common.paired_rounds

    def spy(fns, rounds, **kw):  # the batch: leading axes after the weights
        calls.append(
            {
                name: {a.shape[0] for a in jax.tree.leaves(args[1:]) if a.ndim}
                for name, (_, args) in fns.items()
            }
        )
        return real(fns, rounds, **kw)

    monkeypatch.setattr(common, "paired_rounds", spy)
    return calls


@pytest.mark.long
def test_moe_and_dense_are_timed_in_the_same_rounds(tiny, paired, monkeypatch):
    # the first executed step sleeps: a compile_s that ran a step shows it
    slept = []

    def slow_log_prob(*args):
        def nap():
            if not slept:
                slept.append(True)
                time.sleep(NAP)

        jax.debug.callback(nap)
        return real_log_prob(*args)

    real_log_prob = mt.log_prob
    monkeypatch.setattr(mt, "log_prob", slow_log_prob)
    rows, targets = mt._train_rows({16: 2}, peak=1e9, rounds=3)

    assert any(set(call) == {"dense", "moe"} for call in paired)
    assert slept  # the step ran (in the warm-up)
    # dense is compiled, then warmed up (the nap), then MoE: the dense step's
    # compile_s (~1 s here) ran no step
    assert rows[0]["model"] == "dense"
    assert rows[0]["compile_s"] < NAP
    (target,) = targets
    assert target["name"] == "moe_over_dense_step_time_ctx16"
    ratios = [
        m / d
        for m, d in zip(rows[1]["step_s_rounds"], rows[0]["step_s_rounds"], strict=True)
    ]
    median, low, high = common.median_ci(ratios)
    assert target["value"] == pytest.approx(median)
    assert target["ci"] == f"[{low:.3g}, {high:.3g}]"
    assert target["met"] == (high < mt.MOE_TARGET)  # the whole CI decides
    for r in rows:  # the FLOPs: the one useful count
        model = mt.create(mt.config(16, r["model"] == "moe"))
        assert r["flops_per_step"] == train_throughput.train_flops(model, 2, 16)


@pytest.mark.long
def test_decoding_compares_both_at_one_batch_in_the_same_rounds(tiny, paired):
    rows, targets = mt._decode_rows({16: 3, 1024: 2}, rounds=2)

    decode_calls = [c for c in paired if set(c) == {"cached", "recompute"}]
    assert len(decode_calls) == 2
    for call, batch in zip(decode_calls, (3, 2), strict=True):
        assert call == {"cached": {batch}, "recompute": {batch}}
    for r, batch in zip(rows, (3, 2), strict=True):
        assert r["batch"] == batch
        cached = r["cached_s_per_step_rounds"]
        full = r["recompute_s_per_step_rounds"]
        median, low, high = common.median_ci(
            [f / c for f, c in zip(full, cached, strict=True)]
        )
        assert r["speedup"] == pytest.approx(median)
        assert r["speedup_ci"] == pytest.approx([low, high])
    (target,) = targets
    assert target["name"] == "decode_cached_speedup_ctx1024_batch2"
    assert target["met"] == (rows[1]["speedup_ci"][0] > mt.DECODE_TARGET)


def test_the_default_sizes_decode_at_the_recompute_batches():
    train, decode = mt.sizes(full=False)
    assert decode == {256: 8, 1024: 4, 4096: 1}
    assert mt.sizes(full=True)[1] == {256: 256, 1024: 256, 4096: 256}
    assert train == {512: 2, 2048: 1}
