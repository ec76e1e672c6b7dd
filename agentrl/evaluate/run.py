"""Evaluate a training run directory: the model and baselines on held-out tasks.

Opens the run with :func:`agentrl.train.rundir.load_run` (config, task
split, the latest checkpoint's parameters); the model acts by its
algorithm's rule (``config.algo.make_agent``: AD's rolling cache, DPT's
context set, DT's target return), so every algorithm is evaluated the same
way. Held-out tasks are
the split's test (or validation) ids for finite task spaces (Dark Room
goals), or fresh tasks from an evaluation-only key for continuous ones
(bandit means; validation and test keys differ). Baselines run
on the same tasks and keys: random and oracle always; UCB and Thompson
sampling on bandits; the source algorithm that made the training data
(e.g. Q-learning, run online for the same number of episodes, with the
settings and exploration schedule it had in the data).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax

import agentrl.train.learned  # noqa: F401 (registers the learned_learner source)
from agentrl.cliargs import check_output_path
from agentrl.envs.registry import make as make_env
from agentrl.evaluate.agents import BASELINES, make_baseline
from agentrl.evaluate.controls import (
    check_control,
    control_policy,
    controls_for,
    icl_verdict,
)
from agentrl.evaluate.evaluate import evaluate_methods
from agentrl.evaluate.report import write_results
from agentrl.sources.registry import SOURCES, applicable_sources, make_agent
from agentrl.tables import write_json
from agentrl.train.rundir import load_config, load_run


def default_baselines(env: Any, source: str | None) -> list[str]:
    """random + oracle, UCB1, UCB1.0 (DPT's) and Thompson on bandits, the source."""
    names = ["random"]
    if getattr(env, "has_oracle", False):
        names.append("oracle")
    applicable = applicable_sources(env)
    for extra in ("ucb", "ucb_dpt", "thompson", source):
        if extra and extra in applicable and extra not in names:
            if not SOURCES[extra].baseline:  # e.g. a random roll-in, PPO
                continue
            names.append(extra)
    return names


def baseline_agent(
    name: str, env: Any, num_episodes: int, settings: dict | None = None
) -> Any:
    """A baseline by name; a source gets ``num_episodes`` and ``settings``."""
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
    tasks: str = "test",
    control: str | None = None,
    step: int | None = None,
) -> dict[str, Path]:
    """Evaluate the run's model and baselines; write results.json, .md, plots.

    Unset arguments come from the run's ``EvalConfig``. ``tasks``:
    ``"test"`` (the reported number) or ``"validation"`` (for protocol
    choices). ``control`` evaluates the model under an in-context-learning
    control (:data:`agentrl.evaluate.controls.CONTEXT_CONTROLS`) beside the
    model itself and writes ``verdict.json``: the paired difference against
    that control (:func:`~agentrl.evaluate.controls.icl_verdict`; with one
    control, ``learns_in_context`` stays false: the others are missing).
    ``step`` picks a checkpoint (default the latest). Returns the paths written (see
    :func:`agentrl.evaluate.write_results`).
    """
    check_arguments(num_episodes, num_tasks, seed, baselines)
    check_output_path(out_dir, "out_dir")
    if control is not None:
        check_control(control)
    results, title = run_results(
        run_dir, num_episodes, num_tasks, seed, baselines, greedy, tasks, control, step
    )
    out = Path(out_dir or Path(run_dir) / "eval")
    paths = write_results(results, out, title=title, env=_env_of(results))
    if control is not None:
        label = next(iter(results))
        verdict = icl_verdict(
            [results[label]],
            {control: [results[f"{label}/{control}"]]},
            applicable=controls_for(load_config(run_dir)),
        )
        paths["verdict"] = out / "verdict.json"
        write_json(paths["verdict"], verdict, indent=1)
    return paths


def _env_of(results: dict[str, Any]) -> Any:
    meta = next(iter(results.values())).metadata
    name, args = meta.get("env_name"), meta.get("env_args")
    return None if name is None else make_env(name, **(args or {}))


def check_arguments(
    num_episodes: int | None,
    num_tasks: int | None,
    seed: int | None,
    baselines: list[str] | None = None,
) -> None:
    """``ValueError`` naming the argument unless each is unset or allowed."""
    for name, value, low in (
        ("num_episodes", num_episodes, 1),
        ("num_tasks", num_tasks, 1),
        ("seed", seed, 0),
    ):
        ok = value is None or (
            isinstance(value, int) and not isinstance(value, bool) and value >= low
        )
        if not ok:
            raise ValueError(f"`{name}` must be an integer >= {low}, got {value!r}")
    if baselines is not None and (
        isinstance(baselines, str) or not all(isinstance(b, str) for b in baselines)
    ):
        raise ValueError(f"`baselines` must be a list of names, got {baselines!r}")


def run_results(
    run_dir: str | Path,
    num_episodes: int | None = None,
    num_tasks: int | None = None,
    seed: int | None = None,
    baselines: list[str] | None = None,
    greedy: bool | None = None,
    tasks: str = "test",
    control: str | list[str] | None = None,
    step: int | None = None,
    eval_overrides: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], str]:
    """``({method: EvalResult}, title)`` of a run (see :func:`evaluate_run`).

    ``eval_overrides`` replaces fields of the run's ``EvalConfig`` for the
    model's acting rule (e.g. ``{"acting": "greedy"}``, ``{"temperature":
    0.5}``); ``control`` is one context control or a list of them, each
    evaluated beside the model and keyed ``"<label>/<control>"``.
    """
    check_arguments(num_episodes, num_tasks, seed, baselines)
    run = load_run(run_dir, step)
    config, env = run.config, run.env
    ev = config.eval
    num_episodes = ev.num_episodes if num_episodes is None else num_episodes
    seed = ev.seed if seed is None else seed
    overrides = dict(eval_overrides or {})
    if greedy:  # --greedy overrides the run's rule
        overrides["acting"] = "greedy"
    try:
        acting_eval = dataclasses.replace(ev, **overrides)
    except TypeError as err:
        raise ValueError(f"eval_overrides: not an eval field ({err})") from None
    acting = dataclasses.replace(config, eval=acting_eval)
    params, ids = run.held_out(
        ev.num_tasks if num_tasks is None else num_tasks, seed, tasks
    )
    if num_tasks is not None and ids is not None and len(ids) < num_tasks:
        # an explicit count is a promise about the reported number: say so
        raise ValueError(
            f"num_tasks (--tasks) {num_tasks}: the run's {tasks} split has only "
            f"{len(ids)} tasks; ask for at most {len(ids)}"
        )
    names = (
        baselines
        if baselines is not None
        else default_baselines(env, config.data.source)
    )
    label = config.algo.label
    methods: dict[str, Any] = {label: run.policy(acting)}
    controls = [control] if isinstance(control, str) else list(control or ())
    if controls:
        for c in controls:
            methods[f"{label}/{c}"] = control_policy(methods[label], c)
    methods.update(baseline_methods(config, env, names, num_episodes))
    results = evaluate_methods(env, methods, params, jax.random.key(seed), num_episodes)
    for name in results:
        results[name].metadata.update(
            tasks=tasks,
            task_ids=ids,
            env_name=config.data.env,
            env_args=dict(config.data.env_args),
        )
    for name in [label, *(f"{label}/{c}" for c in controls)]:
        results[name].metadata.update(
            run_dir=str(run.run_dir),
            step=run.step,
            acting=acting_eval.acting,
            temperature=acting_eval.temperature,
            control=name.split("/", 1)[1] if "/" in name else None,
        )
    title = f"{config.name} ({label}): {config.data.env} {tasks} tasks"
    if controls:
        title += f", controls {', '.join(controls)}"
    return results, title
