"""Online DPT bandit evaluation: KV-cache decoding vs recomputing the context.

Run: ``agentrl bench dpt_eval_throughput [--recompute-steps N]``

200 held-out 5-arm Gaussian bandits x H=500 pulls (the DPT paper's online
protocol) with the ``cpu`` preset's model of ``experiments/dpt_bandit.py``
(random init, which does not change the speed), in the same driver and jit:

- cached: :class:`agentrl.agents.context_set.DPTCachedModelAgent`, what
  ``agentrl eval`` uses on bandits: the query once, then one
  ``decode_transition`` per pull;
- recompute: :class:`agentrl.agents.context_set.DPTModelAgent` with
  ``context_update="step"``: ``predict_query`` over the whole 500-slot
  context buffer at every pull (what evaluation did before the cache).

The recompute agent's step costs the same at every pull (a fixed
``[tasks, 501]`` forward), so it is timed on the first ``--recompute-steps``
pulls (default 50) and extrapolated to 500. Both runs use the same key; the
fraction of equal actions over the recompute run's pulls checks that they
compute the same thing.
"""

from __future__ import annotations

import os

import common as bench
import jax
import jax.numpy as jnp
from eval_throughput import (
    make_runner,
    measure,
    parse_args,
    preset_model,
)

from agentrl.agents.context_set import DPTCachedModelAgent, DPTModelAgent
from agentrl.agents.model_agents import ModelHandle

NUM_TASKS = 200


def _rows(size: int, horizon: int, rec_steps: int, cached, recompute) -> list:
    """Table rows; ``cached``, ``recompute``: ``(seconds, compile_s, steps/s)``."""
    c_sec, c_compile, cached_sps = cached
    r_sec, r_compile, recompute_sps = recompute
    return [
        {
            "method": "cached (query + decode_transition)",
            "steps_timed": horizon,
            "seconds": c_sec,
            "env_steps_per_s": cached_sps,
            "seconds_for_200x500": c_sec,
            "compile_s": c_compile,
        },
        {
            "method": f"recompute (predict_query over {size} slots)",
            "steps_timed": rec_steps,
            "seconds": r_sec,
            "env_steps_per_s": recompute_sps,
            "seconds_for_200x500": r_sec * horizon / rec_steps,
            "compile_s": r_compile,
        },
    ]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv, "dpt_eval_throughput", __doc__, recompute_steps=50)

    config, env, model, handle, params = preset_model("dpt_bandit", NUM_TASKS)
    size = config.algo.context_size
    key = jax.random.key(0)
    horizon = env.horizon
    rec_steps = min(args.recompute_steps, horizon)

    def cached(w):
        return DPTCachedModelAgent(ModelHandle(handle.graphdef, w), env, size)

    def recompute(w):
        return DPTModelAgent(ModelHandle(handle.graphdef, w), env, size, "step")

    c_compile, c_sec, c_actions = measure(
        make_runner(cached, env, horizon), handle.weights, params, key, args.repeats
    )
    print(f"cached: {horizon} pulls in {c_sec:.2f}s (compile {c_compile:.1f}s)")
    r_compile, r_sec, r_actions = measure(
        make_runner(recompute, env, rec_steps),
        handle.weights,
        params,
        key,
        args.repeats,
    )
    print(f"recompute: {rec_steps} pulls in {r_sec:.2f}s (compile {r_compile:.1f}s)")
    agree = float(jnp.mean(c_actions[:, :rec_steps] == r_actions))

    cached_sps = NUM_TASKS * horizon / c_sec
    recompute_sps = NUM_TASKS * rec_steps / r_sec
    speedup = cached_sps / recompute_sps
    rows = _rows(
        size,
        horizon,
        rec_steps,
        (c_sec, c_compile, cached_sps),
        (r_sec, r_compile, recompute_sps),
    )
    c = model.config
    notes = (
        f"{NUM_TASKS} Gaussian bandits (5 arms, H={horizon}), sampled actions, "
        f"best of {args.repeats} runs after compile. Model: dpt_bandit cpu preset "
        f"shape ({c.num_layers} layers, d_model {c.d_model}, {c.num_heads} heads, "
        f"context {size}), random init. Recompute timed on {rec_steps} pulls and "
        f"extrapolated to {horizon}. Actions of both agents agree on {agree:.2%} "
        f"of those pulls. Load average at the end: {os.getloadavg()[0]:.1f} "
        "(2-core machine)."
    )
    results = {
        "num_tasks": NUM_TASKS,
        "horizon": horizon,
        "context_size": size,
        "cached": rows[0],
        "recompute": {**rows[1], "extrapolated": rec_steps < horizon},
        "speedup": speedup,
        "action_agreement": agree,
        "notes": notes,
    }
    # No target in the issue for DPT; the AD benchmark's 10x is the reference.
    targets = [bench.target("cached / recompute env steps per second", speedup, 10.0)]
    path = bench.write_record("dpt_eval_throughput", results, targets, rows, notes)
    print(bench.markdown_table(rows))
    print(f"speedup {speedup:.1f}x; wrote {path}")


if __name__ == "__main__":
    main()
