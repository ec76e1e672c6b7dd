"""Tiny runs of every experiment: the overrides and the tests' tiers.

Shared by the tests that train every experiment at tiny cost (the gpu
presets' CPU runs, the key-reuse checker, the bad-input properties): only
the sizes that set the cost change, never the shapes a preset is about
(environment, context, model). CI runs one experiment per algorithm
(``long``); ``make test-heavy`` runs the others (``heavy``).
"""

from __future__ import annotations

import functools

import pytest

from agentrl import envs
from agentrl.train.experiments import load_experiment


def tiny_overrides(config, *, eval_episodes: int = 2) -> dict[str, object]:
    """``{dotted field: value}``: 2 updates on 4 tasks, 2 evaluation tasks."""
    algo = getattr(config.algo, "base", config.algo)
    horizon = envs.make(config.data.env, **dict(config.data.env_args)).horizon
    span = getattr(algo, "context_episodes", 1) * getattr(algo, "episode_stride", 1)
    # DPT: enough steps with a known successor for its context
    context = getattr(algo, "context_size", 0)
    episodes = min(max(span + 1, -(-context // (horizon - 1)) + 1), 200)
    episodes = -(-episodes // 4) * 4  # PPO sources update every 4 episodes
    online = {}
    if hasattr(algo, "num_minibatches"):  # PPO learners: the fewest parallel trials
        online = {"algo.num_envs": algo.num_minibatches}
    elif hasattr(algo, "grad_steps"):  # off-policy (AMAGO): one trial, one step
        online = {"algo.num_envs": 1, "algo.grad_steps": 1, "algo.batch_size": 1}
    return {
        **online,
        "train.steps": 2,
        "train.batch_size": 2,
        "train.log_every": 1,
        "train.checkpoint_every": 2,
        "train.warmup_steps": 1,
        "data.num_tasks": 4,
        "data.num_episodes": min(episodes, config.data.num_episodes),
        "eval.num_tasks": 2,
        "eval.num_episodes": eval_episodes,
    }


def one_per_algorithm(names: list[str]) -> set[str]:
    """The first experiment (by name) of each algorithm among ``names``."""
    first: dict[str, str] = {}
    for name in sorted(names):
        first.setdefault(_algorithm(name), name)
    return set(first.values())


@functools.cache
def _algorithm(name: str) -> str:
    """The algorithm of experiment ``name`` (loaded once per test session:
    every test file that tiers its experiments asks)."""
    return load_experiment(name, "smoke").algo.name


def by_experiment(names: list[str], fast: frozenset[str] = frozenset()) -> list:
    """``names`` as pytest params: those in ``fast`` unmarked (``make test``),
    one experiment per algorithm ``long`` (CI), the rest ``heavy``."""
    ci = one_per_algorithm(names)
    return [
        name
        if name in fast
        else pytest.param(
            name, marks=pytest.mark.long if name in ci else pytest.mark.heavy
        )
        for name in names
    ]
