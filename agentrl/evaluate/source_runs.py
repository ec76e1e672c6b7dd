"""The data's source learning online on the held-out tasks: a baseline and a ceiling.

Some learning sources are whole runs, not step-by-step agents (``ppo``,
``sac``: a :class:`~agentrl.sources.registry.Source` with ``histories`` and no
``build``), so the agent driver cannot run them beside the model. Here such
a source runs as it made the data: from scratch on each held-out task, with
the data's settings, for the data's ``num_episodes`` (or the evaluation's,
if more), all tasks in one jit. One run gives two things:

- the method ``<source>``: the run's first ``num_episodes`` returns, the
  learner the model imitated, learning online on the tasks the model is
  tested on, episode for episode;
- ``converged [task]``: the mean return of the run's last tenth of episodes
  (at least one), the level the source reaches on each task. Where the
  family has no oracle (the MuJoCo families), it stands in for the oracle
  in every result (``oracle_return``), so normalized scores read random 0,
  converged source 1, and ``metadata["oracle"]`` names it. It is the
  source's own exploring policy at the end of its run, not a deterministic
  roll-out of its final weights.

Given a folder (``cache``), a run already made there with the same inputs
and code is read instead of recomputed (:mod:`agentrl.evaluate.source_cache`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax
import numpy as np

import agentrl.evaluate.metrics as metrics
from agentrl.evaluate.evaluate import EvalResult
from agentrl.evaluate.source_cache import cached_returns, entry_fields
from agentrl.evaluate.task_parameter import task_parameter_metadata
from agentrl.sources.registry import SOURCES, generate

#: ``fold_in`` datum of the source's key (distinct from the references' salt).
SOURCE_SALT = 2**32 - 2
#: The share of the source's episodes that count as converged.
CONVERGED_SHARE = 0.1


def is_history_source(name: str) -> bool:
    """Whether ``name`` is a learning source that only runs whole (no agent)."""
    spec = SOURCES.get(name, None)
    return bool(spec and spec.learns and spec.build is None and spec.histories)


def source_run(
    env: Any,
    data: Any,
    name: str,
    params: Any,
    key: jax.Array,
    num_episodes: int,
    cache: tuple[Path, str] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(returns [task, episode], converged [task])`` of ``name`` learning
    from scratch on tasks ``params [task, ...]``; the data's settings when
    ``name`` is the data's source (``data``: the run's ``DataConfig``).
    ``cache``: ``(folder, env_key)``, the folder of earlier runs and the
    family's name and arguments as JSON (module docstring)."""
    settings = dict(data.source_args) if name == data.source else {}
    length = max(data.num_episodes, num_episodes)
    run_key = jax.random.fold_in(key, SOURCE_SALT)

    def compute() -> np.ndarray:
        history = generate(name, env, params, run_key, length, **settings)
        return np.asarray(metrics.per_episode_returns(history, length), np.float64)

    if cache is None:
        returns = compute()
    else:
        folder, env_key = cache
        fields = entry_fields(name, settings, length, env, env_key, params, run_key)
        returns = cached_returns(folder, fields, compute)
    last = max(1, round(CONVERGED_SHARE * length))
    return returns[:, :num_episodes], returns[:, -last:].mean(axis=1)


def add_source_runs(
    results: dict[str, EvalResult],
    env: Any,
    data: Any,
    names: list[str],
    params: Any,
    key: jax.Array,
    num_episodes: int,
    cache: tuple[Path, str] | None = None,
) -> None:
    """Add each of ``names`` (history sources) to ``results`` (the methods
    already evaluated on ``params``, whose references they share), in place;
    the data's source's converged return becomes the oracle of a family
    without one (module docstring). ``cache`` as for :func:`source_run`."""
    first = next(iter(results.values()))
    random, oracle = first.random_return, first.oracle_return
    for name in names:
        returns, converged = source_run(
            env, data, name, params, key, num_episodes, cache
        )
        results[name] = EvalResult(
            name=name,
            returns=returns,
            random_return=random,
            oracle_return=oracle,
            normalized=_normalized(returns, random, oracle),
            metadata={
                "env": getattr(env, "name", type(env).__name__),
                "kind": "source_run",
                "num_tasks": int(returns.shape[0]),
                "num_episodes": int(num_episodes),
                "source_episodes": max(data.num_episodes, num_episodes),
                "converged_return": converged.tolist(),
                **task_parameter_metadata(env, params),
            },
        )
        if name == data.source and oracle is None:
            _converged_as_oracle(results, name, converged)


def _normalized(returns, random, oracle) -> np.ndarray | None:
    if random is None or oracle is None:
        return None
    return metrics.normalized_score(returns, np.asarray(random), np.asarray(oracle))


def _converged_as_oracle(results, source: str, converged: np.ndarray) -> None:
    """Every result's ``oracle_return``: the source's converged return."""
    for name, result in list(results.items()):
        results[name] = _with_oracle(result, converged, f"{source} converged")


def _with_oracle(result: EvalResult, oracle: np.ndarray, label: str) -> EvalResult:
    return dataclasses.replace(
        result,
        oracle_return=oracle,
        normalized=_normalized(result.returns, result.random_return, oracle),
        metadata={**result.metadata, "oracle": label},
    )


def share_stand_in_oracle(results: dict[str, EvalResult]) -> dict[str, EvalResult]:
    """``results`` of one seed, where a method evaluated apart on the same
    tasks (the expert-distillation control: no baselines beside it) gets the
    stand-in oracle the others carry (:func:`add_source_runs`), so that its
    normalized score is on the same scale; unchanged otherwise."""
    stand_ins = [r for r in results.values() if "oracle" in r.metadata]
    donor = next((r for r in stand_ins if r.oracle_return is not None), None)
    if donor is None:
        return results
    tasks = donor.metadata.get("task_ids")
    out = {}
    for name, result in results.items():
        lacks = result.oracle_return is None and result.random_return is not None
        if lacks and result.metadata.get("task_ids") == tasks:
            result = _with_oracle(result, donor.oracle_return, donor.metadata["oracle"])
        out[name] = result
    return out
