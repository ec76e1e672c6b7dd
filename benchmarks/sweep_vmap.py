"""Vectorized sweeps vs sequential runs on this machine.

1. Smoke AD training (``ad_darkroom`` smoke, 60 steps): 8 seeds vmapped in
   one program (:func:`agentrl.sweep.train_sweep`, for several
   ``steps_per_call``) vs 8 sequential runs sharing one jitted step.
2. Q-learning on Dark Room (9 goals, 100 episodes): 64 seeds vmapped
   (:func:`agentrl.sweep.source_sweep`) vs 64 sequential ``generate`` calls,
   and 64 seeds x 4 learning rates in one program.

3. The same compiled training step, 8 seeds in one program vs 8 runs one
   after another, by model width (``ad_darkroom`` smoke shape: 2 layers,
   batch 8, 40-step windows; width 16 to 64, ``d_ff`` 4x width). Both
   sides run one jitted ``lax.scan`` of ``make_train_step`` over the same
   pre-sampled batches (the vmapped side is that scan under ``jax.vmap``),
   so dispatch and host sampling are out of both timings: the ratio is what
   batching the seeds buys in compute alone. The sides are timed in turn,
   best of ``--repeats``; a width-16 batch-1 row (40 tokens per step) shows
   the per-op-cost-bound regime. Each side's CPU seconds per wall second,
   the single run's FLOP rate (XLA's count) and a same-run matmul peak are
   recorded, and for ``--profile-widths`` the thunk work of each side by op
   class and pass (:mod:`xla_profile`): equal work with
   unequal wall time means time spent waiting, not computing.

Each side of 1 and 2 is timed twice: the first call includes compilation, the second
("warm") reuses the compiled programs. In 1 both sides are ``train_sweep``
calls at the same ``steps_per_call`` (the sequential side one seed a call),
with model init, the device sampler's setup and batch drawing inside the
wall time of both: the first call of each side at a ``K`` compiles, then
``--repeats`` warm rounds alternate the sides, the warm ratio the median
per-round ratio with its CI; the target reads ``K`` = 10, ``agentrl
sweep``'s default, fixed before the run (the others are reported).
(Until 2026-11-30 the sequential side sampled on the host one step per
dispatch and the vmapped side recompiled its draws every call.)

Target (issue 7): the vmapped sweep at least 3x faster than sequential.
Writes ``benchmarks/results/sweep_vmap.{json,md}``.

    agentrl bench sweep_vmap
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import tempfile
import time
from pathlib import Path

import common as bench
import jax
import numpy as np
import xla_profile

from agentrl import envs
from agentrl.configtools import default_hparams
from agentrl.evaluate.targets import with_ci
from agentrl.sources.registry import generate
from agentrl.sweep import source_sweep, train_sweep
from agentrl.tables import markdown_table
from agentrl.train.config import complete_config
from agentrl.train.data import make_sampler, prepare_dataset
from agentrl.train.experiments import load_experiment
from agentrl.train.loop import build_model
from agentrl.train.step import init_train_state, make_train_step

SEEDS = 8


def _timed_sweep(config, env, dataset, seeds: list, per_call: int) -> float:
    """Wall seconds of one ``train_sweep`` (its setup and compile included)."""
    start = time.perf_counter()
    jax.block_until_ready(
        train_sweep(config, env, dataset, seeds, steps_per_call=per_call).state
    )
    return time.perf_counter() - start


#: the ``steps_per_call`` values part 1 times, and the one its target reads:
#: ``agentrl sweep``'s default (``--steps-per-call``), fixed before the run
#: (the best of three noisy ratios would flatter the target)
AD_STEPS_PER_CALL = (1, 10, 60)
AD_TARGET_STEPS_PER_CALL = 10


def ad_benchmark(rounds: int = 3) -> dict:
    """8 seeds vmapped against 8 one-seed sweeps run one after another: the
    same program builder, batches drawn on the device, calls of ``K`` steps
    (``steps_per_call``) on both sides, wall time with setup on both. The
    first call of each side at a ``K`` compiles (``cold``, one each); then
    ``rounds`` warm rounds time both sides, the order reversed every round,
    and the warm speedup is the median per-round ratio with its CI."""
    config = load_experiment("ad_darkroom", "smoke")
    env = envs.make(config.data.env)
    config = complete_config(config, env)
    seeds = list(range(SEEDS))
    cold: dict[str, dict[int, float]] = {"sequential": {}, "vmapped": {}}
    warm: dict[str, dict[int, list]] = {"sequential": {}, "vmapped": {}}
    with tempfile.TemporaryDirectory() as tmp:
        dataset = prepare_dataset(config, env, Path(tmp), progress=False)

        def timed(side: str, k: int) -> float:
            if side == "vmapped":
                return _timed_sweep(config, env, dataset, seeds, k)
            return sum(_timed_sweep(config, env, dataset, [s], k) for s in seeds)

        for k in AD_STEPS_PER_CALL:
            for side in cold:
                cold[side][k] = timed(side, k)
            for side in warm:
                warm[side][k] = []
            for r in range(rounds):
                for side in bench.round_order(("sequential", "vmapped"), r):
                    warm[side][k].append(timed(side, k))
    pairs = {
        k: zip(warm["sequential"][k], warm["vmapped"][k], strict=True)
        for k in AD_STEPS_PER_CALL
    }
    speedup = {k: bench.median_ci([s / v for s, v in pairs[k]]) for k in pairs}
    k = AD_TARGET_STEPS_PER_CALL
    return {
        "steps": config.train.steps,
        "seeds": SEEDS,
        "rounds": rounds,
        **{f"{side}_cold": _by_k(t) for side, t in cold.items()},
        **{f"{side}_warm_rounds": _by_k(t) for side, t in warm.items()},
        "speedup_warm_by_steps_per_call": _by_k(speedup),
        "steps_per_call": k,
        "sequential_warm_s": float(np.median(warm["sequential"][k])),
        "vmapped_warm_s": float(np.median(warm["vmapped"][k])),
        "sequential_cold_s": cold["sequential"][k],
        "vmapped_cold_s": cold["vmapped"][k],
        "speedup_warm": speedup[k][0],
        "speedup_warm_ci95": list(speedup[k][1:]),
        "speedup_cold": cold["sequential"][k] / cold["vmapped"][k],
    }


def _by_k(values: dict) -> dict:
    """``{K: value}`` with string keys (as JSON writes them)."""
    return {str(k): v for k, v in values.items()}


def q_benchmark(num_seeds: int = 64, num_episodes: int = 100) -> dict:
    env = envs.make("darkroom")
    params = jax.vmap(env.params_for_task)(jax.numpy.arange(0, 81, 10))
    key = jax.random.key(0)
    keys = jax.random.split(key, num_seeds)
    lr = 0.8

    def sequential() -> float:
        start = time.perf_counter()
        for k in keys:
            h = generate("q_learning", env, params, k, num_episodes, learning_rate=lr)
            np.asarray(h.reward)
        return time.perf_counter() - start

    def vmapped(lrs) -> float:
        grid = {"learning_rate": lrs}
        return source_sweep(
            "q_learning", env, params, key, num_episodes, num_seeds, grid
        ).seconds

    seq_cold, seq_warm = sequential(), sequential()
    vm_cold, vm_warm = vmapped([lr]), vmapped([lr])
    four_cold, four_warm = vmapped([0.1, 0.3, 0.5, 0.8]), vmapped([0.1, 0.3, 0.5, 0.8])
    return {
        "tasks": int(params.goal.shape[0]),
        "episodes": num_episodes,
        "seeds": num_seeds,
        "sequential_cold_s": seq_cold,
        "sequential_warm_s": seq_warm,
        "vmapped_cold_s": vm_cold,
        "vmapped_warm_s": vm_warm,
        "vmapped_4_lrs_cold_s": four_cold,
        "vmapped_4_lrs_warm_s": four_warm,
        "speedup_warm": seq_warm / vm_warm,
        "speedup_cold": seq_cold / vm_cold,
        "speedup_4_lrs_vs_4x_sequential_warm": 4 * seq_warm / four_warm,
    }


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def compile_without_parallel_tasks(fn, *args):
    """``jax.jit(fn)`` compiled for ``args`` with no intra-op parallel tasks.

    XLA:CPU splits large fusions into parallel tasks (``outer_dimension_
    partitions`` in the HLO) up to the number of CPUs the *compiling* thread
    may run on, so compiling with this thread's affinity at one CPU yields a
    program whose every op runs on one thread (same values). A diagnostic:
    the runtime's thread pool already exists, and the affinity is restored.
    """
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    try:
        # an explicit default option: a cache key of its own, so an earlier
        # compile of the same program (with parallel tasks) is not reused
        options = {"xla_embed_ir_in_executable": False}
        return jax.jit(fn).lower(*args).compile(compiler_options=options)
    finally:
        os.sched_setaffinity(0, cpus)


def parallel_tasks(hlo_text: str) -> int:
    """Instructions XLA:CPU split into more than one parallel task."""
    return len(re.findall(r'"outer_dimension_partitions":\["[2-9]', hlo_text))


def _seed_runs(width: int, steps: int, batch: int):
    """``(config, env, graphdef, states, batches)``: the smoke AD config at
    ``width``, and each seed's train state and ``[steps, ...]`` host batches."""
    import dataclasses

    import jax.numpy as jnp

    config = load_experiment("ad_darkroom", "smoke")
    config = dataclasses.replace(
        config,
        model=dataclasses.replace(
            config.model, d_model=width, d_ff=4 * width, num_heads=2
        ),
        train=dataclasses.replace(config.train, steps=steps, batch_size=batch),
    )
    env = envs.make(config.data.env)
    with tempfile.TemporaryDirectory() as tmp:
        dataset = prepare_dataset(config, env, Path(tmp), progress=False)
        config = complete_config(config, env, dataset)
        states, batches = [], []
        for seed in range(SEEDS):
            cfg = dataclasses.replace(
                config, train=dataclasses.replace(config.train, seed=seed)
            )
            graphdef, state = init_train_state(build_model(cfg, env), cfg)
            sampler = make_sampler(cfg, dataset, env)
            run = [sampler.host_batch(i) for i in range(steps)]
            batches.append(jax.tree.map(lambda *xs: jnp.stack(xs), *run))
            states.append(state)
    return config, env, graphdef, states, batches


def _best_times(sides, repeats: int) -> tuple[dict, dict]:
    """Best wall seconds of each side over ``repeats``, and its CPU per wall."""
    best = {name: float("inf") for name, _ in sides}
    cpu = {}
    for _ in range(repeats):
        for name, fn in sides:
            cpu0, start = _cpu_seconds(), time.perf_counter()
            jax.block_until_ready(fn())
            wall = time.perf_counter() - start
            if wall < best[name]:
                best[name], cpu[name] = wall, (_cpu_seconds() - cpu0) / wall
    return best, cpu


def _step_flops(step, hp, state, batches) -> float:
    """XLA's FLOP count of one train step (the first of ``batches [steps, ...]``)."""
    one_step = jax.jit(lambda s, b: step(s, b, hp))
    batch0 = jax.tree.map(lambda x: x[0], batches)
    cost = one_step.lower(state, batch0).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost.get("flops", 0.0))


def _tasks_of(jitted, *args) -> int:
    """:func:`parallel_tasks` of ``jitted`` compiled for ``args``."""
    return parallel_tasks(jitted.lower(*args).compile().as_text())


def _scans(step, hp, all_states, all_batches):
    """A scan of train steps jitted, vmapped over seeds, and vmapped compiled
    without parallel tasks (for ``all_states``, ``all_batches``)."""

    def scan(state, batch):  # [steps, ...] batches
        state, metrics = jax.lax.scan(lambda s, b: step(s, b, hp), state, batch)
        return state, metrics["loss"]

    one = jax.jit(scan)
    many = jax.jit(jax.vmap(scan))
    many_1 = compile_without_parallel_tasks(jax.vmap(scan), all_states, all_batches)
    return one, many, many_1


def step_ratio(
    width: int, repeats: int, steps: int = 60, batch: int = 8, profile: bool = False
) -> dict:
    """8 seeds vmapped vs 8 sequential runs of one compiled scan of steps.

    Also records each side's CPU seconds per wall second (the best repeat's),
    the single run's FLOP rate (XLA's count for one step), and with
    ``profile`` the thunk work of one call of each side by op class and pass
    (:mod:`xla_profile`), in seconds per 8-seed step.
    """
    import jax.numpy as jnp

    config, env, graphdef, states, batches = _seed_runs(width, steps, batch)
    hp = default_hparams(config)
    step = make_train_step(graphdef, config, env)

    stack = lambda xs: jax.tree.map(lambda *a: jnp.stack(a), *xs)  # noqa: E731
    all_states, all_batches = stack(states), stack(batches)
    one, many, many_1 = _scans(step, hp, all_states, all_batches)

    def sequential():
        return [one(s, b) for s, b in zip(states, batches, strict=True)]

    def vmapped():
        return many(all_states, all_batches)

    def vmapped_no_tasks():
        return many_1(all_states, all_batches)

    # the same step: vmapped losses equal the sequential ones (float rounding)
    seq_loss = np.stack([np.asarray(loss) for _, loss in sequential()])
    vm_loss = np.asarray(vmapped()[1])
    vm1_loss = np.asarray(vmapped_no_tasks()[1])
    sides = (
        ("sequential", sequential),
        ("vmapped", vmapped),
        ("vmapped_no_parallel_tasks", vmapped_no_tasks),
    )
    best, cpu = _best_times(sides, repeats)
    params = sum(x.size for x in jax.tree.leaves(states[0]["params"]))
    flops = _step_flops(step, hp, states[0], batches[0])
    out = {
        "d_model": width,
        "batch": batch,
        "params": int(params),
        "tokens_per_step": int(np.prod(all_batches["action"].shape[2:4])),
        "sequential_s": best["sequential"],
        "vmapped_s": best["vmapped"],
        "speedup": best["sequential"] / best["vmapped"],
        "vmapped_no_parallel_tasks_s": best["vmapped_no_parallel_tasks"],
        "speedup_no_parallel_tasks": best["sequential"]
        / best["vmapped_no_parallel_tasks"],
        "parallel_tasks": {
            "sequential": _tasks_of(one, states[0], batches[0]),
            "vmapped": _tasks_of(many, all_states, all_batches),
            "vmapped_no_parallel_tasks": parallel_tasks(many_1.as_text()),
        },
        "max_loss_diff_no_parallel_tasks": float(np.max(np.abs(vm_loss - vm1_loss))),
        "cpu_per_wall": cpu,
        "flops_per_step": flops,
        "single_run_flop_rate": flops * steps * SEEDS / best["sequential"],
        "max_loss_diff": float(np.max(np.abs(seq_loss - vm_loss))),
    }
    if profile:
        out["thunk_s_per_8_seed_step"] = _thunk_work(
            (
                ("sequential", sequential, one, (states[0], batches[0])),
                ("vmapped", vmapped, many, (all_states, all_batches)),
            ),
            steps,
        )
    return out


def _thunk_work(sides, steps: int) -> dict:
    """``{side: {"op class, pass": seconds per step}}`` of one call of each side."""
    texts = [jitted.lower(*args).compile().as_text() for _, _, jitted, args in sides]
    work = {}
    for (name, fn, _, _), text in zip(sides, texts, strict=True):
        secs = xla_profile.thunk_seconds(fn, [text])
        work[name] = {f"{k}, {p}": v / steps for (k, p), v in secs.items()}
    return work


def profile_rows(widths: list[dict]) -> list[dict]:
    """Table rows: thunk work per 8-seed step by op class, sequential vs vmapped."""
    rows = []
    for w in widths:
        work = w.get("thunk_s_per_8_seed_step")
        if not work:
            continue
        keys = sorted(
            set(work["sequential"]) | set(work["vmapped"]),
            key=lambda k: -work["sequential"].get(k, 0.0),
        )
        for key in [*keys, "total"]:
            if key == "total":
                seq, vm = (sum(work[n].values()) for n in ("sequential", "vmapped"))
            else:
                seq, vm = (work[n].get(key, 0.0) for n in ("sequential", "vmapped"))
            if max(seq, vm) < 0.01 * sum(work["sequential"].values()):
                continue
            rows.append(
                {
                    "width, batch": f"{w['d_model']}, {w['batch']}",
                    "op class, pass": key,
                    "sequential_ms": 1e3 * seq,
                    "vmapped_ms": 1e3 * vm,
                    "vmapped / sequential": vm / seq if seq else float("nan"),
                }
            )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="agentrl bench sweep_vmap", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--widths", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument(
        "--profile-widths",
        type=int,
        nargs="*",
        default=[16, 64],
        help="widths whose thunk work is profiled by op class",
    )
    parser.add_argument(
        "--only-ad",
        action="store_true",
        help="part 1 alone, written as sweep_vmap_ad.{json,md}",
    )
    args = parser.parse_args(argv)
    if args.only_ad:
        ad = ad_benchmark(args.repeats)
        print(ad)
        print(f"wrote {report_ad(ad)}")
        return
    peak = bench.matmul_peak_flops(1024)
    print(f"matmul peak {peak / 1e9:.1f} GFLOP/s", flush=True)
    configs = [(w, 8) for w in args.widths] + [(min(args.widths), 1)]
    widths = []
    for w, b in configs:
        widths.append(
            step_ratio(w, args.repeats, batch=b, profile=w in args.profile_widths)
        )
        print(widths[-1], flush=True)
    q = q_benchmark()
    ad = ad_benchmark(args.repeats)
    print(ad, q, sep="\n")
    results = {
        "ad_darkroom": ad,
        "q_learning": q,
        "same_step_by_width": widths,
        "matmul_peak_flops": peak,
        "load_average": list(os.getloadavg()),
    }
    print(f"wrote {report(results)}")


def report_ad(ad: dict) -> Path:
    """Write ``sweep_vmap_ad.{json,md}`` from part 1's results alone."""
    notes = (
        "Both sides are train_sweep calls at the same steps_per_call (the "
        "sequential side one seed a call, its program compiled once), wall "
        "time with setup on both. " + _ad_note(ad)
    )
    targets = _report_targets(ad, None, [])
    results = {"ad_darkroom": ad}
    return bench.write_record("sweep_vmap_ad", results, targets, _ad_rows(ad), notes)


def report(results: dict) -> Path:
    """Write ``sweep_vmap.{json,md}`` from the measured ``results``."""
    ad, q = results["ad_darkroom"], results["q_learning"]
    widths, peak = results["same_step_by_width"], results["matmul_peak_flops"]
    targets = _report_targets(ad, q, widths)
    rows = _report_rows(ad, q, widths)
    notes = _report_notes(ad, q, peak)
    profile = profile_rows(widths)
    if profile:
        notes += (
            "\n\n## Thunk work by op class (ms per 8-seed step, median-per-call "
            "profiler events)\n\n" + markdown_table(profile)
        )
    return bench.write_record("sweep_vmap", results, targets, rows, notes)


def _ad_note(ad: dict) -> str:
    """Part 1's method and its warm ratio at every ``steps_per_call``."""
    by_k = "; ".join(
        f"{k}: {m:.2f} [{lo:.2f}, {hi:.2f}]"
        for k, (m, lo, hi) in ad["speedup_warm_by_steps_per_call"].items()
    )
    return (
        f"The first call of each side at a steps_per_call compiles (incl. "
        f"compile, one each); then {ad['rounds']} warm rounds, the sides "
        "alternating (order reversed every round): warm speedup = median "
        "per-round ratio, bootstrap 95% CI, by steps_per_call: "
        f"{by_k}. The rows and the target are at {ad['steps_per_call']} a call "
        "(agentrl sweep's default, fixed before the run)."
    )


def _report_targets(ad: dict, q: dict, widths: list[dict]) -> list:
    targets = [
        with_ci(
            "ad_smoke_8_seeds_speedup_warm",
            ad["speedup_warm"],
            *ad["speedup_warm_ci95"],
            3.0,
        ),
        bench.target("ad_smoke_8_seeds_speedup_incl_compile", ad["speedup_cold"], 3.0),
    ]
    if q is None:  # part 1 alone
        return targets
    targets += [
        bench.target("q_learning_64_seeds_speedup_warm", q["speedup_warm"], 3.0),
        bench.target(
            "q_learning_64_seeds_speedup_incl_compile", q["speedup_cold"], 3.0
        ),
    ]
    small = min(widths, key=lambda w: w["d_model"])["d_model"]
    for w in widths:
        if w["d_model"] == small:
            name = f"same compiled step, 8 seeds vmapped / sequential, width {small}"
            if w["batch"] != 8:
                name += f", batch {w['batch']}"
            targets.append(bench.target(name, w["speedup"], 3.0))
    return targets


def _ad_rows(ad: dict) -> list[dict]:
    """Part 1's rows, at the target's ``steps_per_call`` (warm: median round)."""
    k = ad["steps_per_call"]
    return [
        {
            "workload": f"AD smoke, 8 seeds x 60 steps, {kind} ({k} a call)",
            "sequential_s": ad[f"sequential_{key}_s"],
            "vmapped_s": ad[f"vmapped_{key}_s"],
            "speedup": ad[f"speedup_{key}"],
        }
        for kind, key in (("warm", "warm"), ("incl. compile", "cold"))
    ]


def _report_rows(ad: dict, q: dict, widths: list[dict]) -> list[dict]:
    return (
        [
            {
                "workload": f"same compiled step (scan of 60), 8 seeds, width "
                f"{w['d_model']} ({w['params']:,} params), batch {w['batch']} "
                f"({w['tokens_per_step']} tokens/step)",
                "sequential_s": w["sequential_s"],
                "vmapped_s": w["vmapped_s"],
                "speedup": w["speedup"],
                "speedup, vmapped without parallel tasks": w.get(
                    "speedup_no_parallel_tasks", float("nan")
                ),
                "parallel tasks seq, vm": "{sequential}, {vmapped}".format(
                    **w.get("parallel_tasks", {"sequential": "-", "vmapped": "-"})
                ),
                "cpu/wall seq, vm, vm w/o tasks": ", ".join(
                    f"{v:.2f}" for v in w["cpu_per_wall"].values()
                ),
                "single run GFLOP/s": w["single_run_flop_rate"] / 1e9,
            }
            for w in widths
        ]
        + _ad_rows(ad)
        + [
            {
                "workload": "Q-learning, 64 seeds x 9 tasks x 100 episodes, warm",
                "sequential_s": q["sequential_warm_s"],
                "vmapped_s": q["vmapped_warm_s"],
                "speedup": q["speedup_warm"],
            },
            {
                "workload": "Q-learning, 64 seeds, incl. compile",
                "sequential_s": q["sequential_cold_s"],
                "vmapped_s": q["vmapped_cold_s"],
                "speedup": q["speedup_cold"],
            },
        ]
    )


def _report_notes(ad: dict, q: dict, peak: float) -> str:
    return (
        "warm = compiled programs reused; incl. compile = first call. AD: "
        "both sides are train_sweep calls at the same steps_per_call (the "
        "sequential side one seed a call, its program compiled once). "
        + _ad_note(ad)
        + f" 64 seeds x 4 learning "
        f"rates in one program: {q['vmapped_4_lrs_warm_s']:.2f} s warm. The "
        "machine's 2 cores are shared with other jobs, so absolute times vary. "
        f"Same-run matmul peak (1024^3 float32): {peak / 1e9:.1f} GFLOP/s. "
        "cpu/wall: CPU seconds of this process per wall second (2 = both cores). "
        "Parallel tasks: instructions XLA:CPU split across its thread pool; "
        "'without parallel tasks' is the same vmapped program compiled with one "
        "schedulable CPU (compile_without_parallel_tasks), run on both."
    )


if __name__ == "__main__":
    main()
