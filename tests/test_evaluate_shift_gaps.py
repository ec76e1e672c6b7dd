"""Tasks under a shift that moves the goal region and the horizon together."""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs
from agentrl.evaluate.shift import shifted_env, shifted_tasks


def test_a_longer_horizon_does_not_make_training_goals_unseen():
    env = envs.make("darkroom")
    run = SimpleNamespace(env=env, split=env.task_split(0.3, 0, 0.5).to_json())
    shift = {"min_goal_distance": 3, "horizon": 30}
    far = shifted_env("darkroom", {}, shift)
    trained = jax.vmap(env.params_for_task)(jnp.asarray(run.split["train"]))
    trained = {tuple(int(c) for c in g) for g in np.asarray(trained.goal)}
    # tasks are told apart by their goal, the horizon aside (module docstring):
    # the far goals that are no training goal, split 24 test / 23 validation
    region = np.asarray(jax.vmap(far.params_for_task)(jnp.arange(far.num_tasks)).goal)
    unseen = {tuple(int(c) for c in g) for g in region} - trained
    assert len(unseen) == 47
    test_params, test = shifted_tasks(run, far, 24, 0, "test")
    val_params, val = shifted_tasks(run, far, 23, 0, "validation")
    assert not set(test) & set(val)
    goals = np.concatenate([np.asarray(test_params.goal), np.asarray(val_params.goal)])
    assert {tuple(int(c) for c in g) for g in goals} == unseen
    assert (np.asarray(test_params.max_steps_in_episode) == 30).all()


def test_a_shift_of_either_space_is_refused_naming_it():
    with pytest.raises(ValueError, match="changes the action space of bernoulli_ban"):
        shifted_env("bernoulli_bandit", {"num_arms": 3}, {"num_arms": 4})
    with pytest.raises(ValueError, match="changes the observation space of darkroom"):
        shifted_env("darkroom", {"size": 5}, {"size": 7})
    assert shifted_env("bernoulli_bandit", {"num_arms": 3}, {"horizon": 9}).horizon == 9


def test_training_tasks_of_another_task_space_are_refused():
    env = envs.make("darkroom")
    run = SimpleNamespace(env=env, split=env.task_split(0.3, 0, 0.5).to_json())
    far = shifted_env("darkroom", {}, {"min_goal_distance": 3})
    with pytest.raises(ValueError, match="its tasks are no training tasks"):
        shifted_tasks(run, far, 4, 0, "train")
