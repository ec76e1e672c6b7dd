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
pulls (default 10) and extrapolated to 500. The two are timed in alternating
rounds (``--repeats``, default 5), the speedup the median of the per-round
ratios with a bootstrap 95% CI. Their warm-up calls use the same key; the
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
    paired_speedup,
    parse_args,
    preset_model,
    speed_rows,
    speedup_target,
    timing_notes,
)

from agentrl.agents.context_set import DPTCachedModelAgent, DPTModelAgent
from agentrl.agents.model_agents import ModelHandle

NUM_TASKS = 200


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv, "dpt_eval_throughput", __doc__, recompute_steps=10)
    load = os.getloadavg()[0]

    config, env, model, handle, params = preset_model("dpt_bandit", NUM_TASKS)
    size = config.algo.context_size
    horizon = env.horizon
    steps = {"cached": horizon, "recompute": min(args.recompute_steps, horizon)}

    def cached(w):
        return DPTCachedModelAgent(ModelHandle(handle.graphdef, w), env, size)

    def recompute(w):
        return DPTModelAgent(ModelHandle(handle.graphdef, w), env, size, "step")

    # both warm-up calls on one key (a deliberate reuse, cloned for the key
    # checker): their actions must agree over the recompute run's pulls
    key = jax.random.key(0)
    runs = {
        "cached": (
            make_runner(cached, env, horizon),
            (handle.weights, params, jax.random.clone(key)),
        ),
        "recompute": (
            make_runner(recompute, env, steps["recompute"]),
            (handle.weights, params, key),
        ),
    }
    compile_s, outputs, seconds, speedup = paired_speedup(runs, steps, args.repeats)
    c_actions, r_actions = outputs["cached"][0], outputs["recompute"][0]
    agree = float(jnp.mean(c_actions[:, : steps["recompute"]] == r_actions))

    methods = {
        "cached": "cached (query + decode_transition)",
        "recompute": f"recompute (predict_query over {size} slots)",
    }
    rows = speed_rows(methods, steps, NUM_TASKS, horizon, (compile_s, seconds))
    c = model.config
    forward = f"a [{NUM_TASKS}, {size + 1}] forward"
    notes = (
        f"{NUM_TASKS} Gaussian bandits (5 arms, H={horizon}). Model: dpt_bandit "
        f"cpu preset shape ({c.num_layers} layers, d_model {c.d_model}, "
        f"{c.num_heads} heads, context {size}), random init. "
        + timing_notes(args.repeats, steps["recompute"], horizon, forward)
        + f" Actions of both agents (one key) agree on {agree:.2%} of the "
        f"recompute run's pulls. {bench.load_note(load)}."
    )
    results = {
        "num_tasks": NUM_TASKS,
        "horizon": horizon,
        "context_size": size,
        "cached": rows[0],
        "recompute": {**rows[1], "extrapolated": steps["recompute"] < horizon},
        "seconds_per_round": seconds,
        "speedup": speedup[0],
        "speedup_ci95": list(speedup[1:]),
        "action_agreement": agree,
        "notes": notes,
    }
    # No target in the issue for DPT; the AD benchmark's 10x is the reference.
    path = bench.write_record(
        "dpt_eval_throughput", results, [speedup_target(speedup)], rows, notes
    )
    print(bench.markdown_table(rows))
    median, low, high = speedup
    print(f"speedup {median:.1f}x [{low:.1f}, {high:.1f}]; wrote {path}")


if __name__ == "__main__":
    main()
