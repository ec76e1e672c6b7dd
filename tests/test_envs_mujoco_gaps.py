"""MuJoCo rewards on hand-made states and fresh-body draws, without stepping."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs


def _make(name, **kw):
    pytest.importorskip("brax")
    return envs.make(name, **kw)


def _pose(nq, q0=0.0, q=None, xy=(0.0, 0.0)):
    """A stand-in pipeline state: ``q [nq]`` and the torso pose ``x.pos``."""
    q = jnp.zeros(nq).at[0].set(q0) if q is None else jnp.asarray(q, jnp.float32)
    pos = jnp.zeros((2, 3)).at[0, :2].set(jnp.asarray(xy, jnp.float32))
    return SimpleNamespace(q=q, x=SimpleNamespace(pos=pos))


def test_halfcheetah_rewards_by_hand():
    vel = _make("halfcheetah_vel", num_tasks=0)
    nq, dt = int(vel.sys.nq), vel.dt
    before, after = _pose(nq), _pose(nq, q0=2.0 * dt)  # v = 2 m/s
    action = jnp.full(6, 0.5)  # control cost 0.05 * 6 * 0.25 = 0.075
    params = vel.params_of(3.0)
    assert float(vel.reward(before, after, action, params)) == pytest.approx(-1.075)
    direction = _make("halfcheetah_dir")
    backward = direction.params_for_task(1)
    got = direction.reward(before, after, action, backward)
    assert float(got) == pytest.approx(-2.075, rel=1e-5)


def test_ant_dir_reward_by_hand():
    env = _make("ant_dir", num_tasks=0)
    nq, dt = int(env.sys.nq), env.dt
    before, after = _pose(nq), _pose(nq, xy=(dt, 0.0))  # v = (1, 0) m/s
    action = jnp.full(8, 0.5)  # control cost 0.5 * 8 * 0.25 = 1
    params = env.params_of(jnp.pi / 3)  # heading (cos, sin): v . h = 0.5
    got = env.reward(before, after, action, params)
    assert float(got) == pytest.approx(0.5 - 1.0 + 1.0, rel=1e-5)


def test_walker_health_bonus_by_hand():
    env = _make("walker_params", num_tasks=0)
    nq, dt = int(env.sys.nq), env.dt
    rest = float(env.sys.body_pos[1, 2]) - float(env.sys.qpos0[1])
    zero = jnp.zeros(6)

    def reward(height, angle, other=0.0):
        q = np.zeros(nq, np.float32)
        q[0], q[1], q[2], q[3:] = dt, height - rest, angle, other
        return float(env.reward(_pose(nq), _pose(nq, q=q), zero, None))

    assert reward(1.25, 0.0) == pytest.approx(2.0, rel=1e-5)  # v = 1, healthy
    assert reward(0.75, 0.0) == pytest.approx(1.0, rel=1e-5)  # too low
    assert reward(1.25, 1.2) == pytest.approx(1.0, rel=1e-5)  # tilted
    assert reward(1.25, 0.0, other=1.5) == pytest.approx(2.0, rel=1e-5)  # legs bent


def test_hopper_reward_is_velocity_minus_control_cost():
    env = _make("hopper_params", num_tasks=0)
    nq, dt = int(env.sys.nq), env.dt
    got = env.reward(_pose(nq), _pose(nq, q0=dt), jnp.ones(3), None)
    assert float(got) == pytest.approx(1.0 - 3e-3, rel=1e-5)


def test_fresh_bodies_are_scaled_both_up_and_down():
    env = _make("hopper_params", num_tasks=0)
    drawn = jax.vmap(env.draw_params)(jax.random.split(jax.random.key(71), 64))
    ref = env.defaults["body_mass"]
    live = ref > 0
    log_factor = np.log(np.asarray(drawn.body_mass)[:, live] / ref[live]) / np.log(1.5)
    assert log_factor.min() >= -3 - 1e-4 and log_factor.max() <= 3 + 1e-4
    assert log_factor.min() < -2.5 and log_factor.max() > 2.5
    assert abs(log_factor.mean()) < 0.3  # U(-3, 3): mean 0, sd of the mean ~0.1
    total = jax.vmap(env.task_parameter)(drawn)
    want = np.asarray(drawn.body_mass).sum(-1) / ref.sum()
    np.testing.assert_allclose(total, want, rtol=1e-5)
