"""Validation tasks beyond a finite split: fresh draws from the task distribution.

Point-Robot and the MuJoCo families fix a few tasks drawn from a continuous
distribution (T2MIR's 50 goals or velocities, 45 / 5), so their split holds
2 validation tasks. ``eval.validation_tasks`` (or ``--tasks``) asks for
more: they are drawn fresh from the distribution the fixed tasks came from,
the test tasks stay the split's. A family with nothing beyond its fixed
tasks (Dark Room's goals, HalfCheetah-Dir's two directions) says so.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from agentrl import envs
from agentrl.configtools import override
from agentrl.envs.base import can_draw_tasks
from agentrl.envs.tasks import split_task_ids
from agentrl.envs.trial import MultiEpisodeTrial
from agentrl.evaluate.metrics import MIN_RESOLVING_TASKS
from agentrl.evaluate.reproduce_checks import check_validation
from agentrl.train.experiments import known_experiments, load_experiment
from agentrl.train.rundir import held_out_params

POINT_ROBOT = {"num_goals": 50, "goals": "uniform", "start_range": 0.1}


def draws(env, n: int, seed: int = 0):
    keys = jax.random.split(jax.random.key(seed), n)
    return jax.vmap(env.draw_params)(keys)


def test_point_robot_draws_goals_from_the_square_its_fixed_goals_came_from():
    env = envs.make("point_robot", **POINT_ROBOT)
    goals = np.asarray(draws(env, 4000).goal)
    assert goals.shape == (4000, 2) and np.abs(goals).max() <= 1.0
    # U(-1, 1) per axis: mean 0, variance 1/3 (standard errors ~0.009, ~0.004)
    np.testing.assert_allclose(goals.mean(0), 0.0, atol=0.05)
    np.testing.assert_allclose(goals.var(0), 1 / 3, atol=0.03)
    fixed = np.asarray(env.goal_positions())
    nearest = np.abs(goals[:, None] - fixed[None]).max(-1).min(-1)
    assert nearest.min() > 0  # none of the 50 fixed goals
    half = envs.make("point_robot", num_goals=8)  # the half circle's angles
    angles = np.asarray([half.task_parameter(p) for p in _rows(draws(half, 200))])
    assert 0 <= angles.min() and angles.max() <= np.pi and angles.std() > 0.5


def _rows(params):
    n = jax.tree.leaves(params)[0].shape[0]
    return [jax.tree.map(lambda x, i=i: x[i], params) for i in range(n)]


def test_mujoco_families_draw_from_their_task_ranges():
    vel = envs.make("halfcheetah_vel")
    values = np.asarray(draws(vel, 2000).target_velocity)
    assert values.min() >= vel.task_low and values.max() <= vel.task_high
    assert abs(values.mean() - (vel.task_low + vel.task_high) / 2) < 0.1
    assert not set(values.tolist()) & set(vel.task_values().tolist())
    walker = envs.make("walker_params")
    mass = np.asarray(draws(walker, 500).body_mass)
    default = walker.defaults["body_mass"]
    ratio = mass[:, default > 0] / default[default > 0]  # the world body weighs 0
    limit = walker.log_scale_limit
    assert ratio.min() >= 1.5**-limit - 1e-5 and ratio.max() <= 1.5**limit + 1e-5
    assert len(np.unique(ratio[:, 0])) == 500  # a fresh body each draw


def test_which_families_can_draw():
    assert can_draw_tasks(envs.make("point_robot", **POINT_ROBOT))
    assert can_draw_tasks(envs.make("halfcheetah_vel"))
    assert not can_draw_tasks(envs.make("halfcheetah_dir"))  # +1 and -1 only
    assert not can_draw_tasks(envs.make("darkroom"))
    trial = MultiEpisodeTrial(envs.make("point_robot", **POINT_ROBOT), 3)
    assert can_draw_tasks(trial)
    assert not can_draw_tasks(MultiEpisodeTrial(envs.make("darkroom"), 3))


def test_validation_tasks_beyond_the_split_are_drawn_and_test_tasks_stay():
    env = envs.make("point_robot", **POINT_ROBOT)
    split = split_task_ids(50, 0.9, 0, 0.5).to_json()
    assert len(split["validation"]) == 2
    params, ids = held_out_params(env, split, 16, 3, "validation", draw=True)
    assert ids is None and params.goal.shape == (16, 2)
    again, _ = held_out_params(env, split, 16, 3, "validation", draw=True)
    other, _ = held_out_params(env, split, 16, 4, "validation", draw=True)
    np.testing.assert_array_equal(params.goal, again.goal)  # seeded
    assert not np.allclose(params.goal, other.goal)
    # the split's own tasks whenever they suffice, and always for the test
    _, few = held_out_params(env, split, 2, 3, "validation", draw=True)
    assert few == split["validation"]
    _, test = held_out_params(env, split, 16, 3, "test", draw=True)
    assert test == split["test"]
    # without draw (the count is eval.num_tasks' default) the split's two
    _, kept = held_out_params(env, split, 16, 3, "validation")
    assert kept == split["validation"]


def test_a_family_without_draws_refuses_more_than_its_split_holds():
    env = envs.make("darkroom")
    split = split_task_ids(81, 0.8, 0, 0.5).to_json()
    with pytest.raises(ValueError, match="no tasks beyond its 81 fixed ones"):
        held_out_params(env, split, 9, 0, "validation", draw=True)
    _, ids = held_out_params(env, split, 8, 0, "validation", draw=True)
    assert ids == split["validation"]
    two_way = split_task_ids(81, 0.8, 0).to_json()  # no validation ids at all
    with pytest.raises(ValueError, match="no validation tasks"):
        held_out_params(env, two_way, 9, 0, "validation", draw=True)
    robot = envs.make("point_robot", **POINT_ROBOT)  # a family that can draw
    two_way = split_task_ids(50, 0.9, 0).to_json()
    params, ids = held_out_params(robot, two_way, 4, 0, "validation", draw=True)
    assert ids is None and params.goal.shape == (4, 2)


def test_the_config_check_runs_before_any_data():
    darkroom = load_experiment("ad_darkroom", "smoke")
    assert check_validation(override(darkroom, {"eval.validation_tasks": 8})) is None
    with pytest.raises(ValueError, match=r"eval.validation_tasks=9: .*at most 8"):
        check_validation(override(darkroom, {"eval.validation_tasks": 9}))
    # Point-Robot's split holds 2: said before anything runs, and how to fix it
    robot = load_experiment("ad_point_robot", "smoke")
    note = check_validation(robot)
    assert "chosen on 2 validation tasks" in note
    assert "eval.validation_tasks=32" in note
    assert check_validation(override(robot, {"eval.validation_tasks": 64})) is None
    # a family with nothing to draw says how many it holds, or that it has none
    few = override(darkroom, {"eval.validation_tasks": 4})
    assert "the split holds 8: `--set eval.validation_tasks=8`" in check_validation(few)
    tiny = override(darkroom, {"data.env_args": (("size", 3),)})  # 9 goals: 1
    assert "chosen on 1 validation tasks" in check_validation(tiny)
    assert "the family has no more" in check_validation(tiny)


#: ``cpu`` presets whose committed records chose on the split's 2
#: validation tasks, kept so: their SAC baselines take ~25 min a seed to run
#: again (HalfCheetah-Vel, Walker; docs/protocol.md)
CHOSEN_ON_THE_SPLIT = {
    "ad_halfcheetah_vel",
    "ad_walker_params",
    "dpt_halfcheetah_vel",
    "rl2_halfcheetah_vel",
    "t2mir_ad_halfcheetah_vel",
    "transformer_ppo_halfcheetah_vel",
}


def test_presets_draw_validation_tasks_where_the_split_is_too_small():
    """Every ``cpu`` / ``gpu`` / ``full`` preset whose split holds fewer
    validation tasks than can resolve a choice, on a family that draws
    more, asks for them (but the named ``cpu`` ones)."""
    checked, families = [], {}
    for name in known_experiments():
        if "xland" in name:
            continue  # XLand's family is slow to build; its tasks are finite rules
        presets = (
            ("gpu", "full") if name in CHOSEN_ON_THE_SPLIT else ("cpu", "gpu", "full")
        )
        for preset in presets:
            config = load_experiment(name, preset)
            data = config.data
            key = (data.env, data.env_args)
            if key not in families:
                families[key] = envs.make(data.env, **dict(data.env_args))
            env = families[key]
            if not (env.num_tasks and can_draw_tasks(env)):
                continue
            split = env.task_split(data.split_fraction, data.seed, 0.5)
            if len(split.validation) < MIN_RESOLVING_TASKS:
                asked = config.eval.validation_tasks or 0
                assert asked >= MIN_RESOLVING_TASKS, (name, preset, asked)
                checked.append(name)
    assert {"ad_point_robot", "ad_halfcheetah_vel", "ad_walker_params"} <= set(checked)
    assert {"dt_point_robot", "meta_dt_point_robot", "t2mir_ad_point_robot"} <= set(
        checked
    )
