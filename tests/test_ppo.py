"""PPO source: exact history length, recorded actions, learning within the history."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl.envs import make
from agentrl.envs.point_robot import PointRobot
from agentrl.sources.ppo import generate_ppo, make_config


def _first_last(history, num_episodes):
    returns = np.asarray(history.episode_returns(num_episodes))  # [task, episode]
    k = max(num_episodes // 10, 1)
    return returns[:, :k].mean(), returns[:, -k:].mean()


@pytest.mark.long
def test_ppo_point_robot_improves_and_records_env_actions():
    env = make("point_robot")
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 4))
    num_episodes = 100
    history = generate_ppo(env, params, jax.random.key(1), num_episodes)
    steps = num_episodes * env.horizon
    assert history.obs.shape == (4, steps, 2)
    assert history.action.shape == (4, steps, 2)
    assert history.reward.shape == history.episode.shape == (4, steps)
    assert history.optimal_action.shape == (4, steps, 2)
    assert int(history.episode[0, -1]) == num_episodes - 1
    assert int(history.truncated.sum()) == 4 * num_episodes
    action = np.asarray(history.action)
    assert np.abs(action).max() <= 0.1 + 1e-6
    # The recorded action is the one the env took: obs[t+1] = obs[t] + a[t]
    # inside an episode, and the reward is minus the distance to the goal.
    obs, done = np.asarray(history.obs), np.asarray(history.done)
    inside = ~done[:, :-1]
    np.testing.assert_allclose(
        (obs[:, :-1] + action[:, :-1])[inside], obs[:, 1:][inside], atol=1e-5
    )
    goal = np.asarray(params.goal)[:, None]
    dist = np.linalg.norm(obs + action - goal, axis=-1)
    np.testing.assert_allclose(history.reward, -dist, atol=1e-5)
    first, last = _first_last(history, num_episodes)
    best = float(jax.vmap(env.optimal_return)(params).mean())
    assert last > first + 5.0, (first, last)
    assert last > 0.5 * (first + best)  # more than halfway to the oracle


@pytest.mark.long
def test_ppo_darkroom_improves():
    env = make("darkroom")
    task_id = jnp.array([42, 29, 67, 14])  # goals 2-4 steps from the centre
    params = jax.vmap(env.params_for_task)(task_id)
    num_episodes = 120
    history = generate_ppo(
        env, params, jax.random.key(2), num_episodes, task_id=task_id
    )
    assert history.action.shape == (4, num_episodes * env.horizon)
    assert history.action.dtype == jnp.int32
    np.testing.assert_array_equal(history.task_id, task_id)
    assert ((history.action >= 0) & (history.action < 5)).all()
    first, last = _first_last(history, num_episodes)
    assert last > first + 5.0, (first, last)


@pytest.mark.parametrize(
    "settings, field",
    [
        ({"learning_rate": 1e-3}, "unknown setting"),
        ({"steps_per_update": 30}, "steps_per_update"),
        ({"num_minibatches": 7}, "num_minibatches"),
        ({"gamma": 1.5}, "gamma"),
        ({"labels": "expert"}, "labels must be one of"),
    ],
)
def test_ppo_rejects_bad_settings(settings, field):
    with pytest.raises(ValueError, match=field):
        make_config(make("point_robot"), 10, **settings)


def test_ppo_config_defaults_follow_the_env():
    config = make_config(make("point_robot"), 10)
    assert config.steps_per_update == 2 * 20 and config.ent_coef == 0.0
    config = make_config(make("darkroom"), 12)
    assert config.steps_per_update == 4 * 20 and config.ent_coef == 0.01
    assert make_config(make("point_robot"), 10).labels == "oracle"  # auto


@pytest.mark.long  # 3 s of CPU with a warm compilation cache, 18 s cold
def test_final_policy_labels_are_the_deterministic_final_policy():
    """labels='final_policy' (families without an oracle): one fixed policy's
    deterministic action at each recorded state, so every episode's start
    (the origin) gets the same label in a task, while the actions taken
    there changed as PPO learned; the label lies in the action box."""
    env = make("point_robot", horizon=5)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 2))
    history = generate_ppo(env, params, jax.random.key(1), 8, labels="final_policy")
    labels, action = np.asarray(history.optimal_action), np.asarray(history.action)
    assert labels.shape == action.shape == (2, 40, 2)
    assert np.abs(labels).max() <= 0.1 + 1e-6
    starts = np.arange(0, 40, 5)  # every episode starts at the origin
    np.testing.assert_allclose(labels[:, starts], labels[:, :1].repeat(8, 1), atol=1e-6)
    assert np.abs(np.diff(action[:, starts], axis=1)).max() > 1e-3
    with pytest.raises(ValueError, match="labels='oracle' needs an env"):
        make_config(NoOracle(), 10, labels="oracle")
    assert make_config(NoOracle(), 10).labels == "none"  # auto


class NoOracle(PointRobot):
    has_oracle = False


@pytest.mark.long
def test_final_policy_labels_point_to_the_goal_after_learning():
    """After 100 episodes the final policy's labels point towards the goal
    as the oracle's do (mean cosine over every recorded state)."""
    env = make("point_robot")
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 4))
    history = generate_ppo(env, params, jax.random.key(1), 100, labels="final_policy")
    labels = np.asarray(history.optimal_action)
    to_goal = np.asarray(params.goal)[:, None] - np.asarray(history.obs)
    cos = np.sum(labels * to_goal, -1) / (
        np.linalg.norm(labels, axis=-1) * np.linalg.norm(to_goal, axis=-1) + 1e-9
    )
    assert cos.mean() > 0.5, cos.mean()
