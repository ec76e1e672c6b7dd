"""Contract tests: every registered environment obeys the gymnax 1.0 API."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs
from agentrl.envs.registry import MUJOCO_FAMILIES


def _make(name):
    try:
        return envs.make(name)
    except ImportError as e:  # optional extras (e.g. xminigrid)
        pytest.skip(f"{name}: optional dependency missing: {e}")


ALL = envs.registered()
# The MuJoCo families' MJX step compiles for minutes on a 2-core CPU, and they
# share one reset/step (agentrl/envs/mjx_base.py): one of them (a physics-
# parameter family, the widest path) runs the stepping contract, in `make
# test-long`; tests/test_envs_mujoco.py checks each against Brax.
MUJOCO_CONTRACT = "hopper_params"
STEPPED = [n for n in ALL if n not in MUJOCO_FAMILIES or n == MUJOCO_CONTRACT]
# XLand, the gymnax control families and MuJoCo compile for seconds to minutes
# a test: `make test` checks the contract on the native families, `make
# test-long` on the rest (tests/test_envs_breadth*.py step XLand and gymnax too)
SLOW = {
    "xland",
    "acrobot_contextual",
    "cartpole_contextual",
    "mountaincar_contextual",
    "pendulum_contextual",
    MUJOCO_CONTRACT,
}
NATIVE = [pytest.param(n, marks=pytest.mark.long) if n in SLOW else n for n in STEPPED]


def _np(x):
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):  # e.g. xland's state key
        x = jax.random.key_data(x)
    return np.asarray(x)


def _leaves_equal(a, b):
    return all(
        np.array_equal(_np(x), _np(y))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def _assert_close(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(_np(x), _np(y), rtol=1e-5, atol=1e-6)


def _check_obs(env, obs, params):
    space = env.observation_space(params)
    if hasattr(space, "spaces"):
        for k, s in space.spaces.items():
            assert jnp.shape(obs[k]) == s.shape, k
    else:
        assert jnp.shape(obs) == space.shape
        assert bool(space.contains(obs))


@pytest.mark.parametrize("name", NATIVE)
def test_reset_step_shapes_and_dtypes(name):
    env = _make(name)
    params = env.default_params
    k_reset, k_step = jax.random.split(jax.random.key(0))
    obs, state = env.reset(k_reset, params)
    _check_obs(env, obs, params)
    action = env.action_space(params).sample(jax.random.key(1))
    assert bool(env.action_space(params).contains(action))
    obs2, state2, reward, term, trunc, info = env.step(k_step, state, action, params)
    _check_obs(env, obs2, params)
    assert jnp.shape(reward) == () and jnp.issubdtype(
        jnp.asarray(reward).dtype, jnp.floating
    )
    assert (
        jnp.asarray(term).dtype == jnp.bool_ and jnp.asarray(trunc).dtype == jnp.bool_
    )
    assert "final_observation" in info
    assert jax.tree.structure(state2) == jax.tree.structure(state)
    if hasattr(env.action_space(params), "n"):
        assert env.num_actions == env.action_space(params).n


@pytest.mark.parametrize("name", NATIVE)
def test_truncation_auto_reset(name):
    env = _make(name)
    params = env.default_params
    obs0, state = env.reset(jax.random.key(0), params)
    policy = envs.random_policy(env)
    tr = jax.jit(lambda k: envs.rollout(env, policy, params, k, env.horizon))(
        jax.random.key(3)
    )
    done = np.asarray(tr.done)
    # Within `horizon` steps an episode ends exactly once at the last step, or
    # earlier by termination; truncation (the time limit, gymnax 1.0: it may
    # come with termination) can only be at the last step.
    assert done.any()
    assert not np.asarray(tr.truncated)[:-1].any()
    if not np.asarray(tr.terminated).any():
        assert np.asarray(tr.truncated)[-1] and done.sum() == 1


@pytest.mark.parametrize("name", NATIVE)
def test_final_observation_and_reset_obs(name):
    env = _make(name)
    params = env.default_params
    k_reset, key = jax.random.split(jax.random.key(0))
    obs, state = env.reset(k_reset, params)
    step = jax.jit(env.step)
    saw_done = False
    for _ in range(env.horizon):
        key, k_act, k_step = jax.random.split(key, 3)
        action = env.action_space(params).sample(k_act)
        pre_state = state
        replay = jax.random.clone(k_step)  # re-derives what the step drew
        obs, state, _, term, trunc, info = step(k_step, state, action, params)
        if bool(term | trunc):
            saw_done = True
            # The env was reset: state is a fresh episode's.
            assert int(state.time) == 0
            k_replay_step, k_replay_reset = jax.random.split(replay)
            _, fresh = env.reset(k_replay_reset, params)
            assert _leaves_equal(state, fresh)
            # final_observation is the observation the step really produced.
            stochastic = getattr(env, "stochastic_reset", True)
            key_step = k_replay_step if stochastic else jax.random.clone(k_step)
            final_direct = jax.jit(env.step_env)(key_step, pre_state, action, params)[0]
            _assert_close(info["final_observation"], final_direct)
            break
        _assert_close(info["final_observation"], obs)
    assert saw_done


@pytest.mark.parametrize("name", NATIVE)
def test_jit_vmap_over_keys_and_params_deterministic(name):
    env = _make(name)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(6), 8))
    keys = jax.random.split(jax.random.key(7), 8)
    again = jax.random.clone(keys)  # the same keys, run twice
    policy = envs.random_policy(env)
    run = jax.jit(jax.vmap(lambda p, k: envs.rollout(env, policy, p, k, 12)))
    a = run(params, keys)
    b = run(params, again)
    assert _leaves_equal(a, b)
    assert a.reward.shape == (8, 12)
    # Different tasks or keys give different data somewhere.
    other = run(params, jax.random.split(jax.random.key(8), 8))
    assert not _leaves_equal(a.action, other.action)


@pytest.mark.parametrize("name", ALL)
def test_sample_params_varies_task(name):
    env = _make(name)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 16))
    leaves = [np.asarray(x) for x in jax.tree.leaves(params)]
    assert any(len(np.unique(x.reshape(16, -1), axis=0)) > 1 for x in leaves)


def test_gymnax_env_plugs_in_unchanged():
    import gymnax

    env, params = gymnax.make("CartPole-v1")
    tr = jax.jit(lambda k: envs.rollout(env, envs.random_policy(env), params, k, 600))(
        jax.random.key(0)
    )
    assert tr.reward.shape == (600,)
    assert np.asarray(tr.done).sum() >= 2  # random CartPole episodes are short
    # The same env through the registry and inside the trial wrapper.
    env2 = envs.make("gymnax:CartPole-v1")
    trial = envs.MultiEpisodeTrial(env2, num_episodes=3)
    obs, state = trial.reset(jax.random.key(1), params)
    obs, state, *_ = trial.step(jax.random.key(2), state, jnp.int32(1), params)
    assert obs["obs"].shape == (4,) and int(obs["prev_action"]) == 1
