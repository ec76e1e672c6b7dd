"""Registry, validation, task splits and the multi-episode trial wrapper."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs


def test_registered_lists_core_families():
    names = envs.registered()
    for n in [
        "bernoulli_bandit",
        "gaussian_bandit",
        "darkroom",
        "darkroom_hard",
        "dark_key_to_door",
    ]:
        assert n in names


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match="registered: .*darkroom"):
        envs.make("dark_room")


def test_unknown_override_lists_valid_overrides():
    with pytest.raises(ValueError, match=r"unknown override.*'sise'.*size=9"):
        envs.make("darkroom", sise=5)


@pytest.mark.parametrize(
    "name,kw,field",
    [
        ("darkroom", {"size": 1}, "size"),
        ("darkroom", {"horizon": 0}, "horizon"),
        ("darkroom", {"start": "middle"}, "start"),
        ("gaussian_bandit", {"noise_variance": -1.0}, "noise_variance"),
        ("bernoulli_bandit", {"num_arms": 1.5}, "num_arms"),
    ],
)
def test_bad_override_values_name_the_field(name, kw, field):
    with pytest.raises(ValueError, match=f"`{field}`"):
        envs.make(name, **kw)


def test_task_split_is_deterministic_and_disjoint():
    env = envs.make("darkroom")
    a = env.task_split(0.8, seed=3)
    b = env.task_split(0.8, seed=3)
    c = env.task_split(0.8, seed=4)
    np.testing.assert_array_equal(a.train, b.train)
    assert not np.array_equal(a.train, c.train)
    assert len(a.train) == 65 and len(a.test) == 16  # the AD-ε 65/16 split
    assert set(a.train).isdisjoint(a.test)
    assert sorted([*a.train, *a.test]) == list(range(81))
    assert envs.TaskSplit.from_json(a.to_json()).to_json() == a.to_json()
    with pytest.raises(ValueError, match="continuous task space"):
        envs.make("gaussian_bandit").task_split()
    with pytest.raises(ValueError, match="train_fraction"):
        env.task_split(1.5)


def test_params_for_task_jit_vmap_roundtrip():
    env = envs.make("darkroom", size=10, horizon=100)
    ids = jnp.arange(100)
    params = jax.jit(jax.vmap(env.params_for_task))(ids)
    np.testing.assert_array_equal(params.goal[:, 1] * 10 + params.goal[:, 0], ids)
    k2d = envs.make("dark_key_to_door")
    p = jax.vmap(k2d.params_for_task)(jnp.arange(k2d.num_tasks))
    pairs = {
        (tuple(k), tuple(d))
        for k, d in zip(np.asarray(p.key), np.asarray(p.door), strict=True)
    }
    assert len(pairs) == k2d.num_tasks == 81 * 80


def test_multi_episode_trial_keeps_task_and_counts_episodes():
    env = envs.make("darkroom", horizon=5)
    trial = envs.MultiEpisodeTrial(env, num_episodes=3)
    params = env.params_for_task(jnp.int32(0))
    tr = jax.jit(
        lambda k: envs.rollout(trial, envs.oracle_policy(trial), params, k, 15)
    )(jax.random.key(0))
    # One trial = 3 episodes of 5 steps; truncated exactly at the end.
    assert np.asarray(tr.truncated).tolist() == [False] * 14 + [True]
    np.testing.assert_array_equal(tr.obs["episode"], np.repeat([0, 1, 2], 5))
    # prev_action/prev_reward are the previous step's, zeros at the start.
    np.testing.assert_array_equal(tr.obs["prev_action"][1:], tr.action[:-1])
    np.testing.assert_array_equal(tr.obs["prev_reward"][1:], tr.reward[:-1])
    assert int(tr.obs["prev_action"][0]) == 0 and float(tr.obs["prev_reward"][0]) == 0
    # The inner env resets between episodes: same start observation each time.
    np.testing.assert_array_equal(tr.obs["obs"][::5], tr.obs["obs"][0])
    assert float(trial.optimal_return(params)) == 3 * float(env.optimal_return(params))


def test_episode_returns_handles_early_termination():
    reward = jnp.array([0, 1, 0, 0, 1, 1, 0, 2.0])
    done = jnp.array([0, 1, 0, 0, 1, 0, 0, 1], bool)
    np.testing.assert_array_equal(envs.episode_returns(reward, done, 2), [1, 1])
    np.testing.assert_array_equal(envs.episode_returns(reward, done, 4), [1, 1, 3, 0])
