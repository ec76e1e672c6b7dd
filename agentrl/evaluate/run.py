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
settings and exploration schedule it had in the data). A source that runs
only whole (PPO, SAC) learns from scratch on the same tasks
(:mod:`agentrl.evaluate.source_runs`); on a family without an oracle its
converged return is the oracle of the normalized scores.
"""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import warnings
from pathlib import Path
from typing import Any

import jax

import agentrl.evaluate.programs as programs
import agentrl.train.learned  # noqa: F401 (registers the learned_learner source)
from agentrl.agents.agent import is_batched
from agentrl.checks import is_int
from agentrl.cliargs import check_output_path
from agentrl.envs.base import env_horizon
from agentrl.envs.registry import make as make_env
from agentrl.evaluate.agents import BASELINES, make_baseline
from agentrl.evaluate.controls import (
    check_control,
    control_policy,
    controls_for,
    icl_verdict,
)
from agentrl.evaluate.evaluate import evaluate_methods
from agentrl.evaluate.lanes import lane
from agentrl.evaluate.report import write_results
from agentrl.evaluate.shift import describe, shifted_env, shifted_tasks
from agentrl.evaluate.source_runs import add_source_runs, is_history_source
from agentrl.plugins import import_run_plugins
from agentrl.safeio import LOCK_FILE, pid_alive
from agentrl.sources.registry import SOURCES, applicable_sources, make_agent
from agentrl.tables import write_json
from agentrl.train.rundir import eval_task_count, load_config, load_run


def default_baselines(env: Any, source: str | None) -> list[str]:
    """random + oracle, UCB1, UCB1.0 (DPT's) and Thompson on bandits, the source."""
    names = ["random"]
    if getattr(env, "has_oracle", False):
        names.append("oracle")
    applicable = applicable_sources(env)
    for extra in ("ucb", "ucb_dpt", "thompson", source):
        if extra and extra in applicable and extra not in names:
            if SOURCES[extra].baseline or is_history_source(extra):
                names.append(extra)  # not e.g. a random roll-in
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
    env_args: dict[str, Any] | None = None,
    progress: bool = False,
    source_cache: str | Path | None = None,
) -> dict[str, Path]:
    """Evaluate the run's model and baselines; write results.json, .md, plots.

    Unset arguments come from the run's ``EvalConfig``. ``tasks``:
    ``"test"`` (the reported number), ``"validation"`` (for protocol
    choices) or ``"train"`` (the training tasks: memorisation).
    ``control`` evaluates the model under an in-context-learning control
    (:data:`agentrl.evaluate.controls.CONTEXT_CONTROLS`) beside the model
    itself and writes ``verdict.json``: the paired difference against
    that control (:func:`~agentrl.evaluate.controls.icl_verdict`; with one
    control, ``learns_in_context`` stays false: the others are missing).
    ``step`` picks a checkpoint (default the latest; one short of the run's
    ``train.steps`` is evaluated with a warning, :class:`UnfinishedRunWarning`,
    and every result file says so). ``env_args`` evaluates under shift: the
    family built with these constructor arguments changed
    (:mod:`agentrl.evaluate.shift`). ``progress``: a bar on stderr.
    ``source_cache``: a folder where the whole-run source baselines (SAC,
    PPO) made with the same inputs and code are read instead of rerun, and
    new ones stored (:mod:`agentrl.evaluate.source_cache`). Returns the
    paths written (see :func:`agentrl.evaluate.write_results`).
    """
    check_arguments(num_episodes, num_tasks, seed, baselines)
    check_baselines(baselines, run_dir)
    check_output_path(out_dir, "out_dir")
    check_output_path(source_cache, "source_cache")
    if control is not None:
        check_control(control)
    results, title = run_results(
        run_dir,
        num_episodes,
        num_tasks,
        seed,
        baselines,
        greedy,
        tasks,
        control,
        step,
        env_args=env_args,
        progress=progress,
        source_cache=source_cache,
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
        ok = value is None or is_int(value, low)
        if not ok:
            raise ValueError(f"`{name}` must be an integer >= {low}, got {value!r}")
    if baselines is not None and (
        isinstance(baselines, str) or not all(isinstance(b, str) for b in baselines)
    ):
        raise ValueError(f"`baselines` must be a list of names, got {baselines!r}")


def baseline_names() -> list[str]:
    """The names ``baselines`` may hold: the registered baselines (random,
    oracle ...) and the sources that act as an agent or run whole."""
    sources = [
        name
        for name, spec in SOURCES.items()
        if spec.build is not None or is_history_source(name)
    ]
    return list(dict.fromkeys([*BASELINES.names(), *sources]))


def check_baselines(baselines: list[str] | None, run_dir: Any = None) -> None:
    """``ValueError`` naming ``--baselines`` and the allowed names for a name
    that is none of :func:`baseline_names`, before the run is loaded. A name
    still unknown first gets the plug-ins ``run_dir`` records imported (a
    source the run's data came from)."""
    if baselines is None:
        return
    unknown = [b for b in baselines if b not in baseline_names()]
    if unknown and run_dir is not None:
        import_run_plugins(run_dir)
        unknown = [b for b in baselines if b not in baseline_names()]
    if unknown:
        raise ValueError(
            f"baselines (--baselines): unknown {', '.join(map(repr, unknown))}; "
            f"choose from {', '.join(baseline_names())} (comma-separated; a "
            "source applies only to its task families)"
        )


class UnfinishedRunWarning(UserWarning):
    """The checkpoint evaluated is not the run's last training step."""


def checkpoint_status(run: Any) -> dict[str, Any]:
    """``{"checkpoint_step", "train_steps", "finished"[, "training_now"]}``.

    ``training_now`` names the process that holds the run directory's lock
    (``fit`` is training into it at this moment), when one does.
    """
    status = {
        "checkpoint_step": int(run.step),
        "train_steps": int(run.config.train.steps),
        "finished": int(run.step) >= int(run.config.train.steps),
    }
    holder = training_process(run.run_dir)
    if holder:
        status["training_now"] = holder
    return status


def training_process(run_dir: str | Path) -> str | None:
    """``"pid P on HOST"`` of a live process training into ``run_dir``, else None.

    Reads the lock ``fit`` holds (:class:`agentrl.safeio.DirectoryLock`)
    without taking it; a lock left by a dead process is no training.
    """
    try:
        fields = (Path(run_dir) / LOCK_FILE).read_text().split()
    except OSError:
        return None
    if len(fields) < 2 or not fields[0].isdigit():
        return None
    here = re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())  # as the lock's
    if fields[1] == here and not pid_alive(int(fields[0])):
        return None
    return f"pid {fields[0]} on {fields[1]}"


def unfinished_note(status: dict[str, Any]) -> str | None:
    """A sentence on an unfinished run's checkpoint, ``None`` for a finished one."""
    if status["finished"]:
        return None
    note = (
        f"evaluating checkpoint step {status['checkpoint_step']} of "
        f"{status['train_steps']}: the run has not finished training"
    )
    if "training_now" in status:
        note += f" (still training: {status['training_now']})"
    return note


def _acting_eval(ev: Any, eval_overrides: dict | None, greedy: bool | None) -> Any:
    """The run's ``EvalConfig`` with the acting-rule overrides applied."""
    overrides = dict(eval_overrides or {})
    if greedy:  # --greedy overrides the run's rule
        overrides["acting"] = "greedy"
    try:
        return dataclasses.replace(ev, **overrides)
    except TypeError as err:
        raise ValueError(f"eval_overrides: not an eval field ({err})") from None


def _held_out(run, env, shift, num_tasks, seed, tasks):
    """``(params, ids)`` of the held-out tasks (under shift: ``shifted_tasks``);
    ``num_tasks`` unset: the run's ``eval.num_tasks``, or for validation
    tasks its ``eval.validation_tasks`` when set. Validation tasks asked for
    by count (either way) beyond the split's are fresh draws where the
    family has them (:func:`~agentrl.train.rundir.held_out_params`)."""
    count, draw = eval_task_count(run.config.eval, tasks, num_tasks)
    if shift:
        params, ids = shifted_tasks(run, env, count, seed, tasks)
    else:
        params, ids = run.held_out(count, seed, tasks, draw=draw)
    # a continuous family's tasks have no ids: count its params
    found = len(ids) if ids is not None else len(jax.tree.leaves(params)[0])
    if num_tasks is not None and found < num_tasks:
        # an explicit count is a promise about the reported number: say so
        raise ValueError(
            f"num_tasks (--tasks) {num_tasks}: the run's {tasks} split has only "
            f"{found} tasks; ask for at most {found}"
        )
    return params, ids


def model_methods(
    run: Any,
    acting: Any,
    env: Any,
    env_key: str,
    num_steps: int,
    controls: list[str],
) -> dict[str, Any]:
    """``{label: model, "label/control": model under it}``, one program for all.

    Every rule and control is a lane of the model's kept program
    (:func:`agentrl.evaluate.programs.lane_runner`); an algorithm whose
    agent cannot be a lane gets one program per rule and control.
    """
    label = acting.algo.label
    runner = programs.lane_runner(acting, env, env_key, run.model, num_steps)
    rule = acting.eval.acting
    if runner is None:
        policy = run.policy(acting, env)
        methods = {label: policy}
        methods.update({f"{label}/{c}": control_policy(policy, c) for c in controls})
        return methods

    def prepared(control: str | None) -> programs.Prepared:
        which = lane(rule, control)
        return programs.Prepared(lambda p, k: runner(p, k, which), "model")

    methods = {label: prepared(None)}
    methods.update({f"{label}/{c}": prepared(c) for c in controls})
    return methods


def prepared_baselines(
    config: Any, env: Any, env_key: str, names: list[str], num_episodes: int
) -> dict[str, programs.Prepared]:
    """:func:`baseline_methods`, each on its kept program."""
    steps = num_episodes * env_horizon(env)
    out = {}
    for name, agent in baseline_methods(config, env, names, num_episodes).items():
        settings = (
            [config.data.num_episodes, list(config.data.source_args)]
            if name == config.data.source
            else num_episodes
        )
        key = json.dumps(
            [env_key, name, type(agent).__qualname__, settings], default=str
        )
        batched = is_batched(agent)
        run = programs.baseline_runner(key, env, agent, steps, batched)
        out[name] = programs.Prepared(run, "batched_agent" if batched else "agent")
    return out


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
    env_args: dict[str, Any] | None = None,
    progress: bool = False,
    run: Any = None,
    source_cache: str | Path | None = None,
) -> tuple[dict[str, Any], str]:
    """``({method: EvalResult}, title)`` of a run (see :func:`evaluate_run`).

    ``eval_overrides`` replaces fields of the run's ``EvalConfig`` for the
    model's acting rule (e.g. ``{"acting": "greedy"}``, ``{"temperature":
    0.5}``); ``control`` is one context control or a list of them, each
    evaluated beside the model and keyed ``"<label>/<control>"``. ``run``:
    the run already opened (:func:`~agentrl.train.rundir.load_run` of
    ``run_dir`` at ``step``), to open it once for several evaluations.
    ``source_cache`` as for :func:`evaluate_run`.
    """
    check_arguments(num_episodes, num_tasks, seed, baselines)
    check_baselines(baselines, run_dir)
    run = run if run is not None else load_run(run_dir, step)
    config = run.config
    shift = dict(env_args or {})
    trained_args = dict(config.data.env_args)
    env = shifted_env(config.data.env, trained_args, shift) if shift else run.env
    note = unfinished_note(checkpoint_status(run))
    if note:
        warnings.warn(f"{run.run_dir}: {note}", UnfinishedRunWarning, stacklevel=2)
    num_episodes = config.eval.num_episodes if num_episodes is None else num_episodes
    seed = config.eval.seed if seed is None else seed
    acting = dataclasses.replace(
        config, eval=_acting_eval(config.eval, eval_overrides, greedy)
    )
    params, ids = _held_out(run, env, shift, num_tasks, seed, tasks)
    names = (
        baselines
        if baselines is not None
        else default_baselines(env, config.data.source)
    )
    used_args = {**trained_args, **shift}
    env_key = json.dumps([config.data.env, used_args], sort_keys=True, default=str)
    controls = [control] if isinstance(control, str) else list(control or ())
    steps = num_episodes * env_horizon(env)
    methods = model_methods(run, acting, env, env_key, steps, controls)
    whole_runs = [n for n in names if is_history_source(n)]
    agents = [n for n in names if n not in whole_runs]
    methods.update(prepared_baselines(config, env, env_key, agents, num_episodes))
    key = jax.random.key(seed)
    results = evaluate_methods(
        env, methods, params, key, num_episodes, env_key=env_key, progress=progress
    )
    cache = None if source_cache is None else (Path(source_cache), env_key)
    add_source_runs(
        results, env, config.data, whole_runs, params, key, num_episodes, cache
    )
    _record(results, run, acting, shift, tasks, ids, used_args, controls)
    return results, _title(acting, tasks, controls, shift, checkpoint_status(run))


def _title(config, tasks, controls, shift, status) -> str:
    """``"name (label): env test tasks[, controls ...][, under shift (...)]"``."""
    title = f"{config.name} ({config.algo.label}): {config.data.env} {tasks} tasks"
    if controls:
        title += f", controls {', '.join(controls)}"
    if shift:
        title += f", under shift ({describe(shift)})"
    if not status["finished"]:
        title += f", checkpoint step {status['checkpoint_step']} (not finished)"
    return title


def _record(results, run, acting, shift, tasks, ids, env_args, controls):
    """Each result's metadata: the tasks, the family (and shift), the
    checkpoint; the model's (and its controls') run, step and acting rule."""
    status = checkpoint_status(run)
    for result in results.values():
        result.metadata.update(
            tasks=tasks,
            task_ids=ids,
            env_name=acting.data.env,
            env_args=dict(env_args),
            checkpoint=dict(status),
        )
        if shift:
            result.metadata["shift"] = dict(shift)
    label = acting.algo.label
    for name in [label, *(f"{label}/{c}" for c in controls)]:
        results[name].metadata.update(
            run_dir=str(run.run_dir),
            step=run.step,
            acting=acting.eval.acting,
            temperature=acting.eval.temperature,
            control=name.split("/", 1)[1] if "/" in name else None,
        )
