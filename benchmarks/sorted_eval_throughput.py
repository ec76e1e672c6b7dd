"""T2MIR-AD's sorted-episode evaluation: a prefilled KV cache vs a full pass a step.

Run: ``agentrl bench sorted_eval_throughput [--tasks N] [--episodes E]``

``AD(eval_context="sorted_episodes")`` (:mod:`agentrl.agents.sorted_episodes`)
acts on its best past episodes sorted by return plus the current episode.
T2MIR's reference runs one full forward pass over that context at every
step; agentrl's agent prefills the sorted episodes into a KV cache once an
episode and decodes one token a step, with the same scores. Both agents run
here in the same driver (:func:`agentrl.agents.driver.run_batched_agent`,
one ``lax.scan``, all tasks batched, one jit) on the same weights:

- cached: :class:`~agentrl.agents.sorted_episodes.SortedEpisodesAgent`;
- full pass: :class:`FullPassSortedAgent` below, the same buffers with one
  forward pass over ``[kept episodes] ++ [current episode]`` (zero-padded to
  the window) every step, as T2MIR's ``get_action``.

The shape is the MuJoCo experiments' context: 4 episodes of H=100 (400
steps), on Dark Room 9x9 with ``horizon=100`` (a cheap environment, so the
model's work is what is timed) and the ``ad_darkroom`` cpu model (3 layers,
width 64), randomly initialised. Both act greedily; the fraction of equal
actions over the whole run is recorded (float rounding can flip a near
tie). Environment steps per second = tasks x steps / seconds.
"""

from __future__ import annotations

import argparse
import os

import common as bench
import jax
import jax.numpy as jnp

from agentrl.agents.model_agents import (
    action_scores,
    scores_at,
    split_model,
)
from agentrl.agents.sorted_episodes import SortedEpisodesAgent
from agentrl.cliargs import positive_int

HORIZON, CONTEXT_EPISODES = 100, 4


class FullPassSortedAgent(SortedEpisodesAgent):
    """T2MIR's acting: the same buffers, one full pass over the context a step
    (the cache is never read)."""

    def _prefill(self, state):
        return state.cache

    def _decode(self, state, obs, prev_action, prev_reward):
        b, h = state.obs.shape[:2]
        offset = state.kept * h

        def sequence(kept, current):  # [B, K, H, ...], [B, H, ...] -> [B, L, ...]
            flat = kept.reshape((b, -1) + kept.shape[3:])[:, : self.keep * h]
            seq = jnp.concatenate([flat, jnp.zeros_like(current)], axis=1)
            start = (0, offset) + (0,) * (seq.ndim - 2)
            return jax.lax.dynamic_update_slice(seq, current, start)

        out = self.model.get()(
            sequence(state.kept_obs, state.obs),
            sequence(state.kept_action, state.action),
            sequence(state.kept_reward, state.reward),
            deterministic=True,
        )
        pos = jnp.broadcast_to(offset + state.t, (b,))
        return state._replace(scores=scores_at(action_scores(out, self.space), pos))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="agentrl bench sorted_eval_throughput",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("--tasks", type=positive_int, default=16)
    parser.add_argument("--episodes", type=positive_int, default=8)
    parser.add_argument("--repeats", type=positive_int, default=2)
    args = parser.parse_args(argv)
    load_start = os.getloadavg()[0]
    env, model, params = bench.darkroom_cpu_model(args.tasks, HORIZON, CONTEXT_EPISODES)
    handle = split_model(model)
    num_steps = args.episodes * HORIZON
    makers = {
        name: lambda m, cls=cls: cls(m, env, CONTEXT_EPISODES, greedy=True)
        for name, cls in (
            ("cached", SortedEpisodesAgent),
            ("full pass", FullPassSortedAgent),
        )
    }
    rows, actions = bench.time_agents(
        makers, handle, env, params, num_steps, args.repeats
    )
    speedup = rows[1]["seconds"] / rows[0]["seconds"]
    agree = float(jnp.mean(actions[0] == actions[1]))
    c = model.config
    notes = (
        f"{args.tasks} Dark Room 9x9 tasks (H={HORIZON}) x {args.episodes} "
        f"episodes, context {CONTEXT_EPISODES} episodes ({c.max_steps} steps); "
        f"model {c.num_layers} layers, width {c.d_model}, {c.num_heads} heads, "
        f"random init; best of {args.repeats} runs after compile. Greedy actions "
        f"equal on {agree:.2%} of the steps. {bench.load_note(load_start)}."
    )
    results = {
        "tasks": args.tasks,
        "episodes": args.episodes,
        "horizon": HORIZON,
        "context_steps": c.max_steps,
        "rows": rows,
        "speedup": speedup,
        "greedy_action_agreement": agree,
        "notes": notes,
    }
    targets = [bench.target("greedy actions equal (fraction)", agree, 0.99)]
    path = bench.write_record("sorted_eval_throughput", results, targets, rows, notes)
    print(bench.markdown_table(rows))
    print(
        f"cached / full pass: {speedup:.1f}x; actions equal {agree:.2%}; wrote {path}"
    )


if __name__ == "__main__":
    main()
