"""Whole sweeps (agentrl.sweep.run): mutants the tests before let through.

Pass 11 of the hand-made mutation passes. A member's score is the mean of
its last ``ceil(episodes / 5)`` evaluation episodes, each normalized on its
own task against the references ``agentrl eval`` uses for the same key
(random and oracle returns, :func:`~agentrl.evaluate.evaluate.reference_key`);
each traced setting's row holds its own members' losses and scores; a
setting's record is keyed by its seeds, traced settings, evaluation and
split, so a resumed sweep never reads another's.
"""

from __future__ import annotations

import types

import jax
import numpy as np
import pytest

from agentrl.envs.registry import make as make_env
from agentrl.evaluate.evaluate import reference_key, reference_returns
from agentrl.sweep.run import _scores, _setting_table, last_episodes


@pytest.mark.parametrize(
    "episodes, last", [(1, 1), (4, 1), (5, 1), (6, 2), (10, 2), (11, 3), (25, 5)]
)
def test_the_score_reads_the_last_fifth_of_the_episodes_rounded_up(episodes, last):
    assert last_episodes(episodes) == last


def test_without_an_oracle_the_score_is_the_raw_return_of_the_last_episodes():
    returns = np.arange(2 * 3 * 4 * 6, dtype=np.float64).reshape(2, 3, 4, 6)
    no_oracle = types.SimpleNamespace()  # no has_oracle: raw returns
    scores = _scores(no_oracle, None, jax.random.key(0), returns)
    np.testing.assert_allclose(scores, returns[..., 4:].mean(-1))  # last 2 of 6


def test_scores_are_normalized_on_each_task_against_evals_references():
    env = make_env("darkroom")
    params = jax.vmap(env.params_for_task)(jax.numpy.array([3, 40, 77]))
    key = jax.random.key(5)
    rng = np.random.default_rng(0)
    returns = rng.integers(0, 20, size=(2, 3, 3, 5)).astype(np.float64)
    scores = _scores(env, params, key, returns)
    # the references agentrl eval computes for methods evaluated on ``key``
    random, oracle = map(np.asarray, reference_returns(env, params, reference_key(key)))
    assert np.ptp(oracle) > 0 and np.ptp(random) > 0  # tasks differ
    expected = np.empty((2, 3, 3))
    for t in range(3):
        last = returns[:, :, t, -1]  # ceil(5 / 5) = 1 episode
        expected[:, :, t] = (last - random[t]) / (oracle[t] - random[t])
    np.testing.assert_allclose(scores, expected, rtol=1e-5)


def test_each_traced_settings_row_holds_its_own_members():
    # [S=2, H=3]: setting h's losses are h and its scores 10 h + seed
    settings = [{"train.lr": 1e-4}, {"train.lr": 1e-3}, {"train.lr": 1e-2}]
    loss = np.broadcast_to(np.arange(3.0)[None, :, None], (2, 3, 10))
    scores = 10.0 * np.arange(3.0)[None, :, None] + np.arange(2.0)[:, None, None]
    scores = np.broadcast_to(scores, (2, 3, 4))  # [S, H, task]
    sweep = types.SimpleNamespace(metrics={"loss": loss})
    evaluated = {"scores": scores, "task_set": "tasks-a", "tasks": "validation"}
    rows, curves = _setting_table({"model.d_model": 16}, settings, sweep, evaluated)
    assert [r["setting"] for r in rows] == [
        "d_model=16 lr=0.0001",
        "d_model=16 lr=0.001",
        "d_model=16 lr=0.01",
    ]
    for h, row in enumerate(rows):
        assert row["final_loss"] == h and row["seeds"] == 2
        assert row["task_scores"] == [[10.0 * h] * 4, [10.0 * h + 1] * 4]
        assert row["score"] == 10.0 * h + 0.5
        assert row["task_set"] == "tasks-a" and row["tasks"] == "validation"
        np.testing.assert_array_equal(curves[row["setting"]], loss[:, h])


def test_a_settings_record_is_keyed_by_everything_its_rows_depend_on():
    # a resumed sweep reads a record back by its key: a record of other
    # seeds, traced settings, evaluation or split must not be taken
    from agentrl.sweep.run import _setting_key
    from agentrl.train.experiments import load_experiment

    config = load_experiment("ad_darkroom", "smoke")
    static, settings = {"model.d_model": 16}, [{"train.lr": 1e-3}]
    base = dict(evaluate=True, steps_per_call=10, tasks="validation")
    key = _setting_key(config, static, settings, [0, 1], **base)
    assert key.startswith("d_model=16-")
    assert key == _setting_key(config, static, settings, [0, 1], **base)
    others = [
        _setting_key(config, static, settings, [0, 2], **base),
        _setting_key(config, static, [{"train.lr": 3e-3}], [0, 1], **base),
        _setting_key(config, static, settings, [0, 1], **{**base, "evaluate": False}),
        _setting_key(config, static, settings, [0, 1], **{**base, "tasks": "test"}),
    ]
    assert len({key, *others}) == 5
