"""The papers' targets a reproduction is judged against, by kind.

An experiment module names the kind of its targets in ``TARGET`` (a key of
:data:`KINDS`; ``"improves"`` when it names none)::

    TARGET = "online_bandit"  # experiments/rl2_bandit.py

:func:`targets_for` computes them from a reproduction's results: each a
record row (:func:`agentrl.evaluate.reproduce_record.target`) with its
value, goal, 95% CI (seeds, then tasks within them, resampled where there
are several seeds) and verdict: met only where the whole CI clears the goal
(its low end above a goal to reach, its high end below a ceiling), never
by the point estimate alone. The kinds and their goals (the issues'):

- ``ad_darkroom``: AD's normalized score over the last 10 episodes >= 0.75,
  and its area under the curve above the source learning online on the
  same goals (``q_learning``);
- ``dpt_bandit``: DPT's regret at the horizon <= 1.2x Thompson's and
  <= 0.5x random's (paired ratios);
- ``online_bandit``: an online learner's regret <= 1.5x Thompson's;
- ``online_darkroom``: an online learner's score over the trial's last (up
  to 10) episodes >= 0.8, and its gain over episode 1 above 0;
- ``beats_its_data``: AD-ε's last-episodes return above the best return in its
  data (the CI's low end above 1x);
- ``memory_probe``: the family's success (``Environment.success``; the
  T-Maze's: the goal reached) balanced over the two goal sides
  (the mean of the sides' success rates) with the CI's low end above 0.5,
  what any policy without memory scores (it turns the same way whatever
  the cue);
- ``improves``: the learner's last-episodes score (else return) above 0,
  and its return rising in context (last episodes minus episode 1, paired
  per seed and task) where there are more episodes than the last ones.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import agentrl.evaluate.metrics as metrics
from agentrl.data.reader import open_dataset
from agentrl.envs.registry import make as make_env
from agentrl.evaluate.reproduce_record import target
from agentrl.train.experiments import load_module
from agentrl.train.rundir import load_config

#: the kind an experiment without ``TARGET`` gets
DEFAULT_KIND = "improves"


def resample_for(runs: int) -> str:
    """Seeds then tasks where there are several seeds; tasks otherwise."""
    return "both" if runs > 1 else "tasks"


def with_ci(
    name: str,
    value: float,
    low: float,
    high: float,
    goal: float,
    higher: bool = True,
    *,
    resolved: bool = True,
) -> dict:
    """A target row with its CI ``[low, high]``, judged by the CI alone.

    ``met`` only when the whole CI clears ``goal`` (``low > goal`` for a goal
    to reach, ``high < goal`` for a ceiling; a NaN end clears nothing) and
    ``resolved`` (a caller's further condition, e.g. enough pairs).
    """
    row = target(name, value, goal, higher)
    row["ci"] = f"[{low:.3g}, {high:.3g}]"
    row["met"] = bool((low > goal if higher else high < goal) and resolved)
    return row


def paired_ratio(
    a: np.ndarray, b: np.ndarray, num_samples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """``mean(a) / mean(b)`` over ``[seed, task]`` with a paired bootstrap CI.

    Seeds, then tasks within them, are resampled jointly for ``a`` and ``b``
    (or tasks only with one seed).
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    runs, tasks = a.shape
    rng = np.random.default_rng(seed)
    ri, ti = metrics._resample_index(rng, runs, tasks, num_samples, resample_for(runs))
    ratios = a[ri, ti].mean(axis=(1, 2)) / b[ri, ti].mean(axis=(1, 2))
    low, high = np.quantile(ratios, [0.025, 0.975])
    return float(a.mean() / b.mean()), float(low), float(high)


def data_best_return(dataset: Path, last_fraction: float = 0.1) -> float:
    """Mean return of the data's best (last, least noisy) episodes."""
    ds = open_dataset(dataset)
    history = ds.load_history("train")
    episodes = ds.metadata["num_episodes"]
    returns = np.asarray(history.episode_returns(episodes))
    k = max(1, int(last_fraction * episodes))
    return float(returns[:, -k:].mean())


def _curves(runs: list) -> np.ndarray:
    """``[seed, task, episode]`` normalized score (else return)."""
    field = "normalized" if all(r.normalized is not None for r in runs) else "returns"
    return np.stack([np.asarray(getattr(r, field), np.float64) for r in runs])


def _final_regret(combined: dict, method: str) -> np.ndarray:
    """``[seed, task]`` cumulative regret of ``method`` at the horizon."""
    return np.stack([np.asarray(r.regret)[:, -1] for r in combined[method]])


def _bootstrap(values: np.ndarray) -> tuple[float, float]:
    """95% CI of the mean of ``values [seed, task]``."""
    return metrics.bootstrap_ci(values, resample=resample_for(len(values)))


# ------------------------------------------------------------------ kinds
# Each kind: (learner's label, summary, combined results, run dirs) -> rows.
def ad_darkroom(algo: str, summary: dict, combined: dict, run_dirs: list) -> list:
    m = summary[algo]["score_last"]
    low, high = m["mean_ci"]
    rows = [with_ci("AD normalized score, last 10 episodes (test goals)",
                    m["mean"], low, high, 0.75)]  # fmt: skip
    if "q_learning" in combined:
        diff = metrics.curve_auc(_curves(combined[algo])) - metrics.curve_auc(
            _curves(combined["q_learning"])
        )  # [seed, task]
        low, high = _bootstrap(diff)
        rows.append(with_ci(
            "AD minus q_learning (online, same goals): area under the curve",
            float(diff.mean()), low, high, 0.0,
        ))  # fmt: skip
    return rows


def dpt_bandit(algo: str, summary: dict, combined: dict, run_dirs: list) -> list:
    rows = []
    pairs = (("thompson", "Thompson", 1.2), ("random", "random", 0.5))
    for baseline, name, goal in pairs:
        ratio, lo, hi = paired_ratio(
            _final_regret(combined, algo), _final_regret(combined, baseline)
        )
        rows.append(with_ci(f"DPT / {name} regret at H", ratio,
                            lo, hi, goal, False))  # fmt: skip
    return rows


def online_bandit(algo: str, summary: dict, combined: dict, run_dirs: list) -> list:
    ratio, lo, hi = paired_ratio(
        _final_regret(combined, algo), _final_regret(combined, "thompson")
    )
    return [with_ci(f"{algo} / Thompson regret at H", ratio, lo, hi, 1.5,
                    False)]  # fmt: skip


def _gain(curves: np.ndarray, k: int) -> tuple[float, float, float]:
    """``(mean, low, high)`` of the last ``k`` episodes minus episode 1 of
    ``curves [seed, task, episode]``, paired per seed and task."""
    gain = curves[..., -k:].mean(-1) - curves[..., 0]
    low, high = _bootstrap(gain)
    return float(gain.mean()), low, high


def online_darkroom(algo: str, summary: dict, combined: dict, run_dirs: list) -> list:
    k, m = summary[algo]["last_k"], summary[algo]["score_last"]
    gain, low, high = _gain(_curves(combined[algo]), k)
    return [
        with_ci(f"{algo} normalized score, last {k} episodes",
                m["mean"], *m["mean_ci"], 0.8),
        with_ci(f"{algo} score gain, last {k} episodes minus episode 1",
                gain, low, high, 0.0),
    ]  # fmt: skip


def beats_its_data(algo: str, summary: dict, combined: dict, run_dirs: list) -> list:
    best = np.array([data_best_return(d / "dataset") for d in run_dirs])
    k = summary[algo]["last_k"]
    last = np.stack([r.returns for r in combined[algo]])[..., -k:].mean(-1)
    rel = last / np.maximum(best, 1e-9)[:, None]  # [seed, task]
    low, high = _bootstrap(rel)
    return [with_ci("AD-eps last-episodes return / best return in its data",
                    float(rel.mean()), low, high, 1.0)]  # fmt: skip


def balanced_success(
    success: np.ndarray, side: np.ndarray, num_samples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """The mean of the two sides' success rates, with a bootstrap 95% CI.

    ``success`` and ``side`` are ``[seed, task]`` (one episode a task; the
    side any two distinct values); seeds, then tasks within them, are
    resampled (tasks only with one seed), the rate recomputed from each
    resample's episodes of each side. NaN (all three) when one side was
    never drawn; a resample that misses one is left out of the CI.
    """
    ok = np.asarray(success, np.float64)
    first = np.asarray(side) == np.unique(side)[0]

    def side_rate(o, mask):  # NaN where a (re)sample holds no such episode
        n = mask.sum(axis=(-2, -1))
        return np.where(n > 0, (o * mask).sum(axis=(-2, -1)) / np.maximum(n, 1), np.nan)

    def rate(o, f):
        return 0.5 * (side_rate(o, f) + side_rate(o, ~f))

    value = float(rate(ok, first))
    if np.isnan(value):  # one side never drawn: nothing to balance
        return value, value, value
    rng = np.random.default_rng(seed)
    runs, tasks = ok.shape
    ri, ti = metrics._resample_index(rng, runs, tasks, num_samples, resample_for(runs))
    low, high = np.nanquantile(rate(ok[ri, ti], first[ri, ti]), [0.025, 0.975])
    return value, float(low), float(high)


def _test_sides(runs: list) -> np.ndarray:
    """The ``[seed, task]`` goal side of each result's tasks, as evaluated
    (their recorded task parameter:
    :meth:`agentrl.envs.tmaze.TMaze.task_parameter`)."""
    try:
        return np.stack([r.metadata["task_parameter"]["values"] for r in runs])
    except KeyError:
        raise ValueError(
            "memory_probe: the results do not record their tasks' goal sides "
            "(metadata['task_parameter']); the family must define task_parameter"
        ) from None


def memory_probe(algo: str, summary: dict, combined: dict, run_dirs: list) -> list:
    returns = np.stack([np.asarray(r.returns)[:, -1] for r in combined[algo]])
    data = load_config(run_dirs[0]).data
    env = make_env(data.env, **dict(data.env_args))
    sides = _test_sides(combined[algo])
    rate, low, high = balanced_success(env.success(returns), sides)
    return [with_ci(f"{algo} success balanced over the goal sides (memoryless 0.5)",
                    rate, low, high, 0.5)]  # fmt: skip


def improves(algo: str, summary: dict, combined: dict, run_dirs: list) -> list:
    m = summary[algo].get("score_last", summary[algo]["return_last"])
    low, high = m["mean_ci"]
    rows = [with_ci(f"{algo} normalized score, last episodes",
                    m["mean"], low, high, 0.0)]  # fmt: skip
    returns = np.stack([np.asarray(r.returns, np.float64) for r in combined[algo]])
    k = summary[algo]["last_k"]
    if returns.shape[-1] > k:  # a rise in context needs episodes after the first
        gain, low, high = _gain(returns, k)
        rows.append(with_ci(f"{algo} return rise, last {k} episodes minus episode 1",
                            gain, low, high, 0.0))  # fmt: skip
    return rows


KINDS: dict[str, Callable[..., list]] = {
    "ad_darkroom": ad_darkroom,
    "dpt_bandit": dpt_bandit,
    "online_bandit": online_bandit,
    "online_darkroom": online_darkroom,
    "beats_its_data": beats_its_data,
    "memory_probe": memory_probe,
    "improves": improves,
}


def target_kind(experiment: str) -> str:
    """The ``TARGET`` experiment ``experiment`` declares (else the default).

    Raises ``ValueError`` naming the experiment and the kinds allowed.
    """
    kind = getattr(load_module(experiment), "TARGET", DEFAULT_KIND)
    if kind not in KINDS:
        raise ValueError(
            f"experiment {experiment}: TARGET must be one of {sorted(KINDS)}, "
            f"got {kind!r}"
        )
    return kind


def targets_for(
    experiment: str, summary: dict, combined: dict, run_dirs: list[Path]
) -> list[dict[str, Any]]:
    """The targets of ``experiment``'s kind, each with its value, CI and verdict.

    ``summary``/``combined`` as :func:`agentrl.evaluate.report.summarize`
    takes and gives them, the learner first; ``run_dirs`` its runs, one per
    seed.
    """
    algo = next(iter(summary))
    return KINDS[target_kind(experiment)](algo, summary, combined, run_dirs)
