"""Evaluate a training run directory: the model and baselines on held-out tasks.

Reads what :func:`agentrl.train.fit` wrote: ``config.json`` (the experiment),
``run.json`` (the task split) and the latest checkpoint. Held-out tasks are
the split's test ids for finite task spaces (Dark Room goals), or fresh tasks
from an evaluation-only key for continuous ones (bandit means). Baselines run
on the same tasks and keys: random and oracle always; UCB and Thompson
sampling on bandits; the source algorithm that made the training data
(e.g. Q-learning, run online for the same number of episodes, with the
settings and exploration schedule it had in the data).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

PROTOCOLS = {
    "ad": "ad",
    "ad_eps": "ad",
    "t2mir_ad": "ad",
    "dpt": "dpt",
    "t2mir_dpt": "dpt",
}


def held_out_params(env: Any, split: dict | None, num_tasks: int | None, seed: int):
    """``(params [task, ...], ids | None)`` of the held-out tasks."""
    if env.num_tasks is not None and split is not None:
        ids = [int(i) for i in split["test"]][:num_tasks]
        return jax.vmap(env.params_for_task)(jnp.asarray(ids, jnp.int32)), ids
    keys = jax.random.split(
        jax.random.fold_in(jax.random.key(seed), 0xE7A1), num_tasks or 200
    )
    return jax.vmap(env.sample_params)(keys), None


def default_baselines(env: Any, source: str | None) -> list[str]:
    """random + oracle, UCB/Thompson on bandits, and the data's source."""
    from agentrl.sources.registry import applicable_sources

    names = ["random"]
    if getattr(env, "has_oracle", False):
        names.append("oracle")
    applicable = applicable_sources(env)
    for extra in ("ucb", "thompson", source):
        if (
            extra
            and extra in applicable
            and extra not in names
            and extra not in ("dpt", "random", "ppo")
        ):
            names.append(extra)
    return names


def baseline_agent(
    name: str, env: Any, num_episodes: int, settings: dict | None = None
) -> Any:
    """A baseline by name; a source gets ``num_episodes`` and ``settings``."""
    from agentrl.evaluate.agents import BASELINES, make_baseline
    from agentrl.sources.registry import make_agent

    if name in BASELINES:
        return make_baseline(name, env)
    return make_agent(name, env, num_episodes, **(settings or {}))


def baseline_methods(
    config: Any, env: Any, names: list[str], num_episodes: int
) -> dict[str, Any]:
    """``{name: agent}``; the data's source runs as it made the data.

    The source keeps its settings and its schedule over the data's episodes
    (e.g. Q-learning's epsilon decay), so it is the learner the model
    imitated, run online for ``num_episodes`` on the held-out tasks.
    """
    methods = {}
    for name in names:
        if name == config.data.source:
            data = config.data
            settings = dict(data.source_args)
            methods[name] = baseline_agent(name, env, data.num_episodes, settings)
        else:
            methods[name] = baseline_agent(name, env, num_episodes)
    return methods


def evaluate_run(
    run_dir: str | Path,
    num_episodes: int | None = None,
    num_tasks: int | None = None,
    seed: int | None = None,
    out_dir: str | Path | None = None,
    baselines: list[str] | None = None,
    greedy: bool | None = None,
) -> dict[str, Path]:
    """Evaluate the run's model and baselines; write results.json, .md, plots.

    Unset arguments come from the run's ``EvalConfig``. Returns the paths
    written (see :func:`agentrl.evaluate.write_results`).
    """
    from agentrl.evaluate.report import write_results

    results, title = run_results(
        run_dir, num_episodes, num_tasks, seed, baselines, greedy
    )
    return write_results(results, out_dir or Path(run_dir) / "eval", title=title)


def run_results(
    run_dir: str | Path,
    num_episodes: int | None = None,
    num_tasks: int | None = None,
    seed: int | None = None,
    baselines: list[str] | None = None,
    greedy: bool | None = None,
) -> tuple[dict[str, Any], str]:
    """``({method: EvalResult}, title)`` of a run (see :func:`evaluate_run`)."""
    from agentrl.evaluate.evaluate import evaluate_methods
    from agentrl.train.loop import load_model

    run_dir = Path(run_dir)
    model, config = load_model(run_dir)
    if config.algo not in PROTOCOLS:
        raise ValueError(
            f"online evaluation supports algos {sorted(PROTOCOLS)}; {config.algo!r} "
            "(return-conditioned DT) is evaluated by agentrl.evaluate.dt"
        )
    run_info = json.loads((run_dir / "run.json").read_text())
    from agentrl import envs

    env = envs.make(config.data.env, **dict(config.data.env_args))
    ev = config.eval
    num_episodes = num_episodes or ev.num_episodes
    seed = ev.seed if seed is None else seed
    greedy = ev.greedy if greedy is None else greedy
    params, ids = held_out_params(
        env, run_info.get("split"), num_tasks or ev.num_tasks, seed
    )
    names = (
        baselines
        if baselines is not None
        else default_baselines(env, config.data.source)
    )
    methods: dict[str, Any] = {config.algo: model}
    methods.update(baseline_methods(config, env, names, num_episodes))
    protocol = PROTOCOLS[config.algo]
    model_kwargs = {"protocol": protocol, "greedy": greedy}
    if protocol == "ad":
        model_kwargs["cache_steps"] = model.config.max_steps
    else:
        model_kwargs["context_size"] = config.train.context_size
    results = evaluate_methods(
        env,
        methods,
        params,
        jax.random.key(seed),
        num_episodes,
        model_kwargs={config.algo: model_kwargs},
    )
    results[config.algo].metadata.update(run_dir=str(run_dir), task_ids=ids)
    title = f"{config.name} ({config.algo}): {config.data.env} held-out tasks"
    return results, title
