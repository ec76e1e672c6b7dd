"""The benchmarks' paired-rounds timing and the bootstrap interval of a median.

A driver's cost over a bare scan is read from per-round ratios (both timed
in each round) and summarised by the median with a percentile-bootstrap
interval: the interval must cover the median, shrink onto a constant, widen
with spread, be reproducible from its seed, and the rounds must alternate
the order of the candidates.
"""

import common as bench
import numpy as np
import pytest
from peer_eval import TARGETS, overhead_verdict


def test_median_ci_covers_the_median_and_is_reproducible():
    x = np.random.default_rng(1).normal(1.05, 0.1, 15)
    median, low, high = bench.median_ci(x)
    assert median == pytest.approx(np.median(x))
    assert low < median < high
    assert (low, high) == bench.median_ci(x)[1:]  # a fixed seed
    # spread widens it; a constant collapses it
    wide = bench.median_ci(1.05 + 4 * (x - 1.05))
    assert wide[2] - wide[1] > 3 * (high - low)
    assert bench.median_ci(np.full(9, 1.1)) == pytest.approx((1.1, 1.1, 1.1))


def test_median_ci_needs_values():
    with pytest.raises(ValueError, match="at least one"):
        bench.median_ci([])


def test_paired_rounds_alternate_the_order():
    calls = []
    fns = {
        "a": (lambda: calls.append("a") or 0, ()),
        "b": (lambda: calls.append("b") or 0, ()),
    }
    seconds = bench.paired_rounds(fns, rounds=3)
    assert calls == ["a", "b"] + ["a", "b", "b", "a", "a", "b"]  # warm-up first
    assert {k: len(v) for k, v in seconds.items()} == {"a": 3, "b": 3}
    assert all(s >= 0 for v in seconds.values() for s in v)


def test_overhead_verdict_reads_the_interval():
    t = TARGETS["driver_overhead"]
    assert overhead_verdict(-0.02, t / 2) == "no measurable cost"
    assert overhead_verdict(t / 4, t / 2).startswith("a cost below")
    assert overhead_verdict(-0.02, 2 * t).startswith("not resolved")
    assert overhead_verdict(1.5 * t, 2 * t).startswith("a cost above")


def test_timing_calls_draw_fresh_keys():
    """Timed calls on one key would reuse it; each call gets keys of its own."""
    import jax

    draw = jax.jit(lambda state: jax.vmap(jax.random.uniform)(state["keys"]))
    state = {"keys": jax.random.split(jax.random.key(0), 4), "n": 3}
    first, second = bench.fresh_keys(state, 0), bench.fresh_keys(state, 1)
    assert first["n"] == 3 and first["keys"].shape == (4,)
    assert not np.allclose(draw(first), draw(second))
    with jax.debug_key_reuse(True):
        draw(state)  # the caller's warm-up may consume the key itself
        bench.timeit(draw, state, repeats=3)
        bench.paired_rounds({"a": (draw, (state,)), "b": (draw, (state,))}, 2)
        with pytest.raises(jax.errors.KeyReuseError):
            draw(state)
