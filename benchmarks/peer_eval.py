"""Online in-context evaluation vs the peers' evaluation steps, plus the roofline.

Run: ``agentrl bench peer_eval [--steps N] [--repeats N] [--rounds N]`` (the
peer columns need torch beside agentrl, ``pip install -c constraints.txt
torch``; without it they are skipped and said so, and the agentrl-only
figures are still written).

1. T2MIR's Dark Room AD evaluation: 20 tasks (Dark Room 10x10, 100-step
   episodes), a window of 400 transitions. T2MIR recomputes its window at
   every vector step: one no-grad forward over ``[20, 1200]`` s/a/r tokens
   (the stand-in of :mod:`_peers`, T2MIR's shape: 4
   layers, 8 heads, width 64). agentrl runs
   :class:`~agentrl.agents.rolling.ADModelAgent` in the real driver
   (``run_batched_agent``: one jitted scan, KV cache of 400 steps), in both
   the ``sar`` layout (1,200-token cache, equal work) and the ``step``
   layout (400 tokens). Per vector step, after the window has filled.
2. DPT's bandit deployment: 200 bandits (5 arms) x 500 pulls. The
   reference recomputes the growing context every pull: timed at context
   lengths 1, 125, 250, 375, 500 and summed over pulls 1..500 (trapezoid
   plus half of each end: exact for a cost linear in the length);
   agentrl runs the cached DPT agent over all 500 pulls.
3. Roofline: the decode step against the time to read the whole KV cache
   once at the machine's memory bandwidth, measured in the run (a jitted
   sum over a 256 MiB array). Also: whole-cache copies and ``conditional`` s
   per step in the compiled program (:mod:`hlo_tools`), and
   the driver's cost over a bare ``lax.scan`` of ``decode`` with the same
   model and batch: both timed once per round for ``--rounds`` rounds, the
   median per-round ratio with its 95% bootstrap interval (a shared
   machine's load drifts between rounds more than within one).

Targets (issue 21): T2MIR step / agentrl step >= 100 (``sar``), DPT
deployment ratio >= 300, decode step <= 2x the read-the-cache bound, 0
cache copies per step, driver cost over the bare decode scan: the upper
end of its 95% interval <= 5% (``TARGETS``).
"""

from __future__ import annotations

import argparse
import os

import _peers
import common as bench
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from hlo_tools import (
    cache_shapes,
    count_conditionals,
    count_copies,
    count_copies_per_iteration,
)
from peer_training import agentrl_config

from agentrl.cliargs import positive_int

T2MIR_TASKS, WINDOW = 20, 400
DPT_BANDITS, DPT_PULLS, ARMS = 200, 500, 5
#: the driver's "no measurable cost" (issue 21) read as: the upper end of
#: the 95% bootstrap interval of its median per-round cost over the bare
#: decode scan is below 5% (a cost that small is not worth a second code
#: path; a wider interval does not meet it, however small the median)
TARGETS = {
    "t2mir_ad_darkroom": 100.0,
    "dpt_bandit": 300.0,
    "roofline": 2.0,
    "driver_overhead": 0.05,
}


def memory_bandwidth(mib: int = 256, repeats: int = 5) -> float:
    """Bytes per second of a jitted read-once reduction over ``mib`` MiB."""
    x = jnp.ones((mib * 2**18,), jnp.float32)
    f = jax.jit(jnp.sum)
    return x.nbytes / bench.timeit(f, x, repeats=repeats)


def _time(fn, *args, repeats):
    jax.block_until_ready(fn(*args))
    return bench.timeit(fn, *args, repeats=repeats)


def _interleaved(fns: dict, repeats: int) -> dict:
    """Best-of-``repeats`` seconds of each ``name: (fn, args)``, timed in turn.

    Alternating the candidates spreads the shared machine's load over all of
    them, so their ratio means something even when the seconds do not.
    """
    seconds = bench.paired_rounds(fns, repeats)
    return {name: min(times) for name, times in seconds.items()}


def _bare_decode(graphdef, n: int):
    """``bare(weights)``: ``n`` decodes alone in a ``lax.scan`` from an empty
    cache, inputs made up from the step index (jitted)."""

    @jax.jit
    def bare(weights):
        def body(cache, t):
            m = nnx.merge(graphdef, weights)
            obs = jnp.full((T2MIR_TASKS,), t % 100, jnp.int32)
            zero = jnp.zeros((T2MIR_TASKS,), jnp.int32)
            out, cache = m.decode(cache, obs, zero, jnp.zeros((T2MIR_TASKS,)))
            return cache, out.action[:, 0]

        cache = nnx.merge(graphdef, weights).init_cache(T2MIR_TASKS, WINDOW)
        return jax.lax.scan(body, cache, jnp.arange(n))[1]

    return bare


def ad_eval(layout: str, steps: int, rounds: int) -> dict:
    """agentrl's AD evaluation at T2MIR's shape: seconds per vector step.

    The driver (``run_batched_agent`` with the AD agent, environment,
    sampling and recording) and the bare decode scan (``lax.scan`` of
    ``decode`` alone, inputs made up from the step index) run the same
    ``WINDOW + steps`` decodes from an empty cache; the cache buffer is read
    whole at every step, so both cost the same per step from the first.
    They are timed once each per round for ``rounds`` rounds
    (:func:`~common.paired_rounds`); the driver's cost is
    the median of the per-round ratios with a bootstrap interval. Per-step
    seconds are each side's best round.
    """
    import dataclasses

    from agentrl.agents.driver import run_batched_agent
    from agentrl.agents.model_agents import ModelHandle
    from agentrl.agents.rolling import ADModelAgent
    from agentrl.envs import make as make_env

    cfg = dataclasses.replace(agentrl_config("t2mir_dense"), token_layout=layout)
    env = make_env("darkroom", size=10, horizon=100)
    model = _model(cfg)
    graphdef, weights = nnx.split(model)
    keys = jax.random.split(jax.random.key(1), T2MIR_TASKS)
    params = jax.vmap(env.sample_params)(keys)
    key = jax.random.key(0)
    n = WINDOW + steps

    @jax.jit
    def driver(weights, params, key):
        agent = ADModelAgent(ModelHandle(graphdef, weights), env, WINDOW)
        history, _ = run_batched_agent(env, agent, params, key, n)
        return history.action

    bare = _bare_decode(graphdef, n)
    compiled = driver.lower(weights, params, key).compile()
    cache = model.init_cache(T2MIR_TASKS, WINDOW)
    copies = count_copies(compiled.as_text(), cache_shapes(cache))
    conditionals = count_conditionals(compiled.as_text())
    seconds = bench.paired_rounds(
        {"driver": (compiled, (weights, params, key)), "bare": (bare, (weights,))},
        rounds,
    )
    ratios = np.divide(seconds["driver"], seconds["bare"])
    median, low, high = bench.median_ci(ratios)
    cache_bytes = sum(a.nbytes for a in (*cache.keys, *cache.values))
    return {
        "layout": layout,
        "cache_tokens": cache.capacity,
        "steps_timed": n,
        "per_step_s": min(seconds["driver"]) / n,
        "bare_decode_per_step_s": min(seconds["bare"]) / n,
        # the median over rounds of (driver / bare in the round) - 1, with
        # its 95% bootstrap interval
        "driver_overhead": median - 1.0,
        "driver_overhead_ci_low": low - 1.0,
        "driver_overhead_ci_high": high - 1.0,
        "rounds": rounds,
        "driver_verdict": overhead_verdict(low - 1.0, high - 1.0),
        "cache_copies_per_step": copies,
        "conditionals_per_step": conditionals,
        "cache_bytes": cache_bytes,
        "_seconds": seconds,  # per round, into the JSON only
    }


def overhead_verdict(low: float, high: float) -> str:
    """What the overhead's 95% interval ``[low, high]`` says (see ``TARGETS``)."""
    if high <= TARGETS["driver_overhead"]:
        if low <= 0.0:
            return "no measurable cost"
        return f"a cost below {TARGETS['driver_overhead']:.0%}"
    if low > TARGETS["driver_overhead"]:
        return f"a cost above {TARGETS['driver_overhead']:.0%}"
    return "not resolved (interval too wide)"


def _model(cfg):
    from agentrl.models import DecisionModel

    return DecisionModel(cfg, rngs=nnx.Rngs(0))


def dpt_eval(repeats: int, block_size: int) -> dict:
    """agentrl's cached DPT bandit deployment: seconds for 200 x 500 pulls.

    Timed on all tasks at once (``run_batched_agent``) and in blocks of
    ``block_size`` bandits (``run_batched_in_blocks``: the same history,
    a block's KV cache small enough to stay in the CPU's last-level cache).
    """
    from agentrl import envs
    from agentrl.agents.context_set import DPTCachedModelAgent
    from agentrl.agents.driver import run_batched_agent, run_batched_in_blocks
    from agentrl.agents.model_agents import ModelHandle

    env = envs.make("gaussian_bandit", num_arms=ARMS, horizon=DPT_PULLS)
    cfg = agentrl_config("dpt_bandit")
    graphdef, weights = nnx.split(_model(cfg))
    keys = jax.random.split(jax.random.key(1), DPT_BANDITS)
    params = jax.vmap(env.sample_params)(keys)
    key = jax.random.key(0)

    def runner(blocks):
        @jax.jit
        def run(weights, params, key):
            handle = ModelHandle(graphdef, weights)
            agent = DPTCachedModelAgent(handle, env, DPT_PULLS)
            if blocks:
                return run_batched_in_blocks(
                    env, agent, params, key, DPT_PULLS, block_size
                )[0].action
            return run_batched_agent(env, agent, params, key, DPT_PULLS)[0].action

        return run.lower(weights, params, key).compile()

    whole, blocked = runner(False), runner(True)
    cache = nnx.merge(graphdef, weights).init_cache(DPT_BANDITS, DPT_PULLS + 1)
    args = (weights, params, key)
    same = bool(jnp.all(whole(*args) == blocked(*args)))
    block_shapes = cache_shapes(model_cache_block(cache, block_size))
    best = _interleaved({"whole": (whole, args), "blocked": (blocked, args)}, repeats)
    return {
        "seconds_whole": best["whole"],
        "seconds_blocked": best["blocked"],
        "block_size": block_size,
        "blocked_history_equal": same,
        "cache_copies_per_step": count_copies(whole.as_text(), cache_shapes(cache)),
        # the pull loop only: each block also materialises its zero cache
        # once, in the loop over blocks
        "cache_copies_per_step_blocked": count_copies_per_iteration(
            blocked.as_text(), block_shapes, next(iter(block_shapes))
        ),
        "cache_bytes": sum(a.nbytes for a in (*cache.keys, *cache.values)),
    }


def model_cache_block(cache, block_size: int):
    """``cache`` with its batch axis cut to ``block_size`` (shapes only)."""
    return cache._replace(
        keys=tuple(k[:block_size] for k in cache.keys),
        values=tuple(v[:block_size] for v in cache.values),
    )


def torch_t2mir_step(torch, repeats: int) -> float:
    """Seconds of one no-grad forward over ``[20, 1200]`` tokens (T2MIR's step)."""
    _, model = _peers.build(torch, "t2mir_dense", 1)
    model.eval()
    x = torch.zeros(T2MIR_TASKS, 3 * WINDOW, model.embed.in_features)

    def step():
        with torch.no_grad():
            return model(x)[0][:, -3]

    return _peers.time_call(step, repeats)


def torch_dpt_deployment(torch, repeats: int) -> dict:
    """Seconds of the reference's 500 pulls, integrated from timed lengths."""
    _, model = _peers.build(torch, "dpt_bandit", 1)
    model.eval()
    lengths = [1, 125, 250, 375, DPT_PULLS]
    times = []
    for n in lengths:
        x = torch.randn(DPT_BANDITS, n, model.embed.in_features)

        def step(x=x):
            with torch.no_grad():
                return model(x)[0][:, -1]

        times.append(_peers.time_call(step, repeats))
    return {
        "lengths": lengths,
        "forward_s": times,
        "seconds": sum_over_pulls(lengths, times),
    }


def sum_over_pulls(lengths: list[int], times: list[float]) -> float:
    """``sum(t(n) for n in lengths[0]..lengths[-1])`` from ``t`` timed at
    ``lengths``: the trapezoid integral plus half of each end (exact when
    ``t`` is linear between the timed lengths)."""
    return float(np.trapezoid(times, lengths)) + (times[0] + times[-1]) / 2


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="agentrl bench peer_eval", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--steps", type=positive_int, default=200)
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=15,
        help="driver / bare decode scan rounds (the driver's cost)",
    )
    parser.add_argument(
        "--dpt-block", type=positive_int, default=10, help="bandits per block"
    )
    return parser.parse_args(argv)


def _ad_targets(r: dict, layout: str, torch) -> list[dict]:
    """The targets of AD's row ``r`` at ``layout``."""
    targets = []
    if torch and layout == "sar":
        targets.append(
            bench.target(
                "T2MIR eval step / agentrl (sar)",
                r["torch_over_agentrl"],
                TARGETS["t2mir_ad_darkroom"],
            )
        )
    targets.append(
        bench.target(
            f"decode step / read-cache bound ({layout})",
            r["decode_over_bound"],
            TARGETS["roofline"],
            higher_is_better=False,
        )
    )
    targets.append(
        bench.target(
            f"driver cost over the bare decode scan ({layout}): "
            f"95% upper bound (median {r['driver_overhead']:+.1%}, "
            f"{r['driver_verdict']})",
            r["driver_overhead_ci_high"],
            TARGETS["driver_overhead"],
            higher_is_better=False,
        )
    )
    targets.append(
        bench.target(
            f"whole-cache copies per step ({layout})",
            r["cache_copies_per_step"],
            0,
            higher_is_better=False,
        )
    )
    targets.append(
        bench.target(
            f"conditionals in the decode loop ({layout})",
            r["conditionals_per_step"],
            0,
            higher_is_better=False,
        )
    )
    return targets


def _dpt_row(
    d: dict, blocked: bool, dpt_block: int, bandwidth: float, dpt_torch
) -> dict:
    """The table row of DPT's deployment ``d``, whole or in blocks."""
    seconds = d["seconds_blocked"] if blocked else d["seconds_whole"]
    copies = d["cache_copies_per_step_blocked" if blocked else "cache_copies_per_step"]
    cache_bytes = d["cache_bytes"] / (DPT_BANDITS / dpt_block if blocked else 1)
    row = {
        "peer": "DPT bandit deployment (200 x 500 pulls)"
        + (f", blocks of {dpt_block} bandits" if blocked else ""),
        "layout": "transition",
        "per_step_s": seconds / DPT_PULLS,
        "seconds_total": seconds,
        "cache_copies_per_step": copies,
        "cache_bytes": cache_bytes,
        # one read of the (whole) cache per pull, per block when blocked
        "read_cache_bound_s": DPT_PULLS * d["cache_bytes"] / bandwidth,
        "torch_seconds_total": dpt_torch["seconds"] if dpt_torch else None,
        "torch_over_agentrl": (dpt_torch["seconds"] / seconds) if dpt_torch else None,
    }
    if blocked:
        row["blocked_history_equal"] = d["blocked_history_equal"]
    return row


def _dpt_targets(row: dict, blocked: bool, dpt_torch) -> list[dict]:
    targets = [
        bench.target(
            "whole-cache copies per pull (DPT" + (", blocked)" if blocked else ")"),
            row["cache_copies_per_step"],
            0,
            higher_is_better=False,
        )
    ]
    if dpt_torch:
        targets.append(
            bench.target(
                "DPT deployment / agentrl" + (" (blocked)" if blocked else ""),
                row["torch_over_agentrl"],
                TARGETS["dpt_bandit"],
            )
        )
    return targets


def _notes(args: argparse.Namespace, torch, bandwidth: float) -> str:
    return (
        f"Memory bandwidth measured in the run: {bandwidth / 1e9:.1f} GB/s. "
        + (f"torch {torch.__version__}, 2 threads; " if torch else "no torch; ")
        + f"best of {args.repeats}, candidates timed in turn; agentrl AD "
        f"per-step time = a run of {WINDOW}+{args.steps} steps / its steps "
        "(the cache buffer is read whole from the first step), the best of "
        f"{args.rounds} rounds; the bare decode scan runs the same decodes "
        "without agent or environment, timed beside the driver in each round "
        "(order reversed every round); driver_overhead = median over rounds "
        "of driver/bare - 1, ci_low/ci_high its 95% percentile-bootstrap "
        "interval (10,000 resamples, seed 0; the per-round seconds are in the "
        "JSON). DPT blocked: "
        f"{args.dpt_block} bandits at a time, each block's 500 pulls before "
        "the next (same history, checked); its read-cache bound is still the "
        "whole batch's cache from memory per pull. "
        "Random-init models (weights do not change the speed). Shared 2-core "
        f"machine: load average at the end {os.getloadavg()[0]:.1f}; compare "
        "ratios, not seconds."
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch = _peers.load_torch()
    if torch is None:
        print(
            "peer_eval: torch is not importable: peer columns skipped (install "
            "it beside agentrl: pip install -c constraints.txt torch)"
        )
    bandwidth = memory_bandwidth()
    print(f"memory bandwidth {bandwidth / 1e9:.1f} GB/s", flush=True)
    rows, targets, driver_rounds = [], [], {}
    t2mir_torch = torch_t2mir_step(torch, args.repeats) if torch else None
    for layout in ("sar", "step"):
        r = ad_eval(layout, args.steps, args.rounds)
        driver_rounds[layout] = r.pop("_seconds")
        bound = r["cache_bytes"] / bandwidth
        r.update(
            peer="T2MIR AD Dark Room (20 tasks, window 400)",
            torch_per_step_s=t2mir_torch,
            torch_over_agentrl=(t2mir_torch / r["per_step_s"]) if torch else None,
            read_cache_bound_s=bound,
            decode_over_bound=r["bare_decode_per_step_s"] / bound,
        )
        rows.append(r)
        print(r, flush=True)
        targets += _ad_targets(r, layout, torch)
    d = dpt_eval(args.repeats, args.dpt_block)
    dpt_torch = torch_dpt_deployment(torch, args.repeats) if torch else None
    for blocked in (False, True):
        row = _dpt_row(d, blocked, args.dpt_block, bandwidth, dpt_torch)
        rows.append(row)
        print(row, flush=True)
        targets += _dpt_targets(row, blocked, dpt_torch)
    notes = _notes(args, torch, bandwidth)
    results = {
        "bandwidth_bytes_per_s": bandwidth,
        "rows": rows,
        "dpt_torch": dpt_torch,
        "driver_rounds_s": driver_rounds,
        "notes": notes,
    }
    path = bench.write_record("peer_eval", results, targets, rows, notes)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    main()
