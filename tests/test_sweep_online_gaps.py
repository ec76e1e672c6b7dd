"""Sweeps of online learners (agentrl.sweep.online): mutants the tests
before let through.

Pass 9 of the hand-made mutation passes. A member's seed and setting are
read off what they must do: a member at learning rate 0 keeps the initial
weights of its seed; members of one seed share their first rollout.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from test_online_sweep import env, tiny_config

from agentrl.envs.registry import make as make_env
from agentrl.online.program import task_split_json
from agentrl.sweep.online import (
    evaluate_online_members,
    held_out_online,
    online_sweep,
    train_members,
)
from agentrl.sweep.paired import task_set_id
from agentrl.train.experiments import load_experiment
from agentrl.train.rundir import eval_tasks


@pytest.mark.long
def test_members_pair_seeds_and_settings_seed_major():
    # members (seed 0, lr 0), (seed 0, lr 1e-2), (seed 1, lr 0), (seed 1, lr 1e-2)
    config = tiny_config(steps=2)
    settings = [{"train.lr": 0.0}, {"train.lr": 1e-2}]
    sweep = online_sweep(config, env(), [0, 1], settings, steps_per_call=2)
    program = sweep.program
    for member, seed in ((0, 0), (2, 1)):  # lr 0: the seed's initial weights
        init = program.trainer.init(jax.random.key(seed), None)  # hp unused
        start = jax.tree.leaves(program.weights(init))
        kept = jax.tree.leaves(sweep.member_weights(member))
        for a, b in zip(start, kept, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
        moved = jax.tree.leaves(sweep.member_weights(member + 1))
        assert (
            max(np.abs(a - b).max() for a, b in zip(start, moved, strict=True)) > 1e-4
        )
    # the first update's rollout is acted before any step: a seed's members
    # log the same rewards, the two seeds different ones
    reward = sweep.metrics["reward"][:, :, 0]  # [S, H]
    np.testing.assert_allclose(reward[:, 0], reward[:, 1], rtol=1e-6)
    assert reward[0, 0] != reward[1, 0]
    assert sweep.metrics["loss"].shape == (2, 2, 2)
    # each member acts with its own policy: member 3's weights made sharp
    # (x 50), it plays unlike member 0 on the same tasks with the same key
    sharp = jax.tree.map(lambda w: w.at[3].multiply(50.0), sweep.state.weights)
    sweep.state = sweep.state._replace(weights=sharp)
    bandit = env()
    tasks = held_out_online(bandit, config)
    returns = evaluate_online_members(sweep, bandit, tasks, jax.random.key(7), 3)
    assert returns.shape[:2] == (2, 2) and returns.shape[3] == 3
    assert not np.array_equal(returns[0, 0], returns[1, 1])


@pytest.mark.long
def test_train_members_pair_seeds_and_settings_seed_major():
    # the same members in one jit: lr-0 members keep their seed's initial
    # weights, and a seed's members log the same first rollout
    config = tiny_config(steps=2)
    settings = [{"train.lr": 0.0}, {"train.lr": 1e-2}]
    bandit = env()
    state, metrics = train_members(config, bandit, [0, 1], settings)
    program = config.algo.make_online_train(config, bandit)
    for member, seed in ((0, 0), (2, 1)):
        init = program.trainer.init(jax.random.key(seed), None)  # hp unused
        start = jax.tree.leaves(program.weights(init))
        for i, moved in ((member, False), (member + 1, True)):
            one = jax.tree.map(lambda x, i=i: x[i], state)
            leaves = jax.tree.leaves(program.weights(one))
            diff = max(np.abs(a - b).max() for a, b in zip(start, leaves, strict=True))
            assert (diff > 1e-4) if moved else (diff < 1e-6)
    reward = np.asarray(metrics["reward"][:, :, 0])  # [S, H]
    np.testing.assert_allclose(reward[:, 0], reward[:, 1], rtol=1e-6)
    assert reward[0, 0] != reward[1, 0]
    assert metrics["loss"].shape == (2, 2, 2)


def test_held_out_online_gives_the_split_asked_for():
    config = tiny_config()
    bandit = env()
    split = task_split_json(bandit, config.data)
    ids = {}
    for which in ("validation", "test"):
        got = held_out_online(bandit, config, which)
        want = eval_tasks(bandit, split, config.eval, which)[0]
        ids[which] = task_set_id(got)
        assert ids[which] == task_set_id(want)
    assert ids["validation"] != ids["test"]


def test_a_learner_trained_from_data_is_refused_by_name():
    config = load_experiment("ad_darkroom", "smoke")
    darkroom = make_env(config.data.env, **dict(config.data.env_args))
    with pytest.raises(ValueError, match="online_sweep needs an online learner"):
        online_sweep(config, darkroom, [0])
