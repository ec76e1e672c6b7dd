"""Training throughput of AD on Dark Room: presets, dense vs T2MIR, device counts.

Run: ``agentrl bench train_throughput [--quick]``

Part 1 (presets). The real update step of ``agentrl.train``
(``init_train_state`` + ``make_train_step``: AdamW, clipping, the AD loss, and
T2MIR's balance + contrastive losses and EMA router) at the MODEL and BATCH
shapes of ``experiments/ad_darkroom.py`` (dense) and
``experiments/t2mir_ad_darkroom.py`` (T2MIR), presets ``smoke``, ``cpu`` and
``full``. Batches are synthetic (random observations, actions and rewards of
the right shapes and dtypes; T2MIR pairs share a ``task_id``), so no dataset
is needed. Reported: transitions (= tokens, one per step) per second and
achieved FLOP/s as a fraction of a 2048^3 float32 matmul timed in the same
run (:func:`common.matmul_peak_flops`).

FLOPs are analytic and count the step's *useful* work
(:func:`train_flops`, the one count of ``train_throughput``,
``preset_shapes``, ``peer_training`` and ``model_throughput``): ``3 x
forward`` (the forward, and the backward's two matmuls per forward matmul),
the forward being ``2 x`` the active matmul weights per token plus causal
attention's two matmuls
(``QK^T`` and ``PV``, ``2 x 2 x d_model`` FLOPs a pair over the heads) over
the query-key pairs the mask keeps: ``T (T + 1) / 2`` per sequence and
layer, fewer where the model's sliding window (``max_steps`` steps) is
shorter than the sequence (:func:`attention_pairs`), plus one pair a query
for a Sink-KV sink. Nothing masked and nothing recomputed is counted: the
default blockwise attention skips whole masked key blocks but still computes
the masked pairs inside the diagonal blocks, and recomputes its score tiles
in the backward pass; dense masked attention computes all ``T^2`` pairs.
The work XLA and the libraries it calls do is therefore more than this
count: a peak fraction of it gives no credit for wasted work. Active
matmul parameters exclude embedding tables (gathers) and count a MoE's
experts at ``top_k / num_experts``. Elementwise work, softmax, routing and
the windowed mean of sequence routing are not counted.
XLA's own count (``jit(step).lower(...).compile().cost_analysis()["flops"]``)
is recorded beside it as a cross-check on the CPU (on a GPU it leaves out
cuBLAS's custom calls, so :mod:`preset_shapes` does not record it there).

The ``full`` preset's batch (512 windows of 80 steps, width 512) takes tens
of seconds per step on a 2-core CPU, so it is measured at a reduced batch
(``FULL_BATCH``, recorded in the JSON); the per-transition numbers do not
depend much on the batch.

Part 2 (widths). Training FLOP utilisation at model widths 64, 256 and 512
(``WIDTHS``): the ``cpu`` preset of ``ad_darkroom`` (3 layers, 4 heads,
80-step windows) with ``d_model`` set to the width and ``d_ff = 4 d``, at
batch ``WIDTH_BATCH``. Reported: achieved FLOP/s over the same-run matmul
peak, with both FLOP counts (analytic, above, and XLA's ``cost_analysis``),
and XLA's bytes accessed, whose ratio (FLOPs per byte) says whether a width
is bound by arithmetic or by memory traffic. Target (issue 21): >= 50% of
the matmul peak at widths 256 and 512.

Part 4 (``--gpu``): every gpu and full preset's shape in bfloat16 against a
bfloat16 matmul peak timed in the same run (:mod:`preset_shapes`); alone,
into ``train_throughput_gpu.{json,md}``. On the CPU with ``--quick``: batch
2, best of 2 passes of one timed step, the largest shapes listed, not run.

Part 3 (devices). The ``cpu`` preset's dense step through the sharded path of
``agentrl.train.parallel`` (``make_mesh``, ``shard_batch``, ``replicate``) at
1, 2 and 8 fake CPU devices, each in its own subprocess with
``jax_num_cpu_devices`` set before any JAX operation. On one 2-core host the
devices share the same cores, so there is nothing to gain: the target is that
the sharded path costs little, i.e. 8-device step time <= 1.5 x 1-device.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import time

from agentrl.cliargs import positive_int

FULL_BATCH = 16  # the full preset's 512 is minutes per step on 2 CPU cores
DEVICE_COUNTS = (1, 2, 8)
DEVICE_TARGET = 1.5
WIDTHS = (64, 256, 512)
WIDTH_BATCH = 16
WIDTH_TARGET = 0.5  # of the matmul peak, at widths 256 and 512


#: The experiments measured: AD and T2MIR-AD on Dark Room.
EXPERIMENTS = ("ad_darkroom", "t2mir_ad_darkroom")


def preset_config(experiment: str, preset: str, batch: int | None = None):
    """The config of ``experiment`` at ``preset`` (batch optional)."""
    from agentrl.train.experiments import load_experiment

    config = load_experiment(experiment, preset)
    if batch is not None:
        train = dataclasses.replace(config.train, batch_size=batch)
        config = dataclasses.replace(config, train=train)
    return config


def synthetic_batch(config, env, rng) -> dict:
    """Random AD windows ``[B, T]`` of ``env``'s spaces (numpy)."""
    import numpy as np

    b = config.train.batch_size
    t = config.algo.context_steps(env)
    num_obs = int(env.observation_space(None).n)
    num_act = int(env.action_space(None).n)
    return {
        "obs": rng.integers(0, num_obs, (b, t)).astype(np.int32),
        "action": rng.integers(0, num_act, (b, t)).astype(np.int32),
        "reward": (rng.random((b, t)) < 0.1).astype(np.float32),
        "done": np.zeros((b, t), bool),
        "mask": np.ones((b, t), bool),
        "task_id": np.repeat(np.arange(b // 2 + 1), 2)[:b].astype(np.int32),
    }


#: parameters of two or more axes that are not a per-token matmul's weights
_NOT_MATMULS = ("embedding", "kind", "start", "sink_key", "sink_value")


def active_matmul_params(model) -> int:
    """Matmul weights one token meets (experts at top_k / num_experts).

    Not counted: embedding tables (gathers), the token-kind and start
    vectors, and a Sink-KV sink's key and value (one more attention pair a
    query, :func:`forward_flops`, not a weight matrix).
    """
    from flax import nnx

    c = model.config
    total = 0
    for path, leaf in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        names = [str(p) for p in path]
        value = leaf.get_value() if hasattr(leaf, "get_value") else leaf.value
        shape = tuple(value.shape)  # shapes only: the buffers may be donated
        if len(shape) < 2 or names[-1] in _NOT_MATMULS:
            continue
        if "experts" in names and names[-1] in ("w1", "w2"):
            k = c.token_top_k if "token_moe" in names else c.task_top_k
            total += k * math.prod(shape[1:])
        else:
            total += math.prod(shape)
    return total


def attention_pairs(tokens: int, window: int | None = None) -> int:
    """Query-key pairs causal attention keeps in one sequence of ``tokens``.

    Query ``p`` sees keys ``q`` with ``p - window < q <= p``
    (:func:`agentrl.models.attention.window_mask`): ``min(p + 1, window)``
    keys, ``T (T + 1) / 2`` in all when the window covers the sequence
    (``window`` None or ``>= tokens``).
    """
    w = tokens if window is None else max(0, min(window, tokens))
    return w * (w + 1) // 2 + (tokens - w) * w


def attention_flops(config, pairs: int) -> int:
    """Forward FLOPs of ``pairs`` query-key pairs in every layer and head.

    Two matmuls a pair (``QK^T`` and ``PV``), ``Dh`` multiply-adds each, in
    each of ``num_heads`` heads: ``2 x 2 x num_heads x Dh`` FLOPs a pair.
    """
    return config.num_layers * 4 * config.num_heads * config.head_dim * pairs


def forward_flops(model, batch: int, steps: int) -> float:
    """Useful forward FLOPs over ``batch`` sequences of ``steps`` steps.

    ``2 x`` :func:`active_matmul_params` per token, plus
    :func:`attention_flops` over the pairs the causal, windowed mask keeps
    (:func:`attention_pairs`; one more a query with a Sink-KV sink). Nothing
    masked or recomputed is counted: the work actually done (XLA's, cuBLAS's)
    may be more.
    """
    c = model.config
    t = steps * c.tokens_per_step
    window = c.window_tokens if c.max_steps is not None else None
    pairs = attention_pairs(t, window) + (t if c.attention_sink else 0)
    per_sequence = 2 * active_matmul_params(model) * t + attention_flops(c, pairs)
    return float(batch * per_sequence)


def train_flops(model, batch: int, steps: int) -> float:
    """Useful FLOPs of one update step: ``3 x`` :func:`forward_flops`.

    The forward, and the backward's two matmuls per forward matmul (input
    and weight gradients); the module docstring says what is counted and
    what is not (the optimizer, elementwise work, masked or recomputed
    attention). The one count of ``train_throughput``, ``preset_shapes``,
    ``peer_training`` and ``model_throughput``.
    """
    return 3.0 * forward_flops(model, batch, steps)


def build_step(config, mesh=None):
    """``(step_fn, state, hparams, model)`` placed on ``mesh`` if given."""
    import jax
    from flax import nnx

    from agentrl.configtools import default_hparams
    from agentrl.envs import make as make_env
    from agentrl.models.transformer import DecisionModel
    from agentrl.train import parallel
    from agentrl.train.config import complete_config
    from agentrl.train.step import init_train_state, make_train_step

    env = make_env(config.data.env, **dict(config.data.env_args))
    full = complete_config(config, env)
    model = DecisionModel(full.model, rngs=nnx.Rngs(config.train.seed))
    graphdef, state = init_train_state(model, full)
    hparams = default_hparams(full)
    if mesh is not None:
        state = parallel.replicate(state, mesh)
        hparams = parallel.replicate(hparams, mesh)
    step = jax.jit(make_train_step(graphdef, full, env), donate_argnums=0)
    return step, state, hparams, model, env


def time_steps(step, state, batches, hparams, repeats: int) -> tuple[float, float]:
    """``(first-call s, best seconds per step)`` over ``len(batches)`` steps."""
    import jax

    start = time.perf_counter()
    state, metrics = step(state, batches[0], hparams)
    jax.block_until_ready(metrics)
    compile_s = time.perf_counter() - start
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for batch in batches:
            state, metrics = step(state, batch, hparams)
        jax.block_until_ready((state, metrics))
        best = min(best, (time.perf_counter() - start) / len(batches))
    return compile_s, best


def measure_preset(
    experiment: str, preset: str, num_steps: int, peak: float, width: int = 0
) -> dict:
    import jax
    import numpy as np

    batch = FULL_BATCH if preset == "full" else None
    if width:
        batch = WIDTH_BATCH
    config = preset_config(experiment, preset, batch)
    if width:  # Part 2: the preset's model at another width
        model_cfg = dataclasses.replace(config.model, d_model=width, d_ff=4 * width)
        config = dataclasses.replace(config, model=model_cfg)
    step, state, hparams, model, env = build_step(config)
    rng = np.random.default_rng(0)
    batches = [synthetic_batch(config, env, rng) for _ in range(num_steps)]
    batches = [jax.device_put(b) for b in batches]
    start = time.perf_counter()
    compiled = step.lower(state, batches[0], hparams).compile()
    compile_s = time.perf_counter() - start
    xla_flops = xla_bytes = None
    try:
        cost = compiled.cost_analysis()
        cost = cost[0] if isinstance(cost, list | tuple) else cost
        xla_flops = float(cost.get("flops", float("nan")))
        xla_bytes = float(cost.get("bytes accessed", float("nan")))
    except Exception as err:  # cost analysis is best effort
        print(f"cost_analysis unavailable: {err}")
    _, sec = time_steps(compiled, state, batches, hparams, repeats=2)
    b, t = config.train.batch_size, config.algo.context_steps(env)
    flops = train_flops(model, b, t)
    c = model.config
    return {
        "algo": config.algo.label,
        "preset": preset,
        "layers": c.num_layers,
        "d_model": c.d_model,
        "d_ff": c.d_ff,
        "batch": b,
        "preset_batch": preset_config(experiment, preset).train.batch_size,
        "window_steps": t,
        "step_s": sec,
        "transitions_per_s": b * t / sec,
        "analytic_flops_per_step": flops,
        "xla_flops_per_step": xla_flops,
        "xla_bytes_accessed_per_step": xla_bytes,
        "xla_flops_per_byte": (xla_flops / xla_bytes) if xla_bytes else None,
        "flops_per_s": flops / sec,
        "peak_fraction": flops / sec / peak,
        "xla_peak_fraction": (xla_flops / sec / peak) if xla_flops else None,
        "compile_s": compile_s,
        "timed_steps": num_steps,
    }


def measure_widths(num_steps: int, peak: float) -> list[dict]:
    """Part 2: FLOP utilisation of the AD step at each of ``WIDTHS``."""
    rows = []
    for width in WIDTHS:
        r = measure_preset("ad_darkroom", "cpu", num_steps, peak, width=width)
        print(
            f"width {width}: {r['step_s']:.3f} s/step, {r['peak_fraction']:.1%} of "
            f"peak (analytic), {r['xla_peak_fraction'] or float('nan'):.1%} (XLA "
            f"count), {r['xla_flops_per_byte'] or float('nan'):.1f} FLOP/byte",
            flush=True,
        )
        rows.append(r)
    return rows


def device_worker(num_devices: int, num_steps: int) -> None:
    """Subprocess body: the cpu preset's dense step on ``num_devices`` devices."""
    import jax

    jax.config.update("jax_num_cpu_devices", num_devices)
    import numpy as np

    from agentrl.train import parallel

    config = preset_config(EXPERIMENTS[0], "cpu")
    mesh = parallel.make_mesh()
    parallel.check_batch_divisible(config.train.batch_size, mesh)
    step, state, hparams, _, env = build_step(config, mesh)
    rng = np.random.default_rng(0)
    batches = [
        parallel.shard_batch(synthetic_batch(config, env, rng), mesh)
        for _ in range(num_steps)
    ]
    compile_s, sec = time_steps(step, state, batches, hparams, repeats=3)
    b, t = config.train.batch_size, config.algo.context_steps(env)
    print(
        "RESULT "
        + json.dumps(
            {
                "devices": jax.device_count(),
                "batch": b,
                "window_steps": t,
                "step_s": sec,
                "transitions_per_s": b * t / sec,
                "compile_s": compile_s,
                "timed_steps": num_steps,
            }
        ),
        flush=True,
    )


def run_device_counts(num_steps: int) -> list[dict]:
    out = []
    for n in DEVICE_COUNTS:
        env = dict(os.environ)
        env.pop("XLA_FLAGS", None)
        proc = subprocess.run(
            [sys.executable, __file__]
            + ["--worker-devices", str(n)]
            + ["--steps", str(num_steps)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        if proc.returncode or not lines:
            raise RuntimeError(f"{n}-device worker failed:\n{proc.stderr[-3000:]}")
        r = json.loads(lines[-1][len("RESULT ") :])
        print(f"devices={n}: {r}", flush=True)
        out.append(r)
    return out


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="agentrl bench train_throughput", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="smoke/cpu only")
    parser.add_argument(
        "--widths-only",
        action="store_true",
        help="only Part 2 (FLOP utilisation at widths 64/256/512); prints, "
        "writes nothing",
    )
    parser.add_argument(
        "--gpu",
        action="store_true",
        help="only Part 4: every gpu/full preset's shape in bfloat16 against a "
        "bfloat16 peak (with --quick: reduced, for the CPU)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help="with --gpu: seconds after which no new shape starts",
    )
    parser.add_argument(
        "--skip-done",
        default=None,
        metavar="RECORD",
        help="with --gpu: an earlier train_throughput_gpu.json of this device "
        "kind; the shapes it measured are kept, not measured again",
    )
    parser.add_argument("--steps", type=positive_int, default=5, help="timed steps")
    parser.add_argument("--worker-devices", type=int, default=0, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def measure_presets(presets: tuple[str, ...], num_steps: int, peak: float) -> list:
    """Part 1: every experiment at every preset (``num_steps`` timed at cpu)."""
    rows = []
    for preset in presets:
        steps = {"smoke": 20, "cpu": num_steps, "full": max(2, num_steps // 2)}
        for experiment in EXPERIMENTS:
            r = measure_preset(experiment, preset, steps[preset], peak)
            print(
                f"{r['algo']:9s} {preset:6s} batch {r['batch']:4d} x "
                f"{r['window_steps']}: "
                f"{r['transitions_per_s']:.3e} transitions/s, "
                f"{r['peak_fraction']:.1%} of peak (compile {r['compile_s']:.1f}s)",
                flush=True,
            )
            rows.append(r)
    return rows


def _targets(
    rows: list[dict], widths: list[dict], devices: list[dict], presets: tuple
) -> list:
    from common import target

    def find(algo, preset):
        return next(r for r in rows if r["algo"] == algo and r["preset"] == preset)

    targets = [
        target(
            "8-device / 1-device step time (cpu preset, fake CPU devices)",
            devices[-1]["step_time_vs_1_device"],
            DEVICE_TARGET,
            higher_is_better=False,
        ),
        target(
            "2-device / 1-device step time (cpu preset, fake CPU devices)",
            devices[1]["step_time_vs_1_device"],
            DEVICE_TARGET,
            higher_is_better=False,
        ),
    ]
    for r in widths:
        if r["d_model"] >= 256:
            targets.append(
                target(
                    f"width {r['d_model']} training FLOP/s fraction of matmul peak",
                    r["peak_fraction"],
                    WIDTH_TARGET,
                )
            )
    # Reported, not judged: the issue sets no FLOP-fraction goal (target 0).
    for preset in presets:
        for algo in dict.fromkeys(r["algo"] for r in rows):
            targets.append(
                target(
                    f"{preset} {algo} FLOP/s fraction of matmul peak (reported)",
                    find(algo, preset)["peak_fraction"],
                    0.0,
                )
            )
    return targets


def _notes(peak: float, num_steps: int, quick: bool) -> str:
    full = (
        "The full preset was not timed (--quick: smoke and cpu only). "
        if quick
        else f"The full preset is timed at batch {FULL_BATCH} instead of 512 "
        "(minutes per step on 2 cores); its model shape is the preset's. "
    )
    full_steps = "" if quick else f", full {max(2, num_steps // 2)}"
    return (
        f"Matmul peak (2048^3 float32, same run): {peak / 1e9:.1f} GFLOP/s. "
        "FLOPs analytic, the step's useful work (train_flops: 3 x forward; "
        "forward = 2 x active matmul params per token + 4 d per kept causal "
        "query-key pair (T (T + 1) / 2 a sequence and layer), nothing masked or "
        "recomputed counted, so XLA's actual work is more); XLA cost_analysis "
        "FLOPs in the JSON as a cross-check. "
        f"Synthetic batches. {full}Timed steps after compile: smoke 20, cpu "
        f"{num_steps}{full_steps} (best of 2 passes); "
        f"device runs: {num_steps} steps, best of 3, each device count in its "
        "own subprocess with jax_num_cpu_devices set. The device targets say the "
        "sharded path costs little where there is nothing to gain (all fake "
        "devices share the same 2 cores). FLOP-fraction entries are reported "
        "with target 0: the issue names no numeric goal for them. Load average "
        f"at the end: {os.getloadavg()[0]:.1f} (shared 2-core machine)."
    )


def _table(rows: list[dict], devices: list[dict], widths: list[dict]) -> list:
    table = [
        {
            k: r[k]
            for k in (
                "algo",
                "preset",
                "batch",
                "window_steps",
                "d_model",
                "step_s",
                "transitions_per_s",
                "peak_fraction",
                "compile_s",
            )
        }
        for r in rows
    ]
    table += [
        {
            "algo": "ad (sharded)",
            "preset": f"cpu, {r['devices']} device(s)",
            "batch": r["batch"],
            "window_steps": r["window_steps"],
            "step_s": r["step_s"],
            "transitions_per_s": r["transitions_per_s"],
            "peak_fraction": "",
            "compile_s": r["compile_s"],
        }
        for r in devices
    ]
    table += [
        {
            "algo": "ad (width)",
            "preset": f"cpu, d_model {r['d_model']}",
            "batch": r["batch"],
            "window_steps": r["window_steps"],
            "d_model": r["d_model"],
            "step_s": r["step_s"],
            "transitions_per_s": r["transitions_per_s"],
            "peak_fraction": r["peak_fraction"],
            "compile_s": r["compile_s"],
        }
        for r in widths
    ]
    return table


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    if args.worker_devices:
        device_worker(args.worker_devices, args.steps)
        return

    from common import (
        markdown_table,
        matmul_peak_flops,
        write_record,
    )

    if args.gpu:
        return _gpu_presets(args)

    peak = matmul_peak_flops(2048)
    print(f"matmul peak: {peak / 1e9:.1f} GFLOP/s", flush=True)
    widths = measure_widths(args.steps, peak)
    if args.widths_only:
        return
    presets = ("smoke", "cpu") if args.quick else ("smoke", "cpu", "full")
    rows = measure_presets(presets, args.steps, peak)
    # Warm-up is the first call inside each worker; subprocesses run one by one.
    devices = run_device_counts(args.steps)
    base = devices[0]["step_s"]
    for r in devices:
        r["step_time_vs_1_device"] = r["step_s"] / base
    targets = _targets(rows, widths, devices, presets)
    notes = _notes(peak, args.steps, args.quick)
    results = {
        "matmul_peak_flops": peak,
        "flops_method": "analytic (cross-check: XLA cost_analysis)",
        "quick": args.quick,
        "full_preset_batch_used": None if args.quick else FULL_BATCH,
        "presets": rows,
        "widths": widths,
        "devices": devices,
        "notes": notes,
    }
    table = _table(rows, devices, widths)
    path = write_record("train_throughput", results, targets, table, notes)
    print(markdown_table(table))
    print(f"wrote {path}")


def _gpu_presets(args: argparse.Namespace) -> None:
    """Part 4: the gpu and full presets' shapes in bfloat16 (``--gpu``)."""
    import tempfile

    import jax
    import preset_shapes
    from common import markdown_table, write_record

    from agentrl.project import RESULTS_ENV

    steps = 1 if args.quick else args.steps
    earlier = {}
    if args.skip_done:
        kind = jax.devices()[0].device_kind
        earlier = preset_shapes.earlier_rows(args.skip_done, kind)
    peak, rows = preset_shapes.measure_all(args.quick, steps, args.budget, earlier)
    notes = (
        f"bfloat16 matmul peak (same run, random data): {peak / 1e12:.2f} TFLOP/s. "
        "Every gpu/full preset of the experiments trained from a dataset, at its "
        "model, batch and window, compute in bfloat16, synthetic batches from the "
        "env's spaces (RA-DT rows: the retrieval its device sampler runs in the "
        "batch draw is left out, only the model's update is timed); FLOPs "
        "analytic, the step's useful work (train_flops: 3 x forward, causal "
        "attention over the T (T + 1) / 2 kept query-key pairs, nothing masked "
        "or recomputed; XLA's and cuBLAS's actual work is more). XLA's "
        "cost_analysis FLOPs are recorded on the CPU only: on a GPU they leave "
        "out cuBLAS's custom calls (matmuls) and are not comparable. "
        + (
            f"--quick: batch {preset_shapes.QUICK_BATCH}, best of 2 passes of 1 "
            "timed step, shapes over "
            f"{preset_shapes.QUICK_FLOP_CAP:.0e} FLOP/step not run."
            if args.quick
            else f"Best of 2 passes of {steps} steps after compile."
        )
        + (
            " Rows with a `measured` date were measured by that earlier run "
            f"({args.skip_done}: same device kind, shape and FLOP count), "
            "against its own peak, and kept."
            if any(r.get("measured") for r in rows)
            else ""
        )
    )
    results = {"bf16_matmul_peak_flops": peak, "rows": rows, "quick": args.quick}
    keys = [
        "presets",
        "algo",
        "d_model",
        "batch",
        "window_steps",
        "status",
        "step_s",
        "tokens_per_s",
        "peak_fraction",
        "compile_s",
        "measured",
    ]
    table = [{k: r.get(k, "") for k in keys} for r in rows]
    quick_dir = (
        tempfile.mkdtemp() if args.quick and not os.environ.get(RESULTS_ENV) else None
    )
    path = write_record(
        "train_throughput_gpu",
        results,
        preset_shapes.targets(rows),
        table,
        notes,
        quick_dir,
    )
    print(markdown_table(table))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
