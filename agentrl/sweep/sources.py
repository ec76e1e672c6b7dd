"""Sweeps of source algorithms: many seeds x traced settings in one program.

>>> out = source_sweep("q_learning", env, params, key, num_episodes=100,
...                    num_seeds=64, grid={"learning_rate": [0.1, 0.3, 0.5, 0.8]})
>>> out.returns.shape  # [setting, seed, task, episode]

A source's agent (:func:`agentrl.sources.registry.make_agent`) is a frozen
dataclass whose numeric settings are Python floats baked into the program.
Here the swept settings are instead passed as *traced* data: inside the jit
the agent is rebuilt with ``dataclasses.replace(agent, learning_rate=<tracer>)``
and vmapped over settings and seeds, so ``H`` settings x ``S`` seeds compile
once. A setting is traceable when it is a float field of the agent (for
``q_learning``: ``learning_rate``, ``discount``, ``epsilon_start``,
``epsilon_end``, ``initial_q``; ``explore_fraction`` sets an integer episode
count and is static). Member ``(h, s)`` runs with key
``jax.random.split(key, S)[s]``, so it reproduces
``generate(source, env, params, keys[s], num_episodes, **setting_h)``.
"""

from __future__ import annotations

import dataclasses
import itertools
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import agentrl.train.learned  # noqa: F401 (registers the learned_learner source)
from agentrl.agents.agent import run_agent_on_tasks
from agentrl.checks import is_int
from agentrl.evaluate.evaluate import reference_key, reference_returns
from agentrl.evaluate.metrics import aggregate, normalized_score
from agentrl.sources.registry import check_settings, make_agent


@dataclasses.dataclass
class SourceSweep:
    """Outcome of :func:`source_sweep` (NumPy arrays).

    Attributes:
      settings: the ``H`` settings (dicts of setting name -> value).
      returns: ``[H, S, task, episode]`` per-episode returns.
      normalized: ``[H, S, task, episode]`` (random 0, oracle 1) or ``None``.
      seconds: wall time (compile included).
    """

    source: str
    settings: list[dict[str, float]]
    returns: np.ndarray
    normalized: np.ndarray | None
    seconds: float


def traceable_settings(agent: Any) -> list[str]:
    """Float fields of a dataclass agent: the settings that can be traced."""
    if not dataclasses.is_dataclass(agent):
        return []
    return [
        f.name
        for f in dataclasses.fields(agent)
        if isinstance(getattr(agent, f.name), float)
    ]


def source_settings(
    source: str,
    env: Any,
    num_episodes: int,
    grid: dict[str, Any],
    static: dict[str, Any] | None = None,
) -> tuple[Any, list[dict[str, float]]]:
    """``(agent, settings)``: the agent with ``static`` settings, and the product
    of ``grid``'s values, validated (names and bounds) before any compile."""
    agent = make_agent(source, env, num_episodes, **(static or {}))
    allowed = traceable_settings(agent)
    for name, values in grid.items():
        if name not in allowed:
            raise ValueError(
                f"source {source!r}: setting {name!r} cannot be swept in one "
                f"program; traceable settings: {', '.join(allowed) or 'none'}"
            )
        if not list(values):
            raise ValueError(f"source {source!r}: setting {name!r} has no values")
        for v in values:
            check_settings(source, env, {name: v})
    names = list(grid)
    combos = itertools.product(*[list(grid[n]) for n in names])
    settings = [dict(zip(names, map(float, c), strict=True)) for c in combos]
    return agent, settings


def source_sweep(
    source: str,
    env: Any,
    params: Any,
    key: jax.Array,
    num_episodes: int,
    num_seeds: int,
    grid: dict[str, Any],
    **static: Any,
) -> SourceSweep:
    """Run ``source`` on tasks ``params [task, ...]`` for every setting and seed.

    Args:
      grid: ``{setting: [values]}``; the product gives ``H`` settings.
      num_seeds: ``S``; seed ``s`` uses ``jax.random.split(key, S)[s]``.
      **static: other settings of the source (fixed for the whole sweep).

    Returns:
      :class:`SourceSweep` with ``returns [H, S, task, episode]``.
    """
    import time

    if not is_int(num_seeds, 1):
        raise ValueError(f"num_seeds must be an integer >= 1, got {num_seeds!r}")
    agent, settings = source_settings(source, env, num_episodes, grid, static)
    num_steps = num_episodes * env.horizon
    names = list(settings[0])
    hp = {n: jnp.asarray([s[n] for s in settings], jnp.float32) for n in names}

    start = time.perf_counter()
    keys = jax.random.split(key, num_seeds)
    returns = np.asarray(_run(env, agent, num_steps, num_episodes, params, hp, keys))
    seconds = time.perf_counter() - start
    normalized = None
    if getattr(env, "has_oracle", False):
        random, oracle = reference_returns(env, params, reference_key(key))
        normalized = normalized_score(
            returns.transpose(2, 0, 1, 3), random, oracle
        ).transpose(1, 2, 0, 3)
    return SourceSweep(source, settings, returns, normalized, seconds)


@partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _run(env, agent, num_steps, num_episodes, params, hp, keys) -> jax.Array:
    """``[H, S, task, episode]`` returns; compiled once per (env, agent, sizes)."""

    def one(setting: dict, k: jax.Array) -> jax.Array:
        member = dataclasses.replace(agent, **setting)
        history, _ = run_agent_on_tasks(env, member, params, k, num_steps)
        return history.episode_returns(num_episodes)

    return jax.vmap(jax.vmap(one, (None, 0)), (0, None))(hp, keys)


def curve_rows(sweep: SourceSweep, last: int = 10) -> list[dict[str, Any]]:
    """One row per setting: first/last-episode normalized mean with a 95% CI.

    Scores pool tasks within each seed (``[seed, task]``, bootstrap over tasks
    stratified by seed); raw returns are used when there is no oracle.
    """
    values = sweep.normalized if sweep.normalized is not None else sweep.returns
    rows = []
    for h, setting in enumerate(sweep.settings):
        first = aggregate(values[h, :, :, 0])
        final = aggregate(values[h, :, :, -last:].mean(-1))
        rows.append(
            {
                **setting,
                "seeds": values.shape[1],
                "first_episode": first["mean"],
                f"last_{last}": final["mean"],
                "ci_low": final["mean_ci"][0],
                "ci_high": final["mean_ci"][1],
            }
        )
    return rows
