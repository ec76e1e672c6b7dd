"""Training step vs the peers' PyTorch steps at their own shapes (same run).

Run: ``agentrl bench peer_training [--repeats N] [--only KIND ...]``
(needs torch beside agentrl, ``pip install -c constraints.txt torch PyYAML``;
without it the benchmark says so and exits 0 having written nothing).

Shapes (the peers' published settings; equal tokens on both sides):

- ``t2mir_dense``: T2MIR's Dark Room AD, 4 layers, 8 heads, width 64
  (FFN 256), a window of 400 transitions as 1,200 state / action / reward
  tokens (agentrl ``token_layout="sar"``), batch 16;
- ``t2mir_moe``: the same with the last layer's FFN as T2MIR's token-wise
  MoE (6 experts, top-2, noisy gating) beside the task-wise MoE (12 experts,
  top-2), each half the width, balance loss weight 0.1;
- ``dpt``: DPT's bandit, GPT-2 width 32, 4 layers, 1 head, a query plus 500
  transitions (501 tokens), batch 64, cross-entropy at every position.

One update each: forward, loss, backward, gradient clipping at 1.0, AdamW.
The PyTorch side is :mod:`_peers` (a stand-in written
from the peers' structure: pre-LN blocks, fused SDPA, per-expert dispatch);
torch runs with 2 threads, JAX on the same 2 cores, one job at a time,
alternating. agentrl's step is its ``DecisionModel`` with the same loss and
``optax`` AdamW + clipping, timed with the default blockwise attention and
with the reference (full ``[T, T]``) attention. Reported: seconds per step,
and the ratio torch / agentrl (> 1: agentrl faster). Targets (issue 21):
ratio >= 3 for each shape; agentrl's MoE step within 1.3x of its dense step
(the dense step's FFNs are 256 wide; the MoE layer's active experts, two of
the token MoE's and two of the task MoE's, each ``64 -> 128 -> 32``, equal
a 384-wide FFN, T2MIR's own ``ff_dim`` for that layer: the dense side has
fewer active parameters, so the ratio is conservative).

``--t2mir PATH`` (a clone of github.com/NJU-RL/T2MIR, outside this
repository) also times T2MIR's REAL training step
(:func:`_peers.build_t2mir_real`) at the same batch in the
same run, twice: with its CPU attention (``"vanilla"``: the full masked
scores) and with its configured ``"flash"`` path, whose
``flash_attn_qkvpacked_func`` (CUDA only) is computed by torch's fused SDPA
in float32. Both figures and their ratio to the stand-in are recorded, so
the stand-in's fidelity is measured, not assumed.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import _peers

from agentrl.cliargs import positive_int
from agentrl.host_memory import configure_malloc

KINDS = ("t2mir_dense", "t2mir_moe", "dpt_bandit")
MOE_TARGET = 1.3  # agentrl MoE step / dense step
BATCH = {"t2mir_dense": 16, "t2mir_moe": 16, "dpt_bandit": 64}
TARGET = 3.0


def agentrl_config(kind: str, attention: str = "blockwise"):
    """The :class:`~agentrl.models.ModelConfig` of a peer shape."""
    from agentrl.models import ModelConfig

    if kind == "dpt_bandit":
        return ModelConfig(
            obs_kind="continuous",
            obs_size=1,
            action_size=5,
            num_layers=4,
            num_heads=1,
            d_model=32,
            d_ff=128,
            max_steps=501,
            token_layout="transition",
            attention=attention,
        )
    return ModelConfig(
        obs_size=100,
        action_size=5,
        num_layers=4,
        num_heads=8,
        d_model=64,
        d_ff=256,
        max_steps=400,
        token_layout="sar",
        moe_layers=(3,) if kind == "t2mir_moe" else (),
        token_experts=6,
        token_top_k=2,
        task_experts=12,
        task_top_k=2,
        task_routing="token",
        attention=attention,
    )


def agentrl_step(kind: str, attention: str = "blockwise", seed: int = 0):
    """``(step(), model)``: one jitted AdamW update on a fixed synthetic batch."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from flax import nnx

    from agentrl.models import DecisionModel

    cfg = agentrl_config(kind, attention)
    model = DecisionModel(cfg, rngs=nnx.Rngs(seed))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    rng = np.random.default_rng(seed)
    b = BATCH[kind]
    if kind == "dpt_bandit":
        n = cfg.max_steps - 1
        batch = {
            "query": jnp.asarray(rng.normal(size=(b, 1)), jnp.float32),
            "obs": jnp.asarray(rng.normal(size=(b, n, 1)), jnp.float32),
            "action": jnp.asarray(rng.integers(0, 5, (b, n)), jnp.int32),
            "reward": jnp.asarray(rng.normal(size=(b, n)), jnp.float32),
            "target": jnp.asarray(rng.integers(0, 5, (b, n + 1)), jnp.int32),
        }
    else:
        t = cfg.max_steps
        batch = {
            "obs": jnp.asarray(rng.integers(0, 100, (b, t)), jnp.int32),
            "action": jnp.asarray(rng.integers(0, 5, (b, t)), jnp.int32),
            "reward": jnp.asarray(rng.random((b, t)) < 0.1, jnp.float32),
        }
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(3e-4))
    opt_state = tx.init(params)

    def loss_fn(params, batch):
        m = nnx.merge(graphdef, params, rest)
        if kind == "dpt_bandit":
            out = m.predict_query(
                batch["query"],
                batch["obs"],
                batch["action"],
                batch["reward"],
                batch["obs"],
            )
            target = batch["target"]
        else:
            out = m(batch["obs"], batch["action"], batch["reward"])
            target = batch["action"]
        logp = jax.nn.log_softmax(out.action.astype(jnp.float32))
        ce = -jnp.take_along_axis(logp, target[..., None], -1).mean()
        return ce + 0.1 * out.aux["balance_loss"]

    @jax.jit
    def update(params, opt_state, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    state = {"params": params, "opt": opt_state}

    def step():
        state["params"], state["opt"], loss = update(
            state["params"], state["opt"], batch
        )
        return float(jax.block_until_ready(loss))

    return step, model


def torch_matmul_peak(torch, n: int = 2048) -> float:
    """FLOP/s of torch's float32 ``n x n`` matmul (its threads, same run)."""
    a = torch.ones(n, n)
    return 2 * n**3 / _peers.time_call(lambda: a @ a, 5)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="agentrl bench peer_training", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--repeats", type=positive_int, default=2)
    parser.add_argument("--only", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument(
        "--t2mir",
        metavar="PATH",
        help="a T2MIR checkout: also time its real training step (see above)",
    )
    parser.add_argument(
        "--no-reference",
        action="store_true",
        help="skip agentrl's reference (full [T, T]) attention",
    )
    return parser.parse_args(argv)


def _write(bench, torch, args, rows, kind_targets, kinds) -> None:
    """Write the results so far (after every shape: long runs keep their rows)."""
    targets = list(kind_targets)
    by_kind = {r["shape"]: r for r in rows}
    if {"t2mir_dense", "t2mir_moe"} <= by_kind.keys():
        dense = by_kind["t2mir_dense"]["agentrl_s"]
        moe_ratio = by_kind["t2mir_moe"]["agentrl_s"] / dense
        targets.append(
            bench.target(
                "agentrl t2mir MoE step / dense step",
                moe_ratio,
                MOE_TARGET,
                higher_is_better=False,
            )
        )
    for r in rows:
        for attention in ("vanilla", "flash"):
            if f"t2mir_real_{attention}_s" in r:
                targets.append(
                    bench.target(
                        f"{r['shape']}: T2MIR's real step ({attention} attention) "
                        "/ stand-in (reported)",
                        r[f"t2mir_real_{attention}_over_standin"],
                        0.0,
                    )
                )
    notes = (
        f"torch {torch.__version__} ({torch.get_num_threads()} threads) vs JAX, "
        f"float32, best of {args.repeats} after warm-up; the torch side was timed "
        "before and after agentrl's and the faster kept. Synthetic batches. "
        f"{bench.load_note(args.start_load)}; compare the ratios, not the seconds. "
        f"Host malloc: {args.malloc} (agentrl.host_memory; both sides share "
        "the process); agentrl_page_faults = minor page faults per step call. "
        "Roofline: gflop = the step's useful FLOPs (train_throughput.train_flops: "
        "3x the forward's matmuls and causal attention pairs, nothing recomputed "
        "or masked); *_peak_fraction = gflop / step seconds / the same-run 2048^3 "
        f"float32 JAX matmul ({args.peak / 1e9:.0f} GFLOP/s; torch's own: "
        f"{args.torch_peak / 1e9:.0f}); target_needs_peak_fraction = the "
        f"fraction a step {TARGET:g}x faster than torch's would run at."
    )
    done = [r["shape"] for r in rows]
    if len(done) < len(kinds):  # written after every shape: a partial run
        notes += f" Partial run: shapes done so far {done} of {list(kinds)}."
    results = {
        "rows": rows,
        "matmul_peak_flops": args.peak,
        "torch_matmul_peak_flops": args.torch_peak,
        "repeats": args.repeats,
        "complete": len(done) == len(kinds),
        "notes": notes,
    }
    path = bench.write_record("peer_training", results, targets, rows, notes)
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.start_load = os.getloadavg()[0]
    # as the agentrl command does, before JAX starts (when run as a module)
    args.malloc = "tuned" if configure_malloc() else "system"
    torch = _peers.load_torch()
    if torch is None:
        print(
            "peer_training: skipped: torch is not importable (install it "
            "beside agentrl: pip install -c constraints.txt torch PyYAML)"
        )
        return 0
    import common as bench

    # the same-run matmul peaks: what "fast" can mean on this machine today
    args.peak = bench.matmul_peak_flops(2048)
    args.torch_peak = torch_matmul_peak(torch)
    print(
        f"2048^3 float32 matmul: JAX {args.peak / 1e9:.0f} GFLOP/s, torch "
        f"{args.torch_peak / 1e9:.0f} GFLOP/s",
        flush=True,
    )
    rows, targets = [], []
    for kind in args.only:
        model, t = _time_kind(torch, args, kind)
        row = _kind_row(kind, model, t, args)
        rows.append(row)
        print(row, flush=True)
        torch_s, jax_s = t["torch_s"], t["jax_s"]
        targets.append(
            bench.target(f"{kind}: torch / agentrl step time", torch_s / jax_s, TARGET)
        )
        _write(bench, torch, args, rows, targets, args.only)
    return 0


def _time_kind(torch, args, kind: str) -> tuple:
    """``(agentrl's model, seconds)``: the torch stand-in's, agentrl's, its
    reference attention's and T2MIR's own steps of ``kind``, timed."""
    t_step, _ = _peers.build(torch, kind, BATCH[kind])
    torch_s = _peers.time_call(t_step, args.repeats)
    start = time.perf_counter()
    j_step, model = agentrl_step(kind)
    j_step()
    compile_s = time.perf_counter() - start
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    jax_s = _peers.time_call(j_step, args.repeats)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    ref_s = None
    if not args.no_reference:
        r_step, _ = agentrl_step(kind, "reference")
        ref_s = _peers.time_call(r_step, args.repeats)
    real = {}
    if args.t2mir and kind.startswith("t2mir_"):
        for attention in ("vanilla", "flash"):
            r_step = _peers.build_t2mir_real(
                torch, args.t2mir, kind, BATCH[kind], attention=attention
            )
            real[attention] = _peers.time_call(r_step, args.repeats)
    torch_again = _peers.time_call(t_step, args.repeats)  # load drift check
    torch_s = min(torch_s, torch_again)
    return model, {
        "torch_s": torch_s,
        "jax_s": jax_s,
        "ref_s": ref_s,
        "compile_s": compile_s,
        "faults": faults,
        "real": real,
    }


def _kind_row(kind: str, model, t: dict, args) -> dict:
    """The table row of ``kind`` from its timings ``t`` (:func:`_time_kind`)."""
    torch_s, jax_s, ref_s = t["torch_s"], t["jax_s"], t["ref_s"]
    c = model.config
    row = {
        "shape": kind,
        "batch": BATCH[kind],
        "tokens": c.max_steps * c.tokens_per_step,
        "layers/heads/width": f"{c.num_layers}/{c.num_heads}/{c.d_model}",
        "torch_s": torch_s,
        "agentrl_s": jax_s,
        "agentrl_reference_attention_s": ref_s,
        "torch_over_agentrl": torch_s / jax_s,
        "blockwise_speedup_vs_reference": (ref_s / jax_s) if ref_s else None,
        "agentrl_compile_s": t["compile_s"],
        # per call of the step (host_memory: XLA's temporaries reused)
        "agentrl_page_faults": t["faults"] / (args.repeats + 1),
    }
    # the roofline: the step's useful FLOPs (train_throughput.train_flops:
    # both sides do them) against the same-run JAX matmul peak, and the
    # fraction the 3x target would need
    from train_throughput import train_flops

    flops = train_flops(model, BATCH[kind], c.max_steps)
    row.update(
        gflop=flops / 1e9,
        agentrl_peak_fraction=flops / jax_s / args.peak,
        torch_peak_fraction=flops / torch_s / args.peak,
        target_needs_peak_fraction=flops * TARGET / torch_s / args.peak,
    )
    for attention, sec in t["real"].items():
        row[f"t2mir_real_{attention}_s"] = sec
        row[f"t2mir_real_{attention}_over_standin"] = sec / torch_s
    return row


if __name__ == "__main__":
    main()
