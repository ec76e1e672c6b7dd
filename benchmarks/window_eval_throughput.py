"""AD acting: the rolling KV cache vs the reference's window re-encoded every step.

Run: ``agentrl bench window_eval_throughput [--tasks N] [--episodes E] [--shape S]``

``AD(eval_context="rolling")`` (:mod:`agentrl.agents.rolling`) decodes one
token a step on a KV cache over its last ``max_steps`` steps;
``AD(eval_context="window")`` (:mod:`agentrl.agents.window`) re-encodes
those steps from scratch every step, as the AD-ε reference code does. Both
agents run here in the same driver (:func:`agentrl.agents.driver.run_batched_agent`,
one ``lax.scan``, all tasks batched, one jit) on the same random weights of
the ``ad_darkroom`` cpu model, greedily. Shapes (``--shape``):

- ``darkroom``: ``ad_darkroom``'s cpu context on Dark Room 9x9 (H=20);
- ``mujoco``: the MuJoCo experiments' context, 4 episodes of H=100 (on
  Dark Room with ``horizon=100``, a cheap environment, so the model's work
  is what is timed).

Recorded: environment steps per second (tasks x steps / seconds, best of
``--repeats`` after compiling), the ratio, and the fraction of steps where
the two readings act alike: equal until the trial outgrows the window
(``max_steps``), then free to differ (a measure of how far apart the two
readings are on these weights, not of a trained model's return; for that,
``agentrl reproduce ... --set algo.eval_context=window``).
"""

from __future__ import annotations

import argparse
import os

import common as bench
import jax.numpy as jnp

from agentrl.agents.model_agents import split_model
from agentrl.agents.rolling import ADModelAgent
from agentrl.agents.window import WindowModelAgent
from agentrl.cliargs import positive_int

#: shape name -> (horizon, context episodes); None: the preset's own
SHAPES = {"darkroom": (None, None), "mujoco": (100, 4)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="agentrl bench window_eval_throughput",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("--shape", choices=sorted(SHAPES), default="darkroom")
    parser.add_argument("--tasks", type=positive_int, default=16)
    parser.add_argument("--episodes", type=positive_int, default=20)
    parser.add_argument("--repeats", type=positive_int, default=2)
    args = parser.parse_args(argv)
    load_start = os.getloadavg()[0]
    env, model, params = bench.darkroom_cpu_model(args.tasks, *SHAPES[args.shape])
    handle = split_model(model)
    num_steps = args.episodes * env.horizon
    window = model.config.max_steps
    makers = {
        name: lambda m, cls=cls: cls(m, env, window, greedy=True)
        for name, cls in (("rolling", ADModelAgent), ("window", WindowModelAgent))
    }
    rows, actions = bench.time_agents(
        makers, handle, env, params, num_steps, args.repeats
    )
    c = model.config
    same = actions[0] == actions[1]  # [tasks, steps]
    filling = float(jnp.mean(same[:, : c.max_steps]))
    sliding = (
        float(jnp.mean(same[:, c.max_steps :])) if num_steps > c.max_steps else None
    )
    slowdown = rows[1]["seconds"] / rows[0]["seconds"]
    notes = (
        f"{args.tasks} Dark Room 9x9 tasks (H={env.horizon}) x {args.episodes} "
        f"episodes, window {c.max_steps} steps; model {c.num_layers} layers, "
        f"width {c.d_model}, {c.num_heads} heads, random init; best of "
        f"{args.repeats} runs after compile. Greedy actions equal on "
        f"{filling:.2%} of the steps while the window fills"
        + ("" if sliding is None else f", {sliding:.2%} after it slides")
        + f". {bench.load_note(load_start)}."
    )
    results = {
        "shape": args.shape,
        "tasks": args.tasks,
        "episodes": args.episodes,
        "horizon": env.horizon,
        "window_steps": c.max_steps,
        "rows": rows,
        "window_over_rolling_seconds": slowdown,
        "greedy_agreement_filling": filling,
        "greedy_agreement_sliding": sliding,
        "notes": notes,
    }
    targets = [bench.target("greedy actions equal while filling", filling, 0.99)]
    name = f"window_eval_throughput_{args.shape}"
    path = bench.write_record(name, results, targets, rows, notes)
    print(bench.markdown_table(rows))
    print(f"window / rolling time: {slowdown:.1f}x; wrote {path}")


if __name__ == "__main__":
    main()
