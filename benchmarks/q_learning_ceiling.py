"""How fast tabular Q-learning learns Dark Room 9x9 (H=20): the AD source's ceiling.

AD distils its source's learning histories, so on held-out goals it improves
about as fast as the source did, episode for episode. This script measures
the source itself: Q-learning (``agentrl.sources.tabular.QLearning``) on all
81 goals x ``--seeds`` seeds, for the AD ``cpu`` preset's settings and a grid
over exploration length, learning rate, optimistic initial value and
discount. Scores are normalized per goal (random = 0, oracle = 1; the random
return is the mean of a uniform policy's episodes on that goal). Reported per
setting: episode 1 and the means of episodes 11-20, ..., 51-60.

    agentrl bench q_learning_ceiling [--seeds 4]

The issue's AD target (last 10 of 50 episodes >= 0.8) is judged on the
window 41-50; the table says what the source reaches there. No target of the
issue is measured here, so ``targets`` is empty.
"""

from __future__ import annotations

import argparse
import itertools

import common as bench
import jax
import jax.numpy as jnp
import numpy as np

from agentrl.cliargs import positive_int
from agentrl.envs import make as make_env
from agentrl.evaluate.metrics import normalized_score
from agentrl.sources.registry import generate
from agentrl.train.experiments import load_experiment

GRID = {
    "explore_fraction": (0.1, 0.2, 0.3, 0.5),
    "learning_rate": (0.8, 1.0),
    "initial_q": (0.5, 1.0, 2.0, 5.0),
    "discount": (0.9, 0.95),
}


def episode_returns(env, params, source, settings, episodes, seed) -> np.ndarray:
    """``[task, episode]`` returns of ``source`` over ``episodes`` episodes."""
    key = jax.random.key(seed)
    history = generate(source, env, params, key, episodes, **settings)
    return np.asarray(history.episode_returns(episodes))


def score_curve(env, params, random_return, oracle, settings, episodes, seeds):
    """``[episode]`` normalized score, mean over goals and seeds."""
    curves = [
        normalized_score(
            episode_returns(env, params, "q_learning", settings, episodes, s),
            random_return,
            oracle,
        )
        for s in range(seeds)
    ]
    return np.mean(curves, axis=(0, 1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="agentrl bench q_learning_ceiling", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--seeds", type=positive_int, default=4)
    args = parser.parse_args(argv)

    data = load_experiment("ad_darkroom", "cpu").data  # the AD preset's source
    episodes = data.num_episodes
    env = make_env(data.env, **dict(data.env_args))
    params = jax.vmap(env.params_for_task)(jnp.arange(env.num_tasks))
    oracle = np.asarray(jax.vmap(env.optimal_return)(params))
    random_return = episode_returns(env, params, "random", {}, episodes, 0).mean(1)

    grid = itertools.product(*GRID.values())
    preset = dict(data.source_args)
    settings_list = [preset] + [dict(zip(GRID, v, strict=True)) for v in grid]
    rows, results = [], []
    for settings in settings_list:
        curve = score_curve(
            env, params, random_return, oracle, settings, episodes, args.seeds
        )
        windows = {
            f"ep{i + 1}-{i + 10}": float(curve[i : i + 10].mean())
            for i in range(10, episodes, 10)
        }
        results.append({"settings": settings, "score_per_episode": curve.tolist()})
        row = {k: settings.get(k, "default") for k in GRID}
        rows.append({**row, "ep1": float(curve[0]), **windows})
        print(rows[-1], flush=True)
    preset_score = rows[0]["ep41-50"]
    best = max(rows[1:], key=lambda r: r["ep41-50"])
    rows.sort(key=lambda r: -r["ep41-50"])
    notes = (
        f"Q-learning on all 81 Dark Room 9x9 goals (H=20) x {args.seeds} seeds, "
        f"{episodes} episodes, scores normalized per goal (random = 0, oracle = 1). "
        "Rows sorted by the mean score of episodes 41-50, the window of the AD "
        f"target (>= 0.8). The AD preset's source ({preset}, other settings "
        f"default) reaches {preset_score:.2f} there; the best of "
        f"{len(settings_list) - 1} grid settings reaches {best['ep41-50']:.2f}. "
        "One-step Q-learning moves the goal's value back one cell per visit, "
        "so it needs many episodes after first finding a goal."
    )
    bench.write_record("q_learning_ceiling", results, [], rows, notes)
    print(bench.markdown_table(rows[:10]))


if __name__ == "__main__":
    main()
