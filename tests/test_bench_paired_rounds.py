"""The benchmarks' paired-rounds timing, the bootstrap interval of a median
and the sums the timing benchmarks build on their timings.

A driver's cost over a bare scan is read from per-round ratios (both timed
in each round) and summarised by the median with a percentile-bootstrap
interval: the interval must cover the median, shrink onto a constant, widen
with spread, be reproducible from its seed, and the rounds must alternate
the order of the candidates.
"""

import common as bench
import numpy as np
import pytest
from peer_eval import TARGETS, overhead_verdict, sum_over_pulls


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


def test_paired_rounds_can_skip_the_warm_up():
    calls = []
    fns = {
        "a": (lambda: calls.append("a") or 0, ()),
        "b": (lambda: calls.append("b") or 0, ()),
    }
    bench.paired_rounds(fns, rounds=2, warmup=False)
    assert calls == ["a", "b", "b", "a"]


def test_compile_and_pair_keeps_the_first_calls_output():
    """The warm-up runs on the caller's own arguments (its output returned),
    the timed rounds on fresh keys, and nothing compiles inside the rounds."""
    import jax

    draw = jax.jit(lambda key, x: x + jax.random.uniform(key, (3,)))
    doubled = jax.jit(lambda key, x: x + 2 * jax.random.uniform(key, (3,)))
    k1, k2 = jax.random.split(jax.random.key(0))
    runs = {"draw": (draw, (k1, 0.0)), "doubled": (doubled, (k2, 0.0))}
    with jax.debug_key_reuse(True):
        compile_s, outputs, seconds = bench.compile_and_pair(runs, rounds=3)
    assert set(compile_s) == set(outputs) == set(seconds) == {"draw", "doubled"}
    assert np.allclose(outputs["draw"], jax.random.uniform(jax.random.clone(k1), (3,)))
    assert np.allclose(
        outputs["doubled"], 2 * jax.random.uniform(jax.random.clone(k2), (3,))
    )
    assert all(len(v) == 3 for v in seconds.values())


def test_eval_speedup_is_the_median_of_per_round_ratios(monkeypatch):
    """cached / recompute steps per second, round by round: a slow round of
    one side is paired with the other's same round, not with its best."""
    import eval_throughput as et

    seconds = {"cached": [1.0, 4.0, 2.0], "recompute": [3.0, 8.0, 2.0]}
    monkeypatch.setattr(
        et.bench, "compile_and_pair", lambda runs, rounds: ({}, {}, seconds)
    )
    steps = {"cached": 100, "recompute": 10}
    *_, (median, low, high) = et.paired_speedup({}, steps, rounds=3)
    # per-round ratios (100 / c) / (10 / r): 30, 20, 10 (paired otherwise,
    # e.g. fastest with fastest, they would be 20, 15, 20)
    assert median == pytest.approx(20.0)
    assert low == pytest.approx(10.0) and high == pytest.approx(30.0)
    assert et.speedup_target((median, 12.0, high))["met"]
    assert not et.speedup_target((median, 9.0, high))["met"]
    timing = ({"cached": 1.5, "recompute": 0.5}, seconds)
    rows = et.speed_rows({"cached": "c", "recompute": "r"}, steps, 4, 100, timing)
    assert rows[1]["seconds"] == 3.0 and rows[1]["seconds_for_100_steps"] == 30.0
    assert rows[0]["env_steps_per_s"] == pytest.approx(4 * 100 / 2.0)


def test_the_reference_pulls_sum_every_length_once():
    """500 pulls whose forward costs grow linearly with the context: the sum
    from five timed lengths equals the sum over every pull."""
    lengths = [1, 125, 250, 375, 500]
    cost = [0.01 + 0.002 * n for n in lengths]
    exact = sum(0.01 + 0.002 * n for n in range(1, 501))
    assert sum_over_pulls(lengths, cost) == pytest.approx(exact, rel=1e-12)
