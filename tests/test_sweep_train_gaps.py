"""Sweeps of distilled learners (agentrl.sweep.train): mutants the tests
before let through.

Pass 11 of the hand-made mutation passes. Members are seed-major (member
``m`` is seed ``m // H`` with traced setting ``m % H``); the returns of the
vmapped evaluation come back as ``[S, H, task, episode]`` in that order.
Read off members that act unlike one another: member ``m`` always pulls
arm ``m`` of a noiseless bandit whose arm ``a`` pays ``a``. Seeds are
distinct uint32s; a resumed sweep keeps only the metrics of its
checkpointed steps; training tasks are cycled to the evaluation count.
"""

from __future__ import annotations

import dataclasses
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl.envs.bandits import GaussianBandit
from agentrl.sweep.train import (
    SweepResult,
    _save_metrics,
    check_seeds,
    member_metrics,
    member_returns,
    run_member_chunks,
)


@dataclasses.dataclass(frozen=True)
class _PullsOneArm:
    """A batched agent that pulls arm ``arm`` on every task at every step."""

    arm: jax.Array
    batched = True

    def init(self, key, params):
        return jnp.zeros(key.shape[0])

    def act(self, key, state, obs, env_state, params):
        return jnp.full(state.shape, self.arm, jnp.int32)

    def update(self, state, step):
        return state


def test_member_returns_come_back_seed_major():
    num_s, num_h, horizon, episodes = 3, 2, 4, 2
    env = GaussianBandit(num_arms=num_s * num_h, horizon=horizon, noise_std=0.0)
    means = jnp.arange(num_s * num_h, dtype=jnp.float32)
    params = jax.tree.map(lambda x: jnp.stack([x, x]), env._params(means))  # 2 tasks
    algo = types.SimpleNamespace(make_agent=lambda model, *_: _PullsOneArm(model))
    sweep = SweepResult(
        config=types.SimpleNamespace(algo=algo),
        seeds=[10, 11, 12],
        settings=[{"train.lr": 1e-3}, {"train.lr": 1e-2}],
        metrics={},
        state=None,
        seconds=0.0,
    )
    members = jnp.arange(num_s * num_h)  # member m pulls arm m
    returns = member_returns(
        sweep, env, params, jax.random.key(0), episodes, members, lambda m: m
    )
    assert returns.shape == (num_s, num_h, 2, episodes)
    for s in range(num_s):
        for h in range(num_h):
            m = s * num_h + h  # seed-major
            np.testing.assert_allclose(returns[s, h], np.full((2, episodes), m * 4.0))


@pytest.mark.parametrize("seeds", [[1, 1], [0, 3, 0], [2**32], [-1], [], [1.0]])
def test_seeds_must_be_distinct_integers_of_one_uint32(seeds):
    # run_sweep and train_sweep take seeds from Python, not only from the
    # CLI: two members of one seed would train the same run twice
    with pytest.raises(ValueError, match="distinct integers"):
        check_seeds(seeds)


def test_seeds_at_the_ends_of_the_uint32_range_are_accepted():
    assert check_seeds((0, 2**32 - 1)) == [0, 2**32 - 1]


def _count_chunk(state, lo, hi):
    """Steps ``lo .. hi`` of two members: the state counts steps, the
    metric ``loss`` is the step's index (``[K, M]``)."""
    steps = jnp.arange(lo, hi, dtype=jnp.float32)
    return state + (hi - lo), {"loss": jnp.stack([steps, steps], 1)}


def test_a_resumed_sweep_keeps_only_the_metrics_of_its_checkpointed_steps(tmp_path):
    # a kill between the metrics' write and the checkpoint's leaves more
    # metric rows (4) than checkpointed steps (2): the resumed sweep must
    # read back only the first 2 rows, then run steps 2 and 3 again
    ckpt = tmp_path / "members"
    kwargs = dict(checkpoint_dir=ckpt, checkpoint_every=2, progress=False, unit="s")
    state, host, first = run_member_chunks(jnp.zeros(2), _count_chunk, 2, 2, **kwargs)
    assert first == 0 and float(state[0]) == 2.0
    _, metrics = _count_chunk(jnp.zeros(2), 0, 4)
    _save_metrics(ckpt, [metrics])  # 4 rows; the checkpoint is still at step 2
    state, host, first = run_member_chunks(jnp.zeros(2), _count_chunk, 4, 2, **kwargs)
    assert first == 2 and float(state[0]) == 4.0
    loss = member_metrics(host, 1, 2)["loss"]  # [S, H, steps]
    np.testing.assert_array_equal(loss[0, 0], [0.0, 1.0, 2.0, 3.0])


def test_training_tasks_are_cycled_to_the_evaluation_count(monkeypatch):
    # three distinct training tasks, seven evaluation slots: 0 1 2 0 1 2 0;
    # two slots: the first two tasks
    import agentrl.sweep.train as sweep_train

    tasks = {"goal": jnp.array([10, 11, 12])}
    monkeypatch.setattr(
        sweep_train, "training_tasks", lambda env, metadata: (tasks, [4, 7, 9])
    )
    dataset = types.SimpleNamespace(metadata={})
    for num_tasks, goals in ((7, [10, 11, 12, 10, 11, 12, 10]), (2, [10, 11])):
        config = types.SimpleNamespace(eval=types.SimpleNamespace(num_tasks=num_tasks))
        picked = sweep_train.train_tasks(None, dataset, config)
        np.testing.assert_array_equal(picked["goal"], goals)


@pytest.mark.parametrize("bad", [True, 0, 2.0, "3"])
def test_steps_per_call_is_a_plain_int_of_at_least_one(bad):
    """``True`` is refused like every other input check's bool
    (``agentrl.checks.is_int``); it used to run as 1."""
    from agentrl.sweep.train import check_steps_per_call

    with pytest.raises(ValueError, match="steps_per_call must be an integer >= 1"):
        check_steps_per_call(bad)
    assert check_steps_per_call(3) == 3
