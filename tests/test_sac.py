"""SAC source: every task in one jit, learning within the history.

- the history (through the registry) has exactly ``num_episodes * horizon``
  steps per task, the recorded action is the one the env took (Point-Robot:
  the position moves by it) and lies in the box;
- DPT labels: the final policy's deterministic action with
  ``labels="final_policy"`` (the same at every episode start); the env's
  oracle by default (long test);
- settings are checked by name, and the source applies to Box actions only;
- SAC learns Point-Robot within the history: the last episodes' return is
  well above the first episodes' (random actions).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from agentrl.envs import make
from agentrl.sources.registry import check_settings, source_histories
from agentrl.sources.sac import generate_sac, make_config

FAST = {"hidden": 32, "batch_size": 32}


def _tasks(env, n, seed=0):
    return jax.vmap(env.sample_params)(jax.random.split(jax.random.key(seed), n))


@pytest.mark.long
def test_history_shapes_actions_and_final_policy_labels():
    """Through the registry (one compile): exact length, the env's actions,
    final-policy labels the same at every episode start (the origin)."""
    env = make("point_robot", horizon=5)
    histories = source_histories("sac", env, labels="final_policy", **FAST)
    history = histories(_tasks(env, 2), jax.random.key(1), 8, np.arange(2))
    np.testing.assert_array_equal(history.task_id, [0, 1])
    assert history.obs.shape == history.action.shape == (2, 40, 2)
    assert int(history.episode[0, -1]) == 7 and int(history.truncated.sum()) == 16
    action, obs = np.asarray(history.action), np.asarray(history.obs)
    assert np.abs(action).max() <= 0.1 + 1e-6
    inside = ~np.asarray(history.done)[:, :-1]
    np.testing.assert_allclose(
        (obs[:, :-1] + action[:, :-1])[inside], obs[:, 1:][inside], atol=1e-5
    )
    labels = np.asarray(history.optimal_action)
    starts = np.arange(0, 40, 5)  # every episode starts at the origin
    np.testing.assert_allclose(labels[:, starts], labels[:, :1].repeat(8, 1), atol=1e-6)
    assert np.abs(labels).max() <= 0.1 + 1e-6
    # the actions taken at the origin changed as SAC learned
    assert np.abs(np.diff(action[:, starts], axis=1)).max() > 1e-3


@pytest.mark.parametrize(
    "settings, field",
    [
        ({"learning_rate": 1e-3}, "unknown setting"),
        ({"batch_size": 0}, "batch_size"),
        ({"tau": 2.0}, "tau"),
        ({"labels": "expert"}, "labels must be one of"),
        ({"start_steps": -1}, "start_steps"),
    ],
)
def test_sac_rejects_bad_settings(settings, field):
    with pytest.raises(ValueError, match=field):
        make_config(make("point_robot"), 10, **settings)


def test_defaults_follow_the_references_and_the_run():
    config = make_config(make("point_robot"), 100)  # 2,000 steps (T2MIR's run)
    assert (config.start_steps, config.buffer_size) == (100, 2000)
    long_run = make_config(make("point_robot"), 10_000)
    assert (long_run.start_steps, long_run.buffer_size) == (2000, 10_000)
    with pytest.raises(ValueError, match="does not apply"):
        check_settings("sac", make("darkroom"), {})


@pytest.mark.long
def test_sac_learns_point_robot():
    env = make("point_robot")
    params = _tasks(env, 4)
    num_episodes = 100  # T2MIR's Point-Robot SAC run: 2,000 steps
    history = generate_sac(
        env, params, jax.random.key(2), num_episodes, hidden=64, batch_size=64
    )
    # labels="auto": the oracle's (clipped step straight to the goal)
    goal, obs = np.asarray(params.goal)[:, None], np.asarray(history.obs)
    np.testing.assert_allclose(
        history.optimal_action, np.clip(goal - obs, -0.1, 0.1), atol=1e-6
    )
    returns = np.asarray(history.episode_returns(num_episodes))  # [task, episode]
    first, last = returns[:, :10].mean(), returns[:, -10:].mean()
    best = float(jax.vmap(env.optimal_return)(params).mean())
    assert last > first + 5.0, (first, last)
    assert last > 0.5 * (first + best), (first, last, best)
