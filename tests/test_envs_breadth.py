"""Point-Robot and contextual classic control: oracle, tasks, gymnax equality."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl.envs import make, oracle_policy, random_policy, rollout
from agentrl.envs.point_robot import PointRobot

CONTEXTUAL = (
    "cartpole_contextual",
    "pendulum_contextual",
    "mountaincar_contextual",
    "acrobot_contextual",
)


# ----------------------------------------------------------------- point robot
def _returns(env, policy, params, key, episodes=1):
    steps = episodes * env.horizon
    tr = jax.jit(jax.vmap(lambda p, k: rollout(env, policy, p, k, steps)))(
        params, jax.random.split(key, jax.tree.leaves(params)[0].shape[0])
    )
    return tr.reward.reshape(tr.reward.shape[0], episodes, -1).sum(-1), tr


def test_point_robot_oracle_achieves_closed_form_return():
    env = make("point_robot")
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 64))
    goal = np.asarray(params.goal)
    np.testing.assert_allclose(np.linalg.norm(goal, axis=1), 1.0, atol=1e-5)
    assert (goal[:, 1] >= -1e-6).all()  # upper half circle
    returns, tr = _returns(env, oracle_policy(env), params, jax.random.key(1), 2)
    best = jax.vmap(env.optimal_return)(params)
    np.testing.assert_allclose(returns, np.stack([best, best], 1), rtol=1e-5)
    assert tr.truncated[:, env.horizon - 1].all() and not tr.terminated.any()
    # Independent check: brute force over 20 steps of a numpy oracle.
    pos, total = np.zeros(2), 0.0
    for _ in range(20):
        pos = pos + np.clip(goal[0] - pos, -0.1, 0.1)
        total -= np.linalg.norm(pos - goal[0])
    np.testing.assert_allclose(best[0], total, rtol=1e-5)


def test_point_robot_oracle_beats_other_policies():
    env = PointRobot()
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(2), 16))
    best = jax.vmap(env.optimal_return)(params)
    rand, _ = _returns(env, random_policy(env), params, jax.random.key(3))
    assert (rand[:, 0] < best - 1.0).all()

    # Heading straight at full speed along the unit direction (norm-clipped,
    # not per-axis clipped) is never better than the oracle.
    def straight(key, obs, state, p):
        d = p.goal - state.pos
        return 0.1 * d / jnp.maximum(jnp.linalg.norm(d), 0.1)

    alt, _ = _returns(env, straight, params, jax.random.key(3))
    assert (alt[:, 0] <= best + 1e-4).all()
    assert (alt[:, 0] < best - 1e-3).any()


def test_point_robot_clips_actions_per_axis():
    env = PointRobot()
    params = env.default_params
    obs, state = env.reset(jax.random.key(0), params)
    obs, state, reward, *_ = env.step(
        jax.random.key(1), state, jnp.array([5.0, -0.05]), params
    )
    np.testing.assert_allclose(obs, [0.1, -0.05], rtol=1e-6)
    np.testing.assert_allclose(reward, -np.linalg.norm([0.1, -1.05]), rtol=1e-6)


def test_point_robot_finite_goals_and_split():
    env = make("point_robot", num_goals=50)
    assert env.num_tasks == 50
    split = env.task_split(0.9, seed=0)
    assert (len(split.train), len(split.test)) == (45, 5)
    assert not set(split.train) & set(split.test)
    goals = jax.vmap(env.params_for_task)(jnp.arange(50)).goal
    angles = np.arctan2(goals[:, 1], goals[:, 0])
    np.testing.assert_allclose(np.diff(angles), np.pi / 50, atol=1e-5)
    sampled = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 32))
    dist = np.linalg.norm(sampled.goal[:, None] - goals[None], axis=-1).min(1)
    assert (dist < 1e-6).all()
    with pytest.raises(NotImplementedError):
        PointRobot().params_for_task(0)


@pytest.mark.long
def test_point_robot_t2mir_goals_and_random_starts():
    """T2MIR's tasks: 50 goals uniform in [-1, 1]^2 from a seed, starts
    uniform in [-0.1, 0.1]^2; the oracle's mean return is optimal_return's."""
    env = make("point_robot", num_goals=50, goals="uniform", start_range=0.1)
    goals = np.asarray(env.goal_positions())
    assert goals.shape == (50, 2) and np.abs(goals).max() <= 1.0
    np.testing.assert_array_equal(
        goals, make("point_robot", num_goals=50, goals="uniform").goal_positions()
    )
    other = make("point_robot", num_goals=50, goals="uniform", goal_seed=1)
    assert not np.allclose(goals, other.goal_positions())
    radii = np.linalg.norm(goals, axis=1)
    assert radii.min() < 0.4 and radii.max() > 1.1  # not on one circle
    params = jax.vmap(env.params_for_task)(jnp.arange(50))
    np.testing.assert_array_equal(params.goal, goals)
    # random starts inside the box, a new one every episode
    obs, _ = jax.vmap(env.reset, (0, None))(
        jax.random.split(jax.random.key(0), 256), env.default_params
    )
    assert np.abs(np.asarray(obs)).max() <= 0.1 and np.std(np.asarray(obs)) > 0.04
    one = jax.tree.map(lambda x: jnp.broadcast_to(x[3], (512, *x.shape[1:])), params)
    returns, _ = _returns(env, oracle_policy(env), one, jax.random.key(4))
    best = float(env.optimal_return(jax.tree.map(lambda x: x[3], params)))
    assert abs(float(returns.mean()) - best) < 4 * float(returns.std()) / np.sqrt(512)
    rand, _ = _returns(env, random_policy(env), one, jax.random.key(5))
    assert float(rand.mean()) < best - 1.0


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"horizon": 0}, "horizon"),
        ({"num_goals": 1}, "num_goals"),
        ({"goals": "ring"}, "goals"),
        ({"start_range": -0.1}, "start_range"),
    ],
)
def test_point_robot_rejects_bad_arguments(kwargs, field):
    with pytest.raises(ValueError, match=field):
        make("point_robot", **kwargs)


# ------------------------------------------------------------------ contextual
@pytest.mark.parametrize("name", CONTEXTUAL)
@pytest.mark.parametrize("mode", ["all", "one"])
def test_contextual_sampling_modes(name, mode):
    env = make(name, mode=mode)
    params = jax.jit(jax.vmap(env.sample_params))(
        jax.random.split(jax.random.key(0), 256)
    )
    ctx = np.asarray(jax.vmap(env.context)(params))  # [task, num_context]
    default = np.array(list(env.defaults.values()), np.float32)
    low = np.array([env.ranges[v][0] for v in env.defaults], np.float32)
    high = np.array([env.ranges[v][1] for v in env.defaults], np.float32)
    assert ((ctx >= low - 1e-6) & (ctx <= high + 1e-6)).all()
    changed = (~np.isclose(ctx, default)).sum(1)
    if mode == "one":
        assert (changed == 1).mean() > 0.95 and changed.max() == 1
        assert (np.bincount((~np.isclose(ctx, default)).argmax(1)) > 0).all()
    else:
        assert (changed == len(default)).mean() > 0.95
    if mode == "all":  # different contexts, different dynamics from one start
        obs = jax.jit(jax.vmap(lambda p: _obs_after_steps(env, p)))(
            jax.tree.map(lambda x: x[:8], params)
        )
        assert np.unique(np.asarray(obs).round(6), axis=0).shape[0] == 8


def _obs_after_steps(env, params, num_steps=3):
    """The same keys for every ``params``: only the dynamics differ."""
    k_reset, k_act, *k_steps = jax.random.split(jax.random.key(0), 2 + num_steps)
    obs, state = env.reset(k_reset, params)
    action = env.action_space(params).sample(k_act)
    for k in k_steps:
        obs, state, *_ = env.step(k, state, action, params)
    return obs


def test_contextual_derived_fields_and_options():
    env = make(
        "cartpole_contextual",
        variables=("length",),
        ranges={"length": (1.0, 1.0)},
        observe_context=True,
    )
    p = env.sample_params(jax.random.key(0))
    np.testing.assert_allclose(p.physics.polemass_length, 0.1 * 1.0, rtol=1e-6)
    np.testing.assert_allclose(p.physics.total_mass, 1.1, rtol=1e-6)
    obs, _ = env.reset(jax.random.key(0), p)
    assert obs.shape == env.observation_space(p).shape == (8,)
    np.testing.assert_allclose(obs[4:], [1.0, 1.0, 1.0, 2.0], rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"mode": "some"}, "mode"),
        ({"variables": ("mass",)}, "variables"),
        ({"ranges": {"gravity": (2.0, 1.0)}}, "ranges"),
        ({"horizon": 0}, "horizon"),
    ],
)
def test_contextual_rejects_bad_arguments(kwargs, field):
    with pytest.raises(ValueError, match=field):
        make("cartpole_contextual", **kwargs)
