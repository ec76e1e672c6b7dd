"""Sweeps of source algorithms (agentrl.sweep.sources): mutants the tests
before let through.

Pass 11 of the hand-made mutation passes. ``curve_rows`` summarises each
setting's first episode and its last ``last`` episodes (with that mean's
CI), from the normalized returns where there are any: checked on hand-made
returns whose episode ``e`` of setting ``h`` returns ``e + 10 h``. The
normalized returns use the references evaluation computes next to methods
run on the sweep's key (``reference_key``), not a random-play estimate
drawn on that key itself, which the seeds' keys are split from.
"""

from __future__ import annotations

import numpy as np
import pytest

from agentrl.sweep.sources import SourceSweep, curve_rows


def _sweep(normalized: bool) -> SourceSweep:
    episodes = np.arange(12, dtype=np.float64)  # episode e returns e
    returns = (
        np.broadcast_to(episodes, (2, 3, 4, 12))
        + 10.0 * np.arange(2)[:, None, None, None]
    )  # [setting, seed, task, episode]
    settings = [{"learning_rate": 0.1}, {"learning_rate": 0.5}]
    scaled = returns / 100.0 if normalized else None
    return SourceSweep("q_learning", settings, returns, scaled, 0.0)


@pytest.mark.parametrize("normalized", [False, True])
def test_rows_hold_the_first_episode_and_the_mean_of_the_last_ones(normalized):
    scale = 100.0 if normalized else 1.0  # normalized values are preferred
    rows = curve_rows(_sweep(normalized), last=4)
    assert [r["learning_rate"] for r in rows] == [0.1, 0.5]
    for h, row in enumerate(rows):
        assert row["seeds"] == 3
        np.testing.assert_allclose(row["first_episode"] * scale, 10.0 * h)
        last = np.mean([8, 9, 10, 11]) + 10.0 * h  # episodes 8..11
        np.testing.assert_allclose(row["last_4"] * scale, last)
        # every seed and task alike: the interval is the mean itself
        np.testing.assert_allclose(row["ci_low"] * scale, last)
        np.testing.assert_allclose(row["ci_high"] * scale, last)


@pytest.mark.long  # compiles a Q-learning sweep and the random reference (~3-6 s)
def test_normalized_returns_use_the_references_evaluation_pairs_with_the_key():
    # the random return of Dark Room is a Monte Carlo estimate: it is the
    # one evaluation computes next to methods run on ``key``
    # (reference_key(key)), not one drawn on ``key`` itself, whose split
    # keys are the seeds' own
    import jax

    from agentrl.envs.registry import make as make_env
    from agentrl.evaluate.evaluate import reference_key, reference_returns
    from agentrl.evaluate.metrics import normalized_score
    from agentrl.sweep.sources import source_sweep

    env = make_env("darkroom", size=3, horizon=4)
    params = jax.vmap(env.params_for_task)(jax.numpy.array([2, 7]))
    key = jax.random.key(0)
    out = source_sweep("q_learning", env, params, key, 3, 2, {"learning_rate": [0.5]})
    random, oracle = reference_returns(env, params, reference_key(key))
    for s in range(2):
        expected = normalized_score(out.returns[0, s], random, oracle)
        np.testing.assert_allclose(out.normalized[0, s], expected, rtol=1e-6)
