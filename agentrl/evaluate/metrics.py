"""Evaluation metrics: episode returns, normalized score, regret, aggregates.

Per-run quantities (JAX, jittable) work on a :class:`~agentrl.sources.History`
or on its arrays:

- :func:`per_episode_returns` ``[task, episode]`` from the done flags, so
  episodes that end early by termination are counted correctly;
- :func:`normalized_score` with random = 0 and oracle = 1, per task;
- :func:`expected_regret` (``max(means) - means[action]`` summed over steps,
  lower variance than the realized regret) and :func:`realized_regret`;
  :func:`regret_from_history` takes the arms' expected rewards from the
  family (``arm_means(params, t)``, the bandit contract of ``docs/usage.md``),
  so a switching bandit's regret follows its switches, and gives ``None``
  (with :func:`regret_note` saying why) for a family that cannot state them.

Aggregates (NumPy, seeded) work on score matrices ``[run, task]`` where a run is
one training seed: :func:`iqm` (the 25%-trimmed interquartile mean of rliable),
:func:`standard_error`, :func:`bootstrap_ci` (stratified bootstrap,
vectorized over resamples) and :func:`bootstrap_curve` for a CI band along an
extra axis (episode index, step).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from agentrl.envs.base import bandit_arm_means, env_horizon, is_bandit

Statistic = Callable[[np.ndarray], np.ndarray]

# ----------------------------------------------------------------- per run


def per_episode_returns(history: Any, num_episodes: int) -> jax.Array:
    """``[task, num_episodes]`` return of each of the first episodes.

    Episodes are delimited by ``history.done`` (terminated or truncated); an
    episode still running when the history ends counts what it collected.
    """
    return history.episode_returns(num_episodes)


def episodes_completed(history: Any) -> jax.Array:
    """``[task]`` number of episodes that ended inside the history."""
    return jnp.sum(history.done, axis=-1).astype(jnp.int32)


def normalized_score(
    returns: Any, random_return: Any, oracle_return: Any, eps: float = 1e-6
) -> Any:
    """``(returns - random) / (oracle - random)`` per task.

    Args:
      returns: ``[task, ...]`` (e.g. ``[task, episode]``).
      random_return: ``[task]`` expected return of a uniform random policy.
      oracle_return: ``[task]`` expected return of an optimal policy.
      eps: tasks with ``|oracle - random| <= eps`` (nothing to learn) give NaN.

    Returns:
      An array like ``returns`` (NumPy in, NumPy out; JAX otherwise).
    """
    xp = np if isinstance(returns, np.ndarray) else jnp
    returns = xp.asarray(returns, dtype=xp.float32)
    extra = (1,) * (returns.ndim - 1)
    lo = xp.asarray(random_return, dtype=xp.float32).reshape(-1, *extra)
    hi = xp.asarray(oracle_return, dtype=xp.float32).reshape(-1, *extra)
    den = hi - lo
    ok = xp.abs(den) > eps
    return xp.where(ok, (returns - lo) / xp.where(ok, den, 1.0), xp.nan)


def expected_regret(action: jax.Array, means: jax.Array) -> jax.Array:
    """Cumulative expected regret ``[task, step]`` of a bandit agent.

    Args:
      action: ``[task, step]`` int arm pulled at each step.
      means: ``[task, arms]`` stationary arm means, or ``[task, step, arms]``
        the arms' expected rewards at every step (a switching bandit).

    Returns:
      ``[task, step]``: ``sum_{s <= t} max(means_s) - means_s[action_s]``.
    """
    action = action.astype(jnp.int32)
    if means.ndim == action.ndim:  # stationary: one row of means per task
        pulled = jnp.take_along_axis(means, action, axis=-1)
        gap = jnp.max(means, axis=-1, keepdims=True) - pulled
    else:
        pulled = jnp.take_along_axis(means, action[..., None], axis=-1)[..., 0]
        gap = jnp.max(means, axis=-1) - pulled
    return jnp.cumsum(gap, axis=-1)


def realized_regret(reward: jax.Array, optimal_mean: jax.Array) -> jax.Array:
    """Cumulative realized regret ``[task, step]``: ``sum optimal_mean - reward``.

    ``reward [task, step]``; ``optimal_mean`` the best arm's mean, ``[task]``
    (stationary) or ``[task, step]`` (at every step).
    """
    if optimal_mean.ndim < reward.ndim:
        optimal_mean = optimal_mean[:, None]
    return jnp.cumsum(optimal_mean - reward, axis=-1)


def time_in_episode(done: jax.Array) -> jax.Array:
    """``[task, step]`` int32: steps since the current episode began (0-based).

    ``done [task, step]`` ends an episode; the next step starts a new one at
    0 (the ``state.time`` an environment had before that step).
    """
    steps = jnp.arange(done.shape[-1], dtype=jnp.int32)
    begins = jnp.concatenate(
        [jnp.ones_like(done[..., :1]), done[..., :-1]], axis=-1
    )  # a step after a done (and the first) begins an episode
    began = jax.lax.cummax(jnp.where(begins, steps, 0), axis=done.ndim - 1)
    return steps - began


def arm_means_at_steps(env: Any, params: Any, done: jax.Array) -> jax.Array | None:
    """``[task, step, arms]`` expected reward of every arm at every step.

    From the family's ``arm_means(params, t)`` (:func:`bandit_arm_means`);
    ``None`` when it states none. ``params`` leaves ``[task, ...]``.
    """
    arm_means = bandit_arm_means(env)
    if arm_means is None:
        return None
    per_step = jax.vmap(arm_means, in_axes=(None, 0))  # over steps of one task
    return jax.vmap(per_step)(params, time_in_episode(done))


def regret_note(env: Any) -> str | None:
    """Why ``env``'s results have no regret (``None`` when they have one)."""
    if env is None or not is_bandit(env):
        return None  # regret is a bandit measure: nothing to explain
    if bandit_arm_means(env) is not None:
        return None
    name = getattr(env, "name", type(env).__name__)
    return (
        f"no regret: bandit {name} does not state its arms' expected rewards "
        "(define arm_means(params, t), the bandit contract in docs/usage.md)"
    )


def regret_from_history(
    history: Any, env: Any = None, expected: bool = True
) -> jax.Array | None:
    """Cumulative regret ``[task, step]`` of a bandit history, else ``None``.

    The arms' expected rewards at every step come from ``env``'s
    ``arm_means(params, t)``; without ``env`` or that method (not a bandit,
    or one that cannot say: :func:`regret_note`) there is no regret.
    :func:`expected_regret` when ``expected`` is set, :func:`realized_regret`
    otherwise.
    """
    if env is None or history.params is None:
        return None
    means = arm_means_at_steps(env, history.params, history.done)
    if means is None:
        return None
    if expected:
        return expected_regret(history.action, means)
    return realized_regret(history.reward, jnp.max(means, axis=-1))


def random_return(env: Any, params: Any) -> jax.Array | None:
    """``[task]`` expected one-episode return of a uniformly random policy.

    Exact for a bandit that states ``arm_means(params, t)``: the mean over
    arms summed over the episode's ``max_steps_in_episode`` steps; ``None``
    for anything else (estimate it by running the policy).
    """
    arm_means = bandit_arm_means(env)
    if arm_means is None:
        return None
    steps = jnp.arange(env_horizon(env), dtype=jnp.int32)

    def one(p):
        per_step = jax.vmap(arm_means, in_axes=(None, 0))(p, steps).mean(-1)
        return jnp.sum(jnp.where(steps < p.max_steps_in_episode, per_step, 0.0))

    return jax.vmap(one)(params)


# -------------------------------------------------------------- aggregates


def iqm(x: Any, axis: int | None = None) -> np.ndarray:
    """Interquartile mean: the mean of the middle 50% (``trim_mean(x, 0.25)``).

    As ``scipy.stats.trim_mean`` (and rliable): ``int(0.25 * n)`` values are
    cut from each end of the sorted sample. ``axis=None`` flattens.
    """
    x = np.asarray(x, dtype=np.float64)
    if axis is None:
        x, axis = x.reshape(-1), 0
    x = np.sort(np.moveaxis(x, axis, -1), axis=-1)
    n = x.shape[-1]
    cut = int(0.25 * n)
    return x[..., cut : n - cut].mean(axis=-1)


def standard_error(x: Any, axis: int | None = None) -> np.ndarray:
    """Standard error of the mean, ``std(ddof=1) / sqrt(n)`` (0 when ``n < 2``)."""
    x = np.asarray(x, dtype=np.float64)
    if axis is None:
        x, axis = x.reshape(-1), 0
    n = x.shape[axis]
    if n < 2:
        return np.zeros(np.delete(x.shape, axis)) if x.ndim > 1 else np.float64(0)
    return x.std(axis=axis, ddof=1) / np.sqrt(n)


STATISTICS: dict[str, Statistic] = {
    "mean": lambda x: np.mean(x, axis=-1),
    "iqm": lambda x: iqm(x, axis=-1),
    "median": lambda x: np.median(x, axis=-1),
}
RESAMPLE_CHOICES = ("tasks", "runs", "both")


def _statistic(statistic: str | Statistic) -> Statistic:
    if callable(statistic):
        return statistic
    if statistic not in STATISTICS:
        raise ValueError(
            f"statistic must be one of {tuple(STATISTICS)} or a callable, "
            f"got {statistic!r}"
        )
    return STATISTICS[statistic]


def _as_runs(scores: Any) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim == 1:
        scores = scores[None]
    if scores.ndim < 2:
        raise ValueError(f"scores must be [run, task, ...], got shape {scores.shape}")
    return scores


def _resample_index(
    rng: np.random.Generator, runs: int, tasks: int, num_samples: int, resample: str
) -> tuple[np.ndarray, np.ndarray]:
    """Index arrays ``(run_idx, task_idx)``, each ``[sample, run, task]``."""
    shape = (num_samples, runs, tasks)
    run_idx = np.broadcast_to(np.arange(runs)[:, None], shape)
    task_idx = np.broadcast_to(np.arange(tasks), shape)
    if resample == "tasks":  # strata = runs (training seeds): resample tasks
        task_idx = rng.integers(0, tasks, shape)
    elif resample == "runs":  # strata = tasks (rliable): resample runs
        run_idx = rng.integers(0, runs, shape)
    elif resample == "both":  # hierarchical: whole runs, then tasks within
        run_idx = np.broadcast_to(rng.integers(0, runs, shape[:2])[..., None], shape)
        task_idx = rng.integers(0, tasks, shape)
    else:
        raise ValueError(
            f"resample must be one of {RESAMPLE_CHOICES}, got {resample!r}"
        )
    return run_idx, task_idx


def bootstrap_curve(
    scores: Any,
    statistic: str | Statistic = "mean",
    num_samples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    resample: str = "tasks",
    max_elements: int = 2**24,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Point estimate and percentile bootstrap CI along trailing axes.

    Args:
      scores: ``[run, task, *x]`` (a 1-D ``[task]`` is read as one run;
        a single run with trailing axes needs its run axis, ``[None]``);
        the statistic pools runs and tasks, separately for every ``x``.
      statistic: ``"mean"``, ``"iqm"``, ``"median"`` or ``f(values [..., n])``
        reducing the last axis.
      num_samples: bootstrap resamples (all drawn in one vectorized call).
      confidence: coverage of the interval.
      seed: NumPy seed; the same resample indices serve every ``x``.
      resample: ``"tasks"`` (default: tasks resampled within each run, i.e.
        stratified by training seed; with one run the ordinary bootstrap over
        tasks), ``"runs"`` (rliable: runs within each task) or ``"both"``.
      max_elements: memory cap on one ``[sample, run, task, chunk]`` block.

    Returns:
      ``(point, low, high)``, each of shape ``x`` (scalars for ``[run, task]``).
    """
    stat = _statistic(statistic)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    scores = _as_runs(scores)
    runs, tasks, extra = scores.shape[0], scores.shape[1], scores.shape[2:]
    flat = scores.reshape(runs, tasks, -1)
    point = stat(np.moveaxis(flat.reshape(runs * tasks, -1), 0, -1))
    rng = np.random.default_rng(seed)
    run_idx, task_idx = _resample_index(rng, runs, tasks, num_samples, resample)
    chunk = max(1, max_elements // (num_samples * runs * tasks))
    stats = []
    for start in range(0, flat.shape[-1], chunk):
        block = flat[run_idx, task_idx, start : start + chunk]  # [B, R, T, c]
        block = np.moveaxis(block.reshape(num_samples, runs * tasks, -1), 1, -1)
        stats.append(stat(block))  # [B, c]
    stats = np.concatenate(stats, axis=-1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha], axis=0)
    return point.reshape(extra), low.reshape(extra), high.reshape(extra)


def bootstrap_ci(
    scores: Any,
    statistic: str | Statistic = "mean",
    num_samples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    resample: str = "tasks",
) -> tuple[float, float]:
    """Stratified percentile bootstrap CI of ``statistic`` over ``[run, task]``.

    See :func:`bootstrap_curve` for the arguments; returns ``(low, high)``.
    """
    scores = _as_runs(scores)
    if scores.ndim != 2:
        raise ValueError(f"scores must be [run, task], got shape {scores.shape}")
    _, low, high = bootstrap_curve(
        scores, statistic, num_samples, confidence, seed, resample
    )
    return float(low), float(high)


#: The fewest paired tasks that can resolve a difference. With n tasks of
#: one sign the sign test's two-sided p is 2 * 0.5**n: above 0.05 up to
#: n = 5, so no test at 5% can tell from fewer than 6 tasks, while a
#: bootstrap CI of n tasks only spans their values ([min, max] for n = 2).
MIN_RESOLVING_TASKS = 6


def is_resolved(paired: dict[str, Any]) -> bool:
    """A recorded :func:`paired_ci`'s ``resolved``, judged again by today's
    rule (records made before :data:`MIN_RESOLVING_TASKS` called a CI above
    0 over 2 tasks resolved)."""
    return bool(paired["resolved"]) and paired["tasks"] >= MIN_RESOLVING_TASKS


def paired_ci(diff: Any, seed: int = 0) -> dict[str, Any]:
    """Mean and 95% bootstrap CI of paired differences ``diff [task]``.

    One value per task (A minus B on the same task, already averaged over
    whatever else both share); undefined (non-finite) tasks are left out.
    Returns ``{"mean", "ci": [low, high], "tasks", "dropped", "resolved"}``,
    ``resolved`` when the CI lies above 0 over at least
    :data:`MIN_RESOLVING_TASKS` tasks. Raises ``ValueError`` if no task is
    defined.
    """
    diff = np.asarray(diff, np.float64).reshape(-1)
    finite = np.isfinite(diff)
    if not finite.any():
        raise ValueError("paired_ci needs at least one finite difference")
    low, high = bootstrap_ci(diff[finite], seed=seed)
    return {
        "mean": float(diff[finite].mean()),
        "ci": [low, high],
        "tasks": int(finite.sum()),
        "dropped": int((~finite).sum()),
        "resolved": bool(low > 0 and finite.sum() >= MIN_RESOLVING_TASKS),
    }


def aggregate(
    scores: Any,
    num_samples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    resample: str = "tasks",
) -> dict[str, Any]:
    """Summary of a ``[run, task]`` score matrix (``[task]`` = one run).

    Non-finite entries (tasks where a normalized score is undefined) are
    dropped from the pooled statistics and counted in ``"dropped"``: the
    whole task column, in every run (so the columns are read as the same
    task in every run; where each run has its own tasks, one run's
    undefined task drops the others' at that position too. No committed
    record has one).

    Returns:
      ``{"mean", "mean_ci", "iqm", "iqm_ci", "se", "runs", "tasks",
      "dropped"}``; ``se`` is the standard error of all run x task values.
    """
    scores = _as_runs(scores)
    finite = np.isfinite(scores)
    keep = finite.all(axis=0)  # drop a task for every run if undefined anywhere
    dropped = int((~keep).sum())
    scores = scores[:, keep]
    out: dict[str, Any] = {
        "runs": int(scores.shape[0]),
        "tasks": int(scores.shape[1]),
        "dropped": dropped,
    }
    if scores.size == 0:
        nan = float("nan")
        return {**out, "mean": nan, "mean_ci": [nan, nan], "iqm": nan,
                "iqm_ci": [nan, nan], "se": nan}  # fmt: skip
    for name in ("mean", "iqm"):
        out[name] = float(STATISTICS[name](scores.reshape(-1)))
        out[f"{name}_ci"] = list(
            bootstrap_ci(scores, name, num_samples, confidence, seed, resample)
        )
    out["se"] = float(standard_error(scores))
    return out


# ------------------------------------------------------- sample efficiency


def curve_auc(curve: Any) -> np.ndarray:
    """Area under an in-context curve ``[..., episode]``, per episode.

    The mean over the evaluated episodes (trapezoid-free: each episode is a
    unit-width bar), so it is on the score's own scale (normalized score:
    random 0, oracle 1) and comparable across numbers of episodes. A
    learner that reaches a level sooner has a larger area at the same final
    score. Returns ``curve``'s shape without its last axis.
    """
    return np.asarray(curve, np.float64).mean(axis=-1)


def episodes_to_threshold(curve: Any, threshold: float) -> np.ndarray:
    """First episode (1-based) whose value is ``>= threshold``, per row.

    ``curve [..., episode]``; a row that never reaches it gets ``episodes +
    1`` (censored: "not within the evaluation"). NaN values never count as
    reaching.
    """
    curve = np.asarray(curve, np.float64)
    hit = np.nan_to_num(curve, nan=-np.inf) >= threshold
    first = np.argmax(hit, axis=-1) + 1
    return np.where(hit.any(axis=-1), first, curve.shape[-1] + 1)
