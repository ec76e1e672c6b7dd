"""PPO against SAC as sources of learning histories with continuous actions.

    agentrl bench continuous_sources [--quick] [--tasks N] [--episodes E]

The continuous-control references collect their AD data with SAC
(docs/references.md, "Continuous-action data"); agentrl's PPO source
already learns Gaussian policies on every task at once. This runs both on
the same Point-Robot tasks (T2MIR's: goals uniform in [-1, 1]^2, starts in
[-0.1, 0.1]^2, 20-step episodes), each task learning from scratch for E
episodes, and reports per source, in the same run:

- the in-history learning curve: mean return of the first and last 10% of
  the episodes, the share of the gap to the oracle closed, and the rank
  correlation of return with episode index (a learning history rises);
- the final-policy DPT labels (``labels="final_policy"``): the mean cosine
  between them and the oracle's action at every recorded state;
- the wall time of one compiled run and transitions/s.

Target (issue 36, item 2): PPO's histories are of the same use as SAC's:
both close at least half the gap from their first episodes to the oracle
and rise over the episodes (rank correlation > 0.5). Writes
``benchmarks/results/continuous_sources.{json,md}`` (``--quick``: fewer
tasks and episodes, into a temporary folder unless ``agentrl bench --out``
names one).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import jax
import numpy as np
from common import load_note, target, write_record

from agentrl import envs
from agentrl.data.learning import rank_correlation
from agentrl.project import RESULTS_ENV
from agentrl.sources.registry import generate

T2MIR_TASKS = {"num_goals": 50, "goals": "uniform", "start_range": 0.1}
SOURCES = {"ppo": {}, "sac": {"hidden": 64, "batch_size": 64}}


def _label_cosine(history, params) -> float:
    labels = np.asarray(history.optimal_action)
    to_goal = np.asarray(params.goal)[:, None] - np.asarray(history.obs)
    norm = np.linalg.norm(labels, axis=-1) * np.linalg.norm(to_goal, axis=-1)
    return float(np.mean(np.sum(labels * to_goal, -1) / (norm + 1e-9)))


def _run(name, env, params, ids, episodes, best) -> dict:
    settings = {**SOURCES[name], "labels": "final_policy"}

    def go(k):
        return generate(name, env, params, k, episodes, ids, **settings)

    jax.block_until_ready(go(jax.random.key(0)).action)  # compile
    start = time.perf_counter()
    history = jax.block_until_ready(go(jax.random.key(1)))
    seconds = time.perf_counter() - start
    returns = np.asarray(history.episode_returns(episodes))  # [task, episode]
    k = max(1, episodes // 10)
    first, last = float(returns[:, :k].mean()), float(returns[:, -k:].mean())
    curve = returns.mean(0)
    return {
        "source": name,
        "settings": settings,
        "first_return": first,
        "last_return": last,
        "oracle_return": best,
        "gap_closed": (last - first) / (best - first),
        "rank_correlation": rank_correlation(curve),
        "label_cosine": _label_cosine(history, params),
        "seconds": seconds,
        "transitions_per_s": returns.shape[0] * episodes * env.horizon / seconds,
        "curve": [round(float(v), 2) for v in curve[:: max(1, episodes // 10)]],
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tasks", type=int, default=None)
    parser.add_argument("--episodes", type=int, default=None)
    args = parser.parse_args(argv)
    tasks = args.tasks or (4 if args.quick else 8)
    episodes = args.episodes or (20 if args.quick else 100)
    load = os.getloadavg()[0]
    env = envs.make("point_robot", **T2MIR_TASKS)
    ids = np.arange(tasks, dtype=np.int32)
    params = jax.vmap(env.params_for_task)(ids)
    best = float(jax.vmap(env.optimal_return)(params).mean())
    rows = [_run(name, env, params, ids, episodes, best) for name in SOURCES]
    targets = [
        target(
            f"{r['source']}: share of the gap to the oracle closed",
            r["gap_closed"],
            0.5,
        )
        for r in rows
    ] + [
        target(
            f"{r['source']}: rank correlation of return with episode",
            r["rank_correlation"],
            0.5,
        )
        for r in rows
    ]
    table = [
        {
            "source": r["source"],
            "first 10% return": round(r["first_return"], 2),
            "last 10% return": round(r["last_return"], 2),
            "oracle": round(best, 2),
            "gap closed": round(r["gap_closed"], 2),
            "rank corr.": round(r["rank_correlation"], 2),
            "label cos. to oracle": round(r["label_cosine"], 2),
            "s (compiled)": round(r["seconds"], 2),
            "transitions/s": round(r["transitions_per_s"]),
        }
        for r in rows
    ]
    notes = (
        f"{tasks} Point-Robot tasks (T2MIR's goals, ids 0..{tasks - 1}) x "
        f"{episodes} episodes of 20 steps, every task learning from scratch, "
        "both sources in this run. Curves (mean return every tenth episode): "
        + "; ".join(f"{r['source']} {r['curve']}" for r in rows)
        + f". {load_note(load)}."
    )
    out = None
    if args.quick and not os.environ.get(RESULTS_ENV):
        out = tempfile.mkdtemp(prefix="continuous_sources-")
    path = write_record(
        "continuous_sources",
        {"tasks": tasks, "episodes": episodes, "rows": rows},
        targets,
        table,
        notes,
        out_dir=out,
    )
    print(path.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
