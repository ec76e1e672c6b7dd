"""A trained online learner as a data source: its in-context behaviour as histories.

``--data.source learned_learner --data.source_args run_dir=runs/rl2_darkroom-cpu``
(or ``agentrl data generate ... --source learned_learner --source-arg
run_dir=...``): the run's policy (RL², transformer PPO: any algorithm trained online)
acts with **frozen weights** on each task for the
dataset's ``num_episodes`` episodes as ONE trial (its memory, the GRU's
hidden state or the transformer's context, is kept across all of them), by
the algorithm's own acting rule (``algo.make_agent``, as ``agentrl eval``
acts the run). What it does (observations, actions, rewards, episode
boundaries) is written as a learning history in the standard dataset
format, so AD can distill the learned learner (Laskin et al.'s "learning
histories" from a meta-learned learner rather than a single-task RL
algorithm).

Settings: ``run_dir`` (required), ``step`` (checkpoint; default the latest),
``acting`` (``"sample"``, the default: sample the policy as in training,
at ``temperature``; or ``"greedy"``). Everything is checked before
anything compiles (:func:`check_learned`): the directory is a run of an
online learner, its checkpoint exists, and its environment is the
dataset's (same family and constructor arguments). On a finite task
space each chunk's task ids must be among the learner's own training
tasks (so the dataset's held-out tasks, the ones AD is evaluated on, were
held out from the learner too): generate
with the run's ``data.split_fraction`` and ``data.seed``.

As a source it is also evaluation's baseline for a model distilled from its
data (:func:`learned_agent`): ``agentrl eval`` of an AD run trained on
``learned_learner`` histories shows the learner it imitated beside it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Any

import jax
import numpy as np

import agentrl.envs.registry as registry
from agentrl.agents.driver import run_batched_agent
from agentrl.agents.model_agents import split_model
from agentrl.checks import is_int
from agentrl.envs.registry import make as make_env
from agentrl.history import History
from agentrl.sources.registry import register_source
from agentrl.train.checkpoint import Checkpointer
from agentrl.train.rundir import load_config, load_run


def _run_env(run_dir: Path) -> tuple[str, dict[str, Any]]:
    info = json.loads((run_dir / "run.json").read_text())
    return info["env"], dict(info.get("env_args") or {})


def _same_env(env: Any, name: str, args: dict[str, Any]) -> str | None:
    """``None`` if ``env`` is the family ``name`` built with ``args``, else why not."""
    other = make_env(name, **args)
    if type(other) is not type(env):
        return f"the run's environment is {name} ({type(other).__name__})"
    try:
        fields = list(registry.overrides_of(name))
    except ValueError:  # gymnax: one task, compare what shapes the data
        fields = []
    fields = [f for f in fields if hasattr(env, f)] + ["horizon"]
    diff = [
        f"{f}={getattr(other, f)!r} (here {getattr(env, f)!r})"
        for f in dict.fromkeys(fields)
        if getattr(other, f, None) != getattr(env, f, None)
    ]
    if diff:
        return f"the run's {name} has {', '.join(diff)}"
    return None


def check_learned(env: Any, settings: dict[str, Any]) -> str | None:
    """Why ``settings`` cannot make histories on ``env`` (``None``: they can).

    Reads only JSON files and the checkpoint directory's listing: nothing is
    restored or compiled.
    """

    text = settings["run_dir"]
    if not isinstance(text, str) or not text.strip():
        return (
            "`run_dir` is required: the run directory of a trained online "
            "learner (e.g. run_dir=runs/rl2_darkroom-cpu)"
        )
    run_dir = Path(text)
    if not run_dir.is_dir():
        return f"run_dir {text!r} does not exist (or is not a directory)"
    for name in ("config.json", "run.json"):
        if not (run_dir / name).is_file():
            return f"run_dir {text!r} has no {name}: not a training run directory"
    try:
        config = load_config(run_dir)
        env_name, env_args = _run_env(run_dir)
    except (ValueError, KeyError, TypeError) as err:
        return f"run_dir {text!r}: {err}"
    if not config.algo.by_training(from_data=False, online=True):
        return (
            f"run_dir {text!r} is a run of {config.algo.label}, which learns "
            "from data; a learned learner is an online learner "
            "(trained by RL: rl2, transformer_ppo)"
        )
    try:
        problem = _same_env(env, env_name, env_args)
    except ValueError as err:
        problem = f"its environment cannot be rebuilt: {err}"
    if problem is not None:
        return f"run_dir {text!r} does not match this environment: {problem}"
    ckpt_dir = run_dir / "checkpoints"
    steps = []
    if ckpt_dir.is_dir():
        ckpt = Checkpointer(ckpt_dir, config.train.checkpoint_every, create=False)
        try:
            steps = sorted(ckpt.all_steps())
        finally:
            ckpt.close()
    if not steps:
        return f"run_dir {text!r} has no checkpoint (was it trained?)"
    step = settings["step"]
    if step is not None and step not in steps:
        return f"`step` {step} is not a checkpoint of {text!r}; it has {steps}"
    return None


@functools.lru_cache(maxsize=4)
def _load(run_dir: str, step: int | None, acting: str, temperature: float):
    """``(run, config)``: the run, its config acting by ``acting``/``temperature``."""

    run = load_run(run_dir, step)
    config = dataclasses.replace(
        run.config,
        eval=dataclasses.replace(
            run.config.eval, acting=acting, temperature=float(temperature)
        ),
    )
    return run, config


def learned_agent(
    env: Any,
    num_episodes: int,
    *,
    run_dir: str,
    step: int | None,
    acting: str,
    temperature: float,
) -> Any:
    """The learner as a (batched) agent: evaluation's baseline for a model
    distilled from its histories (the learner it imitated, run online)."""
    run, config = _load(str(run_dir), step, str(acting), float(temperature))
    return config.algo.make_agent(run.model, env, num_episodes * env.horizon, config)


@functools.lru_cache(maxsize=4)
def _rollout(
    run_dir: str, step: int | None, acting: str, temperature: float, env: Any, n: int
):
    """``(train ids | None, go(params, key) -> History)`` of the run's policy.

    Cached so the chunks of one dataset reuse one compiled program; the
    weights are a traced argument (not constants baked into it).
    """

    run, config = _load(run_dir, step, acting, temperature)
    handle = split_model(run.model)
    if handle.weights is None:  # a plain pytree of weights (RL²'s GRU)
        weights, rebuild = run.model, lambda w: w
    else:  # an NNX module (the transformer)
        weights, rebuild = handle.weights, lambda w: handle._replace(weights=w)

    @jax.jit
    def go(weights, params, key):
        agent = config.algo.make_agent(rebuild(weights), env, n, config)
        history, _ = run_batched_agent(env, agent, params, key, n)
        return history

    train_ids = None
    if getattr(env, "num_tasks", None):
        data = config.data
        train_ids = np.asarray(env.task_split(data.split_fraction, data.seed).train)
    return train_ids, functools.partial(go, weights)


def learned_histories(
    env: Any,
    params: Any,
    key: jax.Array,
    num_episodes: int,
    task_id: jax.Array,
    *,
    run_dir: str,
    step: int | None,
    acting: str,
    temperature: float,
) -> History:
    """The learner's histories on tasks ``params [task, ...]``: one trial each.

    Returns:
      :class:`History` with leaves ``[task, num_episodes * env.horizon, ...]``.
    """
    train_ids, go = _rollout(
        str(run_dir),
        step,
        str(acting),
        float(temperature),
        env,
        num_episodes * env.horizon,
    )
    if train_ids is not None:
        outside = sorted(set(np.asarray(task_id).tolist()) - set(train_ids.tolist()))
        if outside:
            raise ValueError(
                f"source 'learned_learner': tasks {outside[:8]} were held out "
                f"from the learner in {run_dir} (not among its training tasks): "
                "generate the dataset with the run's data.split_fraction and "
                "data.seed, so the dataset's held-out tasks are the learner's"
            )
    return go(params, key).replace(task_id=task_id)


def _learned_histories(env, params, key, num_episodes, task_id, **settings):
    return learned_histories(env, params, key, num_episodes, task_id, **settings)


def _learned_agent(env, num_episodes, **settings):
    return learned_agent(env, num_episodes, **settings)


def _check_learned(env, settings) -> str | None:
    step = settings["step"]
    if step is not None and not is_int(step):
        return f"`step` must be a checkpoint step (an integer) or None, got {step!r}"
    return check_learned(env, settings)


register_source(
    "learned_learner",
    description="a trained online learner (rl2, transformer_ppo run_dir=...) "
    "acting in context with frozen weights, one trial per history",
    defaults={"run_dir": "", "step": None, "acting": "sample", "temperature": 1.0},
    bounds={"step": (0, float("inf")), "temperature": (1e-6, float("inf"))},
    build=_learned_agent,
    histories=_learned_histories,
    check=_check_learned,
    choices={"acting": ("sample", "greedy")},
    baseline=True,
    learns=True,
    text=("run_dir",),
)
