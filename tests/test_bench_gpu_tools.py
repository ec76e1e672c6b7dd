"""The GPU-run benchmarks' own logic, without a GPU or a compile.

``xla_flags.choose`` ranks flag variants by their estimate for the preset
(compile plus the preset's updates) over the cases the default covered;
``sweep_members`` runs every side at one program whatever its step count
(a schedule that does not depend on it), at the gpu preset too (whose
warm-up is longer than one call: the first GPU run failed there);
``gpu_trace.summarize`` counts a trace's device kernels per update from its
stream threads only.
"""

from __future__ import annotations

import dataclasses

import gpu_trace
import jax
import preset_shapes
import pytest
import sweep_members
import xla_flags

from agentrl.train.experiments import load_experiment


def _row(variant, case, compile_s, s_per_update, steps=1000, status="ok"):
    return {
        "variant": variant,
        "case": case,
        "status": status,
        "compile_s": compile_s,
        "s_per_update": s_per_update,
        "train_steps": steps,
    }


def test_the_least_compile_plus_training_wins():
    rows = [
        _row("default", "a", 90.0, 0.0025),  # 92.5 s
        _row("fast_compile", "a", 10.0, 0.0030),  # 13 s
        _row("fast_compile_graph_while", "a", 12.0, 0.0010),  # 13 s: ties lose
        _row("no_gemm_autotune", "a", 5.0, 0.05),  # 55 s
    ]
    assert xla_flags.choose(rows) == "fast_compile"
    rows[2]["s_per_update"] = 0.0005  # 12.5 s
    assert xla_flags.choose(rows) == "fast_compile_graph_while"


def test_a_variant_must_cover_every_case_the_default_ran():
    rows = [
        _row("default", "a", 90.0, 0.0025),
        _row("default", "b", 75.0, 0.02),
        _row("fast_compile", "a", 10.0, 0.0025),
        _row("fast_compile", "b", 0, 0, status="timeout"),
        _row("no_gemm_autotune", "a", 20.0, 0.0025),
        _row("no_gemm_autotune", "b", 20.0, 0.02),
    ]
    assert xla_flags.choose(rows) == "no_gemm_autotune"
    failed = [r for r in rows if r["variant"] != "no_gemm_autotune"]
    assert xla_flags.choose(failed) == "default"


def test_without_the_default_the_measured_cases_decide_and_nothing_ran_is_none():
    rows = [_row("fast_compile", "a", 10.0, 0.01), _row("no_gemm_autotune", "a", 5, 1)]
    assert xla_flags.choose(rows) == "fast_compile"
    assert xla_flags.choose([_row("default", "a", 0, 0, status="failed")]) is None
    assert xla_flags.choose([]) is None


def test_compile_ratios_are_targets_against_the_default_of_the_same_case():
    rows = [_row("default", "a", 80.0, 0.002), _row("fast_compile", "a", 20.0, 0.002)]
    rows.append(_row("fast_compile", "b", 20.0, 0.002))  # no default for b
    (target,) = xla_flags._targets(rows)
    assert target["value"] == 0.25 and target["met"]
    assert "a fast_compile" in target["name"]


def test_sweep_sides_share_one_program_at_the_gpu_preset():
    config = load_experiment("dpt_bandit", "gpu")
    assert config.train.warmup > 100  # longer than one GPU call: refused before
    short, long = (sweep_members._with_steps(config, n) for n in (100, 2100))
    assert (short.train.steps, long.train.steps) == (100, 2100)
    for train in (short.train, long.train):
        assert (train.schedule, train.warmup) == ("constant", 0)
    assert short.model == config.model and short.data == config.data


def test_the_widest_shape_with_dropout_gets_two_diagnostic_rows():
    groups = preset_shapes.group_shapes(preset_shapes.preset_configs(quick=True))
    jobs = preset_shapes.with_diagnostics(groups)
    assert len(jobs) == len(groups) + 2
    i = next(i for i, (_, c, _) in enumerate(jobs) if c.model.dropout > 0)
    (names, config, none), (n1, off, d1), (n2, same, d2) = jobs[i : i + 3]
    assert none is None and names == n1 == n2
    assert (d1, off.model.dropout) == (preset_shapes.NO_DROPOUT, 0.0)
    assert d2 == preset_shapes.RBG and same is config
    rows = [{"status": "ok", "diagnostic": d1, "d_model": 512, "peak_fraction": 0.5}]
    assert preset_shapes.targets(rows) == []  # reported, never a target
    before = jax.config.jax_default_prng_impl
    with preset_shapes.prng_impl("rbg"):
        assert "rbg" in str(jax.random.key_impl(jax.random.key(0)))
    assert jax.config.jax_default_prng_impl == before


def _trace():
    meta = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/host:CPU"}},
        {
            "ph": "M",
            "name": "process_name",
            "pid": 2,
            "args": {"name": "/device:GPU:0"},
        },
    ]
    meta += [
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": n}}
        for pid, tid, n in [
            (1, 1, "python"),
            (2, 7, "Stream #7(Compute)"),
            (2, 8, "Stream #8(MemcpyD2H)"),
            (2, 9, "XLA Ops"),
        ]
    ]

    def x(pid, tid, name, ts, dur):
        return {"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": ts, "dur": dur}

    events = [
        x(1, 1, "PjitFunction(call)", 0, 1000),  # host: not device time
        x(2, 7, "loop_add_fusion", 0, 10),
        x(2, 7, "gemm", 20, 30),
        x(2, 7, "loop_add_fusion", 60, 10),
        x(2, 8, "MemcpyD2H", 65, 10),  # overlaps the kernel at 60-70
        x(2, 9, "loop_add_fusion", 0, 70),  # a derived line: repeats the time
    ]
    return {"traceEvents": meta + events}


def test_the_trace_summary_counts_stream_events_and_their_union():
    summary = gpu_trace.summarize(_trace(), updates=2, wall_s=200e-6)
    assert summary["device_events"] == 4
    assert summary["events_per_update"] == 2.0
    assert summary["copies_per_update"] == 0.5
    assert summary["kernel_us_per_update"] == 30.0  # (10 + 30 + 10 + 10) / 2
    assert summary["busy_us_per_update"] == 27.5  # union 0-10, 20-50, 60-75
    assert summary["busy_fraction"] == 55 / 200
    assert summary["top"][0] == {
        "name": "gemm",
        "per_update": 0.5,
        "us_per_update": 15.0,
        "mean_us": 30.0,
    }
    assert [t["name"] for t in summary["top"]][1] == "loop_add_fusion"


def test_a_case_may_set_config_fields_after_its_preset():
    assert xla_flags.parse_case("dpt_bandit:gpu", 64) == (
        "dpt_bandit",
        "gpu",
        {"data.num_tasks": 64},
    )
    name, preset, overrides = xla_flags.parse_case(
        "dpt_bandit:gpu:model.attention_block=512:train.batch_size=32", 8
    )
    assert (name, preset) == ("dpt_bandit", "gpu")
    assert overrides == {
        "data.num_tasks": 8,
        "model.attention_block": "512",
        "train.batch_size": "32",
    }
    with pytest.raises(ValueError, match="not FIELD=VALUE"):
        xla_flags.parse_case("dpt_bandit:gpu:model.attention_block", 8)


def test_a_case_may_set_the_weight_gradient_split_limits(monkeypatch):
    from agentrl.models import precision

    monkeypatch.setattr(precision, "SPLIT_MAX_CHUNKS", precision.SPLIT_MAX_CHUNKS)
    _, _, overrides = xla_flags.parse_case(
        "dpt_bandit:gpu:precision.SPLIT_MAX_CHUNKS=1:model.attention_block=512", 8
    )
    xla_flags._set_precision_limits(overrides)
    assert precision.SPLIT_MAX_CHUNKS == 1
    assert overrides == {"data.num_tasks": 8, "model.attention_block": "512"}
    linear = (((2,), (0,)), ((), ()))
    assert precision.weight_grad_split((64, 501, 32), (32, 96), linear) == 1
    with pytest.raises(ValueError, match="precision.SPLIT_"):
        xla_flags._set_precision_limits({"precision.F32": "1"})


def test_sweep_members_times_updates_from_warm_runs_only(monkeypatch):
    """Each step count's first run pays a start-up (a new config: its chunk
    traced again); the per-update time must come from two warm runs, so it
    is the update's own time however large that start-up is."""
    import types

    clock = {"now": 0.0}
    seen: set[int] = set()
    startup, per_update = 5.0, 0.01

    def fake_sweep(config, env, dataset, seeds, steps_per_call):
        steps = config.train.steps
        clock["now"] += (startup if steps not in seen else 0.0) + per_update * steps
        seen.add(steps)
        return types.SimpleNamespace(state=jax.numpy.zeros(()))

    monkeypatch.setattr(sweep_members, "train_sweep", fake_sweep)
    monkeypatch.setattr(sweep_members.time, "perf_counter", lambda: clock["now"])
    config = load_experiment("dpt_bandit", "smoke")
    side = sweep_members.time_side(config, None, None, members=1, k=10, chunks=2)
    assert side["s_per_update"] == pytest.approx(per_update)
    assert side["long_first_run_s"] > side["long_run_s"]  # the start-up, once


def test_a_shape_an_earlier_record_measured_is_kept_not_measured_again(
    monkeypatch, tmp_path
):
    """``train_throughput --gpu --skip-done``: every device check started
    from the first shape, so a budget that covers a few never reached the
    rest. Shapes an earlier record of the device kind measured, with the
    same shape digest and FLOP count, are kept with that run's date; a row
    whose count changed is measured again; another device kind keeps none."""
    import json

    measured = []

    def fake(config, num_steps, peak, flop_cap):
        measured.append(config)
        flops = preset_shapes.analytic_flops(config)
        return {"status": "ok", "analytic_flops_per_step": flops, "step_s": 1.0}

    monkeypatch.setattr(preset_shapes, "measure", fake)
    monkeypatch.setattr(preset_shapes, "bf16_peak_flops", lambda n: 1.0)
    _, first = preset_shapes.measure_all(True, 1, None)
    n = len(measured)
    assert n == len(first) > 2 and len({r["shape"] for r in first}) == n
    first[0]["analytic_flops_per_step"] *= 1.5  # as if the count had changed
    record = tmp_path / "train_throughput_gpu.json"
    results = {"rows": first}
    machine = {"device_kind": "NVIDIA H200"}
    record.write_text(json.dumps({"machine": machine, "date": "D", "results": results}))
    earlier = preset_shapes.earlier_rows(record, "NVIDIA H200")
    assert len(earlier) == n
    _, again = preset_shapes.measure_all(True, 1, None, earlier)
    assert len(measured) == n + 1  # only the changed count's shape
    assert [r["shape"] for r in again] == [r["shape"] for r in first]
    assert again[0].get("measured") is None
    assert all(r["measured"] == "D" for r in again[1:])
    assert preset_shapes.earlier_rows(record, "NVIDIA H100") == {}
    assert preset_shapes.earlier_rows(tmp_path / "none.json", "NVIDIA H200") == {}


def test_the_shape_digest_names_the_step_timed():
    config = load_experiment("meta_dt_darkroom", "gpu")
    other = load_experiment("meta_dt_darkroom", "full")  # the same shape
    digest = preset_shapes.shape_digest(config, None)
    assert digest == preset_shapes.shape_digest(other, None)
    assert digest != preset_shapes.shape_digest(config, preset_shapes.RBG)
    dropped = dataclasses.replace(
        config, model=dataclasses.replace(config.model, attention_dropout=0.2)
    )
    assert digest != preset_shapes.shape_digest(dropped, None)
