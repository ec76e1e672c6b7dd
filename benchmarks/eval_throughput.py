"""Online AD evaluation throughput: KV-cache decoding vs recomputing the context.

Run: ``agentrl bench eval_throughput [--recompute-steps N]``

100 Dark Room 9x9 tasks (H=20) x 50 episodes = 1,000 steps per task, with
the ``cpu`` preset's model of ``experiments/ad_darkroom.py`` (3 layers, width
64, window ``max_steps`` = 80 steps; random init, which does not change the
speed). Both agents run in the same driver
(:func:`agentrl.agents.driver.run_batched_agent`: one ``lax.scan`` over
steps, all tasks batched, one jit):

- cached: :class:`agentrl.agents.rolling.ADModelAgent`, what
  ``agentrl eval`` uses: one ``decode`` per step against a rolling KV cache
  of ``max_steps`` steps;
- recompute: :class:`RecomputeADAgent` below, which keeps the last
  ``max_steps`` steps and runs the full forward pass over that window at
  every step (the same model and weights), reading the newest position.

The recompute baseline costs the same at every step once compiled (always a
full ``[tasks, max_steps]`` forward), so it is timed on the first
``--recompute-steps`` steps (default 100) and extrapolated to 1,000; the
cached agent runs all 1,000. Environment steps per second = tasks x steps /
seconds. The two are timed in alternating rounds (``--repeats``, default 5:
each round times both, the order reversed every round), so a round's ratio
compares them under the same load; the speedup is the median of the
per-round ratios with a bootstrap 95% CI, met when the whole CI clears the
target. As a check that the baseline computes the same thing, both act
greedily for the first ``max_steps`` steps (where the recompute window still
holds the whole history, so both are exact) and the fraction of equal actions
is recorded. Target (issue 6): cached / recompute >= 10.
"""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Any, NamedTuple

import common as bench
import jax
import jax.numpy as jnp

from agentrl.agents.agent import Step
from agentrl.agents.driver import run_batched_agent
from agentrl.agents.model_agents import ModelHandle, select_action, split_model
from agentrl.agents.rolling import ADModelAgent
from agentrl.cliargs import positive_int
from agentrl.evaluate.targets import with_ci

NUM_TASKS, NUM_EPISODES = 100, 50
TARGET = 10.0


class RecomputeState(NamedTuple):
    """The last ``W`` steps ``[B, W, ...]`` (left-aligned) and the step ``t``."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    t: jax.Array


class RecomputeADAgent:
    """AD without a cache: full forward over the last ``window`` steps per step.

    Step ``t`` is written at position ``min(t, W - 1)`` of the buffers; once
    they are full they shift left by one after each step, so the oldest step
    drops out. Prediction ``p`` of ``model(obs, action, reward)`` sees only
    ``obs_<=p`` and ``action, reward _<p``, so unwritten slots never matter.
    """

    batched = True

    def __init__(self, model: Any, env: Any, window: int, greedy: bool = False):
        self.model = split_model(model)
        self.env, self.window, self.greedy = env, int(window), greedy
        self.space = env.action_space(None)

    def init(self, key: jax.Array, params: Any) -> RecomputeState:
        b, w = key.shape[0], self.window
        obs_spec, _ = jax.eval_shape(jax.vmap(self.env.reset), key, params)
        return RecomputeState(
            obs=jnp.zeros((b, w, *obs_spec.shape[1:]), obs_spec.dtype),
            action=jnp.zeros((b, w, *self.space.shape), self.space.dtype),
            reward=jnp.zeros((b, w), jnp.float32),
            t=jnp.zeros((), jnp.int32),
        )

    def _slot(self, state: RecomputeState) -> jax.Array:
        return jnp.minimum(state.t, self.window - 1)

    def act(self, key, state: RecomputeState, obs, env_state, params) -> jax.Array:
        p = self._slot(state)
        seq = jax.lax.dynamic_update_index_in_dim(state.obs, obs, p, axis=1)
        out = self.model.get()(seq, state.action, state.reward)
        logits = jax.lax.dynamic_index_in_dim(out.action, p, axis=1, keepdims=False)
        return select_action(
            key, logits.astype(jnp.float32), self.space, self.greedy, 1.0
        )

    def update(self, state: RecomputeState, step: Step) -> RecomputeState:
        p = self._slot(state)

        def put(buf, x):
            x = jnp.asarray(x, buf.dtype)
            return jax.lax.dynamic_update_index_in_dim(buf, x, p, axis=1)

        bufs = (
            put(state.obs, step.obs),
            put(state.action, step.action),
            put(state.reward, step.reward),
        )
        full = state.t + 1 >= self.window
        bufs = tuple(jnp.where(full, jnp.roll(b, -1, axis=1), b) for b in bufs)
        return RecomputeState(*bufs, state.t + 1)


def make_runner(agent_fn, env, num_steps: int):
    """Jitted ``(weights, params, key) -> history`` for a batched agent."""

    @jax.jit
    def run(weights, params, key):
        agent = agent_fn(weights)
        history, _ = run_batched_agent(env, agent, params, key, num_steps)
        return history.action, history.reward

    return run


def paired_speedup(runs: dict, steps: dict, rounds: int):
    """``(compile_s, outputs, seconds, (median, low, high))`` of the cached
    agent's speed over the recompute baseline.

    ``runs``: ``{"cached": (jitted run, args), "recompute": (...)}``, timed in
    alternating rounds (:func:`common.compile_and_pair`), so each round's
    ratio compares the two under the same load; ``steps``: the steps per
    task each run makes. The speedup is the per-round ratio of env steps per
    second, its median and bootstrap 95% CI (:func:`common.median_ci`).
    """
    compile_s, outputs, seconds = bench.compile_and_pair(runs, rounds)
    ratios = [
        (steps["cached"] / c) / (steps["recompute"] / r)
        for c, r in zip(seconds["cached"], seconds["recompute"], strict=True)
    ]
    return compile_s, outputs, seconds, bench.median_ci(ratios)


def speedup_target(speedup: tuple[float, float, float]) -> dict:
    """The target row: met when the speedup's whole CI clears ``TARGET``."""
    return with_ci("cached / recompute env steps per second", *speedup, TARGET)


def preset_model(experiment: str, num_tasks: int):
    """``(config, env, model, handle, params [num_tasks, ...])`` of a ``cpu`` preset.

    The model is randomly initialised (weights do not change the speed).
    """
    from agentrl.envs import make as make_env
    from agentrl.train.experiments import load_experiment
    from agentrl.train.loop import build_model

    config = load_experiment(experiment, "cpu")
    env = make_env(config.data.env, **dict(config.data.env_args))
    model = build_model(config, env)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(1), num_tasks))
    return config, env, model, split_model(model), params


def parse_args(
    argv: list[str] | None, name: str, doc: str, recompute_steps: int
) -> argparse.Namespace:
    """Options of this benchmark and of ``dpt_eval_throughput`` (``name``)."""
    parser = argparse.ArgumentParser(
        prog=f"agentrl bench {name}", description=doc.splitlines()[0]
    )
    parser.add_argument("--recompute-steps", type=positive_int, default=recompute_steps)
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=5,
        help="timed rounds, the two agents alternating in each (default 5)",
    )
    return parser.parse_args(argv)


def speed_rows(methods: dict, steps: dict, num_tasks: int, total: int, timing) -> list:
    """Table rows, one per ``{key: label}`` of ``methods``, from ``timing``
    ``(compile_s, seconds per round)`` of :func:`paired_speedup`: the median
    round's seconds for ``steps[key]`` steps of ``num_tasks`` tasks, env
    steps per second, those seconds scaled to ``total`` steps, compile time."""
    compile_s, seconds = timing
    rows = []
    for key, label in methods.items():
        sec = statistics.median(seconds[key])
        rows.append(
            {
                "method": label,
                "steps_timed": steps[key],
                "seconds": sec,
                "env_steps_per_s": num_tasks * steps[key] / sec,
                f"seconds_for_{total}_steps": sec * total / steps[key],
                "compile_s": compile_s[key],
            }
        )
    return rows


def timing_notes(rounds: int, rec_steps: int, total: int, forward: str) -> str:
    """What both evaluation benchmarks timed and how (their notes' middle)."""
    return (
        f"Sampled actions; {rounds} timed rounds after compile and a warm-up, "
        "the two agents alternating in each (order reversed every round); "
        "seconds are the median round's, the speedup the median of the "
        "per-round ratios with a bootstrap 95% CI (met when the whole CI "
        "clears the target). "
        + (
            f"The recompute baseline was timed on the first {rec_steps} steps "
            f"and extrapolated to {total} (its cost per step is constant: {forward}"
            " at every step)."
            if rec_steps < total
            else "Both ran all steps."
        )
    )


def _notes(env, c, window, total_steps, rec_steps, rounds, agree, load) -> str:
    forward = f"a full [{NUM_TASKS}, {window}] forward"
    return (
        f"{NUM_TASKS} Dark Room 9x9 tasks x {NUM_EPISODES} episodes (H={env.horizon},"
        f" {total_steps} steps per task). Model: ad_darkroom cpu preset shape "
        f"({c.num_layers} layers, d_model {c.d_model}, {c.num_heads} heads, d_ff "
        f"{c.d_ff}, window {window} steps), random init. "
        + timing_notes(rounds, rec_steps, total_steps, forward)
        + f" Greedy actions of both agents agree on {agree:.2%} of the first "
        f"{window} steps (both exact there). {bench.load_note(load)}."
    )


def _results(env, c, window, rows, seconds, speedup, agree, notes) -> dict:
    return {
        "num_tasks": NUM_TASKS,
        "num_episodes": NUM_EPISODES,
        "horizon": env.horizon,
        "model": {
            "num_layers": c.num_layers,
            "d_model": c.d_model,
            "num_heads": c.num_heads,
            "d_ff": c.d_ff,
            "max_steps": window,
        },
        "cached": rows[0],
        "recompute": {
            **rows[1],
            "extrapolated": rows[1]["steps_timed"] < rows[0]["steps_timed"],
        },
        "seconds_per_round": seconds,
        "speedup": speedup[0],
        "speedup_ci95": list(speedup[1:]),
        "greedy_action_agreement_first_window": agree,
        "notes": notes,
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv, "eval_throughput", __doc__, recompute_steps=100)
    load = os.getloadavg()[0]

    _, env, model, handle, params = preset_model("ad_darkroom", NUM_TASKS)
    window = model.config.max_steps
    k_check, k_cached, k_recompute = jax.random.split(jax.random.key(0), 3)
    total_steps = NUM_EPISODES * env.horizon

    def cached(greedy):
        return lambda w: ADModelAgent(
            ModelHandle(handle.graphdef, w), env, window, greedy=greedy
        )

    def recompute(greedy):
        return lambda w: RecomputeADAgent(
            ModelHandle(handle.graphdef, w), env, window, greedy=greedy
        )

    # Same computation check: greedy actions over the first window, both
    # agents on one key (a deliberate reuse, so cloned for the key checker).
    check = (handle.weights, params)
    a_cached = make_runner(cached(True), env, window)(
        *check, jax.random.clone(k_check)
    )[0]
    a_recomp = make_runner(recompute(True), env, window)(*check, k_check)[0]
    agree = float(jnp.mean(a_cached == a_recomp))
    print(f"greedy actions equal over the first {window} steps: {agree:.4f}")

    steps = {"cached": total_steps, "recompute": min(args.recompute_steps, total_steps)}
    runs = {
        "cached": (make_runner(cached(False), env, total_steps), (*check, k_cached)),
        "recompute": (
            make_runner(recompute(False), env, steps["recompute"]),
            (*check, k_recompute),
        ),
    }
    compile_s, _, seconds, speedup = paired_speedup(runs, steps, args.repeats)
    methods = {
        "cached": "cached (KV cache, decode)",
        "recompute": f"recompute (full forward over {window} steps)",
    }
    rows = speed_rows(methods, steps, NUM_TASKS, total_steps, (compile_s, seconds))
    c = model.config
    notes = _notes(
        env, c, window, total_steps, steps["recompute"], args.repeats, agree, load
    )
    results = _results(env, c, window, rows, seconds, speedup, agree, notes)
    path = bench.write_record(
        "eval_throughput", results, [speedup_target(speedup)], rows, notes
    )
    print(bench.markdown_table(rows))
    print(
        f"speedup {speedup[0]:.1f}x [{speedup[1]:.1f}, {speedup[2]:.1f}]; wrote {path}"
    )


if __name__ == "__main__":
    main()
