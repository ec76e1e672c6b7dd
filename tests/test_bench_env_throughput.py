"""benchmarks/env_throughput.py's MuJoCo comparison against Brax's training
env: the per-env physics it hands Brax's domain-randomisation wrapper are
our tasks', batched over the randomised fields only; the runners (ours,
Brax's bare step, Brax's training env, Brax's bare step on our task
physics) run (long: MJX compiles for minutes on 2 cores)."""

import jax
import numpy as np
import pytest
from env_throughput import (
    brax_task_runner,
    brax_wrapped_runner,
    mujoco_runners,
    task_physics,
)

from agentrl import envs


def test_task_physics_are_our_tasks_batched_over_the_randomised_fields():
    env = envs.make("hopper_params")
    sys_v, in_axes = task_physics(env, 3)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(1), 3))
    for field in env.randomise:
        assert getattr(in_axes, field) == 0
        np.testing.assert_array_equal(getattr(sys_v, field), getattr(params, field))
    rest = in_axes.replace(**{f: None for f in env.randomise})
    assert all(x is None for x in jax.tree.leaves(rest, is_leaf=lambda x: x is None))
    assert np.asarray(sys_v.body_mass).shape == (3, env.sys.nbody)
    assert np.ptp(np.asarray(sys_v.body_mass).sum(1)) > 0  # three bodies


@pytest.mark.long
@pytest.mark.parametrize("name", ["hopper_params", "halfcheetah_vel"])
def test_the_three_runners_run(name):
    env = envs.make(name, horizon=2)
    runners = (*mujoco_runners(env, 2, 3), brax_wrapped_runner(env, 2, 3))
    for run in runners:
        assert np.isfinite(float(run(jax.random.key(0))))


@pytest.mark.long
def test_brax_on_task_physics_moves_differently_and_restores_its_sys():
    env = envs.make("hopper_params", horizon=2)
    own = env.brax_env.sys
    _, bare = mujoco_runners(env, 2, 3)
    on_tasks = brax_task_runner(env, 2, 3)
    # equal keys, not one key twice (each runner consumes its own)
    total, bare_total = (
        float(on_tasks(jax.random.key(0))),
        float(bare(jax.random.key(0))),
    )
    assert np.isfinite(total) and total != bare_total  # other masses, other motion
    assert env.brax_env.sys is own  # swapped only while tracing


@pytest.mark.long
def test_brax_on_its_default_physics_as_data_moves_as_its_constant_self():
    env = envs.make("hopper_params", horizon=2)
    _, bare = mujoco_runners(env, 2, 3)
    as_data = brax_task_runner(env, 2, 3, default=True)
    total, bare_total = (
        float(as_data(jax.random.key(0))),
        float(bare(jax.random.key(0))),
    )
    # the same physics and keys: equal up to how XLA orders the float work
    np.testing.assert_allclose(total, bare_total, rtol=1e-4)
