"""Decision-model throughput: training step, MoE overhead, cached decoding.

Run: ``agentrl bench model_throughput [--full] [--rounds N]``

- Training step (AdamW, cross-entropy + balance loss, one jit) of a 4-layer,
  width-256, 8-head model at contexts 512 and 2,048 (one token per step),
  dense (d_ff 1024) and T2MIR MoE in the last layer (expert_ff 341, so the
  active parameters of the MoE layer equal the dense FFN's). Tokens/s and
  achieved model FLOP/s as a fraction of a large jitted matmul timed in the
  same run. FLOPs: the step's useful work, :func:`train_throughput.train_flops`
  (3 x forward; forward = 2 x active matmul weights per token + causal
  attention over the ``T (T + 1) / 2`` query-key pairs the mask keeps per
  sequence and layer; nothing masked or recomputed counted, so the work
  XLA does is more).
- MoE overhead: the dense and the MoE step of each context are timed in
  alternating rounds (:func:`common.paired_rounds`: each round times both,
  the order reversed every round); the target is on the median of the
  per-round MoE / dense ratios, met when its whole bootstrap 95% CI
  (:func:`common.median_ci`) is under 1.5. ``step_s`` is the median round.
- MoE dispatch: "blocked" (the default: blocks of one expert, one batched
  matmul) vs "sorted" (ragged_dot) vs "dense" (every expert) step time,
  the three in alternating rounds (median seconds, and each one's median
  per-round ratio to "blocked").
- Decoding: cached ``decode`` vs recomputing the full context at the SAME
  batch (default: 8, 4 and 1 sequences at contexts 256, 1,024 and 4,096,
  what recomputing allows on a 2-core CPU; ``--full``: the issue's 256 at
  every context), in alternating rounds: each round one pass of
  :data:`DECODE_STEPS` cached steps (the cache carried from call to call,
  updated in place as ``agentrl eval`` does) and one recompute call (one
  step per sequence). steps/s = sequences x steps per second; the speedup
  is the median per-round ratio of seconds per step (recompute / cached)
  with its bootstrap 95% CI, the ctx-1,024 target met when the whole CI
  clears 10.

``compile_s`` is ``jit(f).lower(...).compile()`` alone (no step run).
"""

from __future__ import annotations

import argparse
import os
import statistics

import common as bench
import jax
import jax.numpy as jnp
import optax
from flax import nnx
from train_throughput import attention_flops, train_flops

from agentrl.cliargs import positive_int
from agentrl.evaluate.targets import with_ci
from agentrl.models import DecisionModel, ModelConfig, log_prob

D, LAYERS, HEADS, D_FF, EXPERT_FF = 256, 4, 8, 1024, 341
CONTEXTS = (512, 2048)
DECODE_CONTEXTS = (256, 1024, 4096)
#: cached decoding steps per timed call (a recompute call is one step)
DECODE_STEPS = 8
MOE_TARGET, DECODE_TARGET = 1.5, 10.0


def config(ctx: int, moe: bool, dispatch: str = "blocked") -> ModelConfig:
    return ModelConfig(
        obs_size=100,
        action_size=5,
        num_layers=LAYERS,
        num_heads=HEADS,
        d_model=D,
        d_ff=D_FF,
        max_steps=ctx,
        moe_layers=(LAYERS - 1,) if moe else (),
        expert_ff=EXPERT_FF,
        moe_dispatch=dispatch,
    )


def create(cfg: ModelConfig) -> DecisionModel:
    return nnx.jit(lambda: DecisionModel(cfg, rngs=nnx.Rngs(0)))()


def model_flops_per_token(cfg: ModelConfig, keys: int) -> float:
    """Forward matmul FLOPs of ONE token that attends to ``keys`` keys.

    The trunk's weights (q, k, v, o projections; the FFN, or the MoE's
    active experts) and :func:`train_throughput.attention_flops` over
    ``keys`` pairs. Summed over a sequence's tokens at their own key counts
    (token ``p`` of a causal sequence sees ``p + 1``) it is the causal
    forward; evaluating it at ``keys = T`` for every token would count the
    masked half of the ``[T, T]`` scores (this benchmark's training rows use
    :func:`train_throughput.train_flops`; ``online_throughput`` sums this
    per token). Embedding, head and router weights are not counted here.
    """
    d = cfg.d_model
    proj = 4 * d * d  # q, k, v, o
    ffn_dense = 2 * d * cfg.d_ff
    half = d // 2
    ffn_moe = (cfg.token_top_k + cfg.task_top_k) * (d * cfg.expert_hidden) + (
        cfg.token_top_k + cfg.task_top_k
    ) * (cfg.expert_hidden * half)
    total = 0
    for i in range(cfg.num_layers):
        total += proj + (ffn_moe if i in cfg.moe_layers else ffn_dense)
    # multiply-add = 2 FLOPs
    return 2.0 * total + attention_flops(cfg, keys + int(cfg.attention_sink))


def train_step(cfg: ModelConfig, ctx: int, batch: int):
    """``(jitted step, its args, model)``: one AdamW update on a fixed batch."""
    model = create(cfg)
    opt = optax.adamw(3e-4, weight_decay=1e-4)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    opt_state = opt.init(params)
    k = jax.random.split(jax.random.key(0), 3)
    obs = jax.random.randint(k[0], (batch, ctx), 0, cfg.obs_size)
    act = jax.random.randint(k[1], (batch, ctx), 0, cfg.action_size)
    rew = jax.random.normal(k[2], (batch, ctx))

    @jax.jit
    def step(params, rest, opt_state):
        model = nnx.merge(graphdef, params, rest)

        def loss_fn(m):
            out = m(obs, act, rew, deterministic=False)
            nll = -log_prob(cfg.head, out, act).mean()
            return nll + out.aux["balance_loss"]

        loss, g = nnx.value_and_grad(loss_fn)(model)
        _, params, rest = nnx.split(model, nnx.Param, ...)
        upd, opt_state = opt.update(g, opt_state, params)
        return optax.apply_updates(params, upd), rest, opt_state, loss

    return step, (params, rest, opt_state), model


def ratio_ci(seconds: dict, num: str, den: str) -> tuple[float, float, float]:
    """Median and bootstrap 95% CI of the per-round ratios ``num / den``."""
    ratios = [a / b for a, b in zip(seconds[num], seconds[den], strict=True)]
    return bench.median_ci(ratios)


def _train_rows(train_batch: dict, peak: float, rounds: int) -> tuple[list, list]:
    """Dense and MoE train steps at each context (paired), and MoE's targets."""
    rows, targets = [], []
    for ctx, b in train_batch.items():
        runs, models = {}, {}
        for name, moe in (("dense", False), ("moe", True)):
            step, args, models[name] = train_step(config(ctx, moe), ctx, b)
            runs[name] = (step, args)
        compile_s, _, seconds = bench.compile_and_pair(runs, rounds)
        for name in runs:
            sec = statistics.median(seconds[name])
            flops = train_flops(models[name], b, ctx)
            r = {
                "bench": "train",
                "model": name,
                "context": ctx,
                "batch": b,
                "step_s": sec,
                "step_s_rounds": seconds[name],
                "tokens_per_s": b * ctx / sec,
                "flops_per_step": flops,
                "flops_per_s": flops / sec,
                "peak_fraction": flops / sec / peak,
                "compile_s": compile_s[name],
            }
            print(r, flush=True)
            rows.append(r)
        ratio = ratio_ci(seconds, "moe", "dense")
        rows[-1]["moe_over_dense"] = list(ratio)
        targets.append(
            with_ci(
                f"moe_over_dense_step_time_ctx{ctx}",
                *ratio,
                MOE_TARGET,
                higher=False,
            )
        )
    return rows, targets


def _dispatch_times(rounds: int) -> dict:
    """MoE train step of each dispatch (context 512, batch 2), paired rounds:
    ``{dispatch: {"step_s": median, "rounds": [...], "over_blocked": ci}}``."""
    runs = {
        dispatch: train_step(config(512, True, dispatch), 512, 2)[:2]
        for dispatch in ("blocked", "sorted", "dense")
    }
    compile_s, _, seconds = bench.compile_and_pair(runs, rounds)
    times = {}
    for dispatch in runs:
        times[dispatch] = {
            "step_s": statistics.median(seconds[dispatch]),
            "rounds": seconds[dispatch],
            "over_blocked": list(ratio_ci(seconds, dispatch, "blocked")),
            "compile_s": compile_s[dispatch],
        }
        print("dispatch", dispatch, times[dispatch], flush=True)
    return times


class CachedSteps:
    """``DECODE_STEPS`` cached decoding steps per call, the cache carried.

    The compiled ``decode`` donates its cache (updated in place, as in
    ``agentrl eval``), so the cache cannot be a fixed argument of
    :func:`common.paired_rounds`; this callable keeps it between calls.
    """

    def __init__(self, decode, cache, steps: int):
        self.decode, self.cache, self.steps = decode, cache, steps

    def __call__(self, state, obs, action, reward):
        for _ in range(self.steps):
            _, self.cache = self.decode(state, self.cache, obs, action, reward)
        return self.cache


def decode_runs(ctx: int, batch: int, steps: int = DECODE_STEPS):
    """``(runs, compile_s)``: cached decoding (``steps`` per call) and the
    full-context recompute, both at ``batch`` sequences, compiled."""
    import time

    cfg = config(ctx, moe=False)
    model = create(cfg)
    graphdef, state = nnx.split(model)

    def decode(state, cache, obs, a, r):
        return nnx.merge(graphdef, state).decode(cache, obs, a, r)

    def recompute(state, obs, act, rew):
        return nnx.merge(graphdef, state)(obs, act, rew).action[:, -1]

    cache = model.init_cache(batch, ctx)
    zeros = jnp.zeros((batch,), jnp.int32)
    one = (state, zeros, zeros, zeros.astype(jnp.float32))
    seq = jnp.zeros((batch, ctx), jnp.int32)
    full = (state, seq, seq, seq.astype(jnp.float32))
    compile_s = {}
    start = time.perf_counter()
    cached = jax.jit(decode, donate_argnums=1).lower(state, cache, *one[1:]).compile()
    compile_s["cached"] = time.perf_counter() - start
    start = time.perf_counter()
    again = jax.jit(recompute).lower(*full).compile()
    compile_s["recompute"] = time.perf_counter() - start
    runs = {
        "cached": (CachedSteps(cached, cache, steps), one),
        "recompute": (again, full),
    }
    return runs, compile_s


def _decode_rows(dec_batch: dict, rounds: int) -> tuple[list, list]:
    """Cached against recomputed decoding at each context, same batch, paired."""
    rows, targets = [], []
    for ctx, b in dec_batch.items():
        runs, compile_s = decode_runs(ctx, b)
        seconds = bench.paired_rounds(runs, rounds)
        per_step = {
            "cached": [s / DECODE_STEPS for s in seconds["cached"]],
            "recompute": seconds["recompute"],
        }
        speedup = ratio_ci(per_step, "recompute", "cached")
        r = {
            "bench": "decode",
            "context": ctx,
            "batch": b,
            "cached_steps_per_s": b / statistics.median(per_step["cached"]),
            "recompute_steps_per_s": b / statistics.median(per_step["recompute"]),
            "speedup": speedup[0],
            "speedup_ci": list(speedup[1:]),
            "cached_s_per_step_rounds": per_step["cached"],
            "recompute_s_per_step_rounds": per_step["recompute"],
            "compile_s": compile_s["cached"],
            "recompute_compile_s": compile_s["recompute"],
        }
        print(r, flush=True)
        rows.append(r)
        if ctx == 1024:
            targets.append(
                with_ci(
                    f"decode_cached_speedup_ctx1024_batch{b}", *speedup, DECODE_TARGET
                )
            )
    return rows, targets


def sizes(full: bool) -> tuple[dict, dict]:
    """``(train batch, decode batch)`` per context (``--full``: the issue's)."""
    if full:
        return {512: 16, 2048: 4}, {ctx: 256 for ctx in DECODE_CONTEXTS}
    return {512: 2, 2048: 1}, {256: 8, 1024: 4, 4096: 1}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="agentrl bench model_throughput", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--full", action="store_true", help="issue's batch 256")
    parser.add_argument(
        "--rounds", type=positive_int, default=7, help="alternating timing rounds"
    )
    args = parser.parse_args(argv)
    start_load = os.getloadavg()[0]
    train_batch, dec_batch = sizes(args.full)

    peak = bench.matmul_peak_flops(2048)
    print(f"matmul peak: {peak / 1e9:.1f} GFLOP/s")
    results = {"matmul_peak_flops": peak, "rounds": args.rounds}
    results["train"], targets = _train_rows(train_batch, peak, args.rounds)
    rows = list(results["train"])
    results["dispatch"] = _dispatch_times(args.rounds)
    for dispatch, t in results["dispatch"].items():
        rows.append({"bench": f"train dispatch={dispatch}", "model": "moe"})
        rows[-1].update(context=512, batch=2, step_s=t["step_s"])
    results["decode"], decode_targets = _decode_rows(dec_batch, args.rounds)
    rows += results["decode"]
    targets += decode_targets

    notes = (
        f"{args.rounds} alternating rounds per comparison (common.paired_rounds); "
        "ratios and speedups are medians of per-round ratios with bootstrap 95% "
        "CIs, targets met only when the whole CI clears the goal; step seconds "
        "are median rounds. FLOPs: train_throughput.train_flops (useful work: "
        "causal attention over the T (T + 1) / 2 kept pairs, nothing masked or "
        "recomputed). steps/s = sequences x steps per second. Decoding: cached "
        f"and recompute at the same batch per context {dec_batch} "
        f"({DECODE_STEPS} cached steps a call, the cache carried; one recompute "
        "call = one step per sequence; the issue's 256 is too slow to recompute "
        "on 2 CPU cores: run --full on a GPU). Training batch per context "
        f"{train_batch}. MoE = T2MIR token+task MoE in the last layer, "
        f"expert_ff {EXPERT_FF} (active params = dense d_ff {D_FF}). compile_s: "
        "lower().compile() alone. "
        f"{bench.load_note(start_load)}."
    )
    results["notes"] = notes
    # the table: scalars only (per-round lists and CIs are in the JSON)
    keys = [
        k
        for k in dict.fromkeys(k for r in rows for k in r)
        if not any(isinstance(r.get(k), list) for r in rows)
    ]
    rows = [{k: r.get(k, "") for k in keys} for r in rows]
    path = bench.write_record("model_throughput", results, targets, rows, notes)
    print(path)


if __name__ == "__main__":
    main()
