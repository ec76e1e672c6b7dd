"""Contextual classic control at the default context equals gymnax exactly."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from agentrl.envs import make
from agentrl.envs.contextual import ContextualParams, ContextualState

CONTEXTUAL = (
    "cartpole_contextual",
    "pendulum_contextual",
    "mountaincar_contextual",
    "acrobot_contextual",
)


# CartPole in `make test`, the other three in `make test-long`
@pytest.mark.long
@pytest.mark.parametrize(
    "name",
    [
        n if n == "cartpole_contextual" else pytest.param(n, marks=pytest.mark.long)
        for n in CONTEXTUAL
    ],
)
def test_contextual_default_equals_gymnax_step_by_step(name):
    import gymnax

    env = make(name)
    ref, ref_params = gymnax.make(env.gymnax_id)
    params = env.default_params
    assert isinstance(params, ContextualParams)
    assert env.horizon == ref_params.max_steps_in_episode
    key = jax.random.key(7)
    k0, key = jax.random.split(key)
    obs, state = env.reset(k0, params)
    robs, rstate = ref.reset(jax.random.clone(k0), ref_params)  # the same key
    assert isinstance(state, ContextualState)
    np.testing.assert_array_equal(obs, robs)
    num_steps = 120
    actions = jax.vmap(ref.action_space(ref_params).sample)(
        jax.random.split(jax.random.key(8), num_steps)
    )
    # Each step jitted on its own, as a user calls it (one fused scan over
    # both envs lets XLA reorder float ops differently for the two graphs).
    dones = []
    for k, a in zip(jax.random.split(key, num_steps), actions, strict=True):
        out = env.step(k, state, a, params)
        rout = ref.step(jax.random.clone(k), rstate, a, ref_params)
        state, rstate = out[1], rout[1]
        for i in (0, 2, 3):  # obs, reward, terminated: bitwise equal
            np.testing.assert_array_equal(out[i], rout[i])
        np.testing.assert_array_equal(
            out[5]["final_observation"], rout[5]["final_observation"]
        )
        assert bool(out[3] | out[4]) == bool(rout[3] | rout[4])
        assert int(state.time) == int(rstate.time)
        dones.append(bool(out[3] | out[4]))
    done = np.array(dones)
    if name == "cartpole_contextual":
        assert done.sum() >= 3  # the comparison crossed several auto-resets
