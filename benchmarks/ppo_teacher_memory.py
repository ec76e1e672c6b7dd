"""How much XLand AD's PPO teacher improves within a history, with and without memory.

``experiments/xland_ad.py`` distils PPO learning histories; its ``smoke``
and ``cpu`` presets write them with the PPO source's memoryless MLP core,
``gpu`` and ``full`` with the GRU core (``core="gru"``, XLand-100B's
collector's shape). This script runs both teachers, and the GRU with the
collector's cell encoder (``obs_encoder="cells"``), on the same XLand
R1-9x9 single-goal rulesets (the ``cpu`` preset's ruleset table and
horizon, the first ``--rulesets`` ids of it), each for the same number of
steps (``--episodes`` times the horizon; an episode that reaches the goal
ends early, so a history holds at least that many episodes), with the
source's default PPO settings, and reports per teacher the mean return of
each history's first ``--window`` whole episodes and of its last
``--window``, their difference (the rise), each a mean over rulesets with a
95% bootstrap CI over rulesets, and the paired difference of the two
GRU teachers' rises and the MLP's on the same rulesets (:func:`agentrl.evaluate.metrics.
paired_ci`). Also the wall time of each teacher's run (compilation
included) and the machine's load.

    agentrl bench ppo_teacher_memory
    agentrl bench ppo_teacher_memory --rulesets 16 --episodes 40 --width 256

No target: this answers a question (does the GRU teacher's history rise
more than the memoryless one's?), whatever the answer.
"""

from __future__ import annotations

import argparse
import os
import time

import common as bench
import jax
import jax.numpy as jnp
import numpy as np

from agentrl.cliargs import positive_int
from agentrl.data.learning import record_episode_returns
from agentrl.envs import make as make_env
from agentrl.evaluate.metrics import bootstrap_ci, paired_ci
from agentrl.sources.ppo import generate_ppo
from agentrl.train.experiments import load_experiment


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="agentrl bench ppo_teacher_memory", description=__doc__.splitlines()[0]
    )
    p.add_argument("--rulesets", type=positive_int, default=16)
    p.add_argument("--episodes", type=positive_int, default=40)
    p.add_argument("--width", type=positive_int, default=256, help="GRU units")
    p.add_argument("--window", type=positive_int, default=5, help="episodes")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def ends(history, window: int) -> dict[str, np.ndarray]:
    """Per history ``[task]``: its whole episodes' count, the mean return of
    its first ``window`` and last ``window`` of them, the rise between."""
    out = {"episodes": [], "first": [], "last": []}
    for t in range(history.reward.shape[0]):
        record = {
            name: np.asarray(getattr(history, name)[t])
            for name in ("episode", "reward", "terminated", "truncated")
        }
        returns = record_episode_returns(record)
        out["episodes"].append(returns.size)
        out["first"].append(returns[:window].mean())
        out["last"].append(returns[-window:].mean())
    out = {k: np.asarray(v, np.float64) for k, v in out.items()}
    out["rise"] = out["last"] - out["first"]
    return out


def summary(values: np.ndarray) -> dict:
    low, high = bootstrap_ci(values)
    return {"mean": float(values.mean()), "ci": [low, high]}


def run_teacher(env, params, key, episodes: int, settings: dict):
    start = time.perf_counter()
    history = generate_ppo(env, params, key, episodes, **settings)
    jax.block_until_ready(history.reward)
    return history, time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    load = os.getloadavg()[0]
    config = load_experiment("xland_ad", "cpu")
    env = make_env(config.data.env, **dict(config.data.env_args))
    ids = jnp.arange(args.rulesets)
    params = jax.vmap(env.params_for_task)(ids)
    key = jax.random.key(args.seed)
    gru = {"core": "gru", "core_hidden": args.width}
    teachers = {
        "mlp": {},  # the source's default core (two 64-unit tanh layers)
        "gru": gru,  # xland_ad's gpu / full teacher
        "gru_cells": {**gru, "obs_encoder": "cells"},  # the collector's encoder
    }
    per, results, rows = {}, {}, []
    for i, (name, settings) in enumerate(teachers.items()):
        # the same key for both teachers: the same env resets where the
        # two runs draw alike (they consume keys differently after)
        k = key if i == 0 else jax.random.clone(key)
        history, seconds = run_teacher(env, params, k, args.episodes, settings)
        per[name] = ends(history, args.window)
        results[name] = {
            "settings": settings,
            "seconds": seconds,
            "episodes_per_history": summary(per[name]["episodes"]),
            **{part: summary(per[name][part]) for part in ("first", "last", "rise")},
            "per_ruleset": {k: v.tolist() for k, v in per[name].items()},
        }
        r = results[name]
        rows.append(
            {
                "teacher": name,
                f"first {args.window} [95% CI]": _fmt(r["first"]),
                f"last {args.window} [95% CI]": _fmt(r["last"]),
                "rise [95% CI]": _fmt(r["rise"]),
                "episodes": f"{r['episodes_per_history']['mean']:.1f}",
                "seconds": f"{seconds:.0f}",
            }
        )
    paired = paired_ci(per["gru"]["rise"] - per["mlp"]["rise"])
    results["rise_gru_minus_mlp"] = paired
    cells = paired_ci(per["gru_cells"]["rise"] - per["mlp"]["rise"])
    results["rise_gru_cells_minus_mlp"] = cells
    results["setup"] = {
        "env": config.data.env,
        "env_args": dict(config.data.env_args),
        "horizon": env.horizon,
        "ruleset_ids": ids.tolist(),
        "episodes": args.episodes,
        "steps_per_history": args.episodes * env.horizon,
        "window": args.window,
        "seed": args.seed,
    }
    notes = (
        f"XLand R1-9x9 single-goal rulesets 0-{args.rulesets - 1} of the cpu "
        f"preset's table, horizon {env.horizon}, {args.episodes * env.horizon} "
        f"steps per history, the PPO source's default settings; rise = last "
        f"{args.window} whole episodes' mean return minus the first "
        f"{args.window}'s, mean over rulesets [95% bootstrap CI over "
        f"rulesets]. GRU rise minus MLP rise, paired by ruleset: "
        f"{paired['mean']:.3f} [{paired['ci'][0]:.3f}, {paired['ci'][1]:.3f}] "
        f"over {paired['tasks']} rulesets; GRU with the cell encoder's rise "
        f"minus MLP's: {cells['mean']:.3f} [{cells['ci'][0]:.3f}, "
        f"{cells['ci'][1]:.3f}]. {bench.load_note(load)}."
    )
    bench.write_record("ppo_teacher_memory", results, [], rows, notes)
    print(bench.markdown_table(rows))
    print(notes)


def _fmt(s: dict) -> str:
    return f"{s['mean']:.3f} [{s['ci'][0]:.3f}, {s['ci'][1]:.3f}]"


if __name__ == "__main__":
    main()
