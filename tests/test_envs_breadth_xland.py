"""XLand-MiniGrid adapter (skipped only when `xminigrid` is not installed)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl.envs import make

xminigrid = pytest.importorskip("xminigrid")


@pytest.mark.long
def test_xland_rulesets_are_tasks():
    env = make("xland", num_rulesets=64, ruleset_seed=3)
    assert env.num_tasks == 64 and env.horizon == 243
    split = env.task_split(0.75, seed=0)
    assert (len(split.train), len(split.test)) == (48, 16)
    params = jax.vmap(env.params_for_task)(jnp.arange(64))
    goals = np.asarray(params.ruleset.goal)
    assert set(goals[:, 0]) == {1, 3}  # pick-up and stand-next-to goals
    tiles = np.asarray(params.ruleset.init_tiles)  # [task, object, 2]
    np.testing.assert_array_equal(tiles[:, 0], goals[:, 1:3])
    assert not (tiles[:, 1:] == tiles[:, :1]).all(-1).any()  # distractors differ
    again = make("xland", num_rulesets=64, ruleset_seed=3)
    np.testing.assert_array_equal(
        again.params_for_task(5).ruleset.goal, params.ruleset.goal[5]
    )


@pytest.fixture(scope="module")
def env():
    """One instance, so every test reuses its compiled ``step``."""
    return make("xland", num_rulesets=16, horizon=30)


@pytest.mark.long
def test_xland_matches_xminigrid_and_auto_resets(env):
    params = env.params_for_task(jnp.int32(2))
    ref, ref_params = xminigrid.make("XLand-MiniGrid-R1-9x9", max_steps=30)
    ref_params = ref_params.replace(ruleset=params.ruleset)
    obs, state = env.reset(jax.random.key(0), params)
    timestep = jax.jit(ref.reset)(ref_params, jax.random.key(0))
    np.testing.assert_array_equal(obs, timestep.observation)
    assert obs.shape == env.observation_space(params).shape == (5, 5, 2)
    actions = jax.random.randint(jax.random.key(1), (40,), 0, 6)
    ref_step = jax.jit(ref.step)
    for t, a in enumerate(actions):
        obs, state, reward, term, trunc, info = env.step(
            jax.random.key(t), state, a, params
        )
        timestep = ref_step(ref_params, timestep, a)
        np.testing.assert_array_equal(info["final_observation"], timestep.observation)
        assert float(reward) == float(timestep.reward)
        assert bool(term) == bool(timestep.discount == 0.0)
        if bool(term | trunc):
            assert int(state.time) == 0
            break
    assert bool(term | trunc)  # 30-step episodes end within 40 steps


@pytest.mark.long
def test_xland_goal_reached_pays_and_terminates(env):
    # Random play over the rulesets reaches some goals: the reward
    # 1 - 0.9 t / horizon is paid exactly on the terminating step.
    rng = np.random.default_rng(0)
    successes = 0
    for task in range(env.num_tasks):
        params = env.params_for_task(jnp.int32(task))
        _, state = env.reset(jax.random.key(task), params)
        for t in range(3 * env.horizon):
            _, state, reward, term, trunc, _ = env.step(
                jax.random.key(t), state, int(rng.integers(6)), params
            )
            assert (float(reward) > 0) == bool(term)
            successes += bool(term)
            if term:
                assert 0.1 <= float(reward) <= 1.0
    assert successes >= 1


def test_xland_rollout_passes_the_key_reuse_checker():
    """xminigrid's state carries a (typed) key; a scan of auto-resetting
    steps over it used to raise under ``jax_debug_key_reuse`` (the reset's
    select)."""
    env = make("xland", num_rulesets=4, horizon=5)
    params = env.params_for_task(jnp.int32(1))

    def run(key):
        k_reset, k_steps = jax.random.split(key)
        _, state = env.reset(k_reset, params)

        def body(state, k):
            k_act, k_step = jax.random.split(k)
            action = jax.random.randint(k_act, (), 0, 6)
            _, state, reward, *_ = env.step(k_step, state, action, params)
            return state, reward

        return jax.lax.scan(body, state, jax.random.split(k_steps, 12))

    with jax.debug_key_reuse(True):
        state, rewards = jax.jit(run)(jax.random.key(0))
    assert rewards.shape == (12,) and jax.dtypes.issubdtype(
        state.inner.key.dtype, jax.dtypes.prng_key
    )


def test_minigrid_env_and_bad_arguments():
    env = make("xland", env_id="MiniGrid-Empty-5x5")
    assert env.num_tasks == 1 and env.params_for_task(0).ruleset is None
    obs, _ = env.reset(jax.random.key(0), env.sample_params(jax.random.key(1)))
    assert obs.shape == (7, 7, 2) and obs.dtype == jnp.uint8
    with pytest.raises(ValueError, match="env_id"):
        make("xland", env_id="XLand-MiniGrid-R1-8x8")
    with pytest.raises(ValueError, match="rulesets"):
        make("xland", rulesets="trivial-2m")
    with pytest.raises(ValueError, match="rulesets"):
        make("xland", env_id="MiniGrid-Empty-5x5", rulesets="trivial-1m")
    with pytest.raises(ValueError, match="num_rulesets"):
        make("xland", num_rulesets=0)
