"""Oracle tests: optimal_action achieves optimal_return, checked by hand."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs


def _oracle_returns(env, params, num_steps):
    keys = jax.random.split(jax.random.key(0), jax.tree.leaves(params)[0].shape[0])
    policy = envs.oracle_policy(env)
    tr = jax.jit(jax.vmap(lambda p, k: envs.rollout(env, policy, p, k, num_steps)))(
        params, keys
    )
    return jax.vmap(lambda r, d: envs.episode_returns(r, d, 1))(tr.reward, tr.done)[
        :, 0
    ]


@pytest.mark.parametrize("name", ["darkroom", "darkroom_hard"])
@pytest.mark.parametrize("size,horizon,start", [(9, 20, "center"), (10, 100, "corner")])
def test_darkroom_oracle_achieves_optimal_return_on_every_goal(
    name, size, horizon, start
):
    env = envs.make(name, size=size, horizon=horizon, start=start)
    params = jax.vmap(env.params_for_task)(jnp.arange(env.num_tasks))
    got = _oracle_returns(env, params, horizon)
    want = jax.vmap(env.optimal_return)(params)
    np.testing.assert_allclose(got, want)


def _hand_darkroom_value(size, horizon, start):
    c = size // 2 if start == "center" else 0
    total = 0.0
    for gx, gy in itertools.product(range(size), range(size)):
        d = abs(gx - c) + abs(gy - c)
        arrive = max(d, 1)  # standing on the goal pays from step `arrive` on
        total += sum(1.0 for t in range(1, horizon + 1) if t >= arrive)
    return total / size**2


def test_darkroom_mean_optimal_return_matches_hand_computation():
    env = envs.make("darkroom")
    params = jax.vmap(env.params_for_task)(jnp.arange(env.num_tasks))
    got = float(jnp.mean(_oracle_returns(env, params, env.horizon)))
    assert got == pytest.approx(_hand_darkroom_value(9, 20, "center"))
    # 9x9 centre start: mean distance 40/9, so 21 - 40/9 - 1/81 = 1340/81.
    assert got == pytest.approx(1340 / 81)


def test_key_to_door_oracle_on_many_tasks():
    env = envs.make("dark_key_to_door", start="center", observe_key=True)
    ids = jax.random.choice(jax.random.key(0), env.num_tasks, (512,), replace=False)
    params = jax.vmap(env.params_for_task)(ids)
    got = _oracle_returns(env, params, env.horizon)
    np.testing.assert_allclose(got, jax.vmap(env.optimal_return)(params))
    assert set(np.unique(np.asarray(got))) <= {0.0, 1.0, 2.0}
    # Key and door are always distinct cells.
    assert not np.any(np.all(np.asarray(params.key) == np.asarray(params.door), -1))


def test_key_to_door_short_horizon_gives_partial_return():
    env = envs.make("dark_key_to_door", size=9, horizon=6, start="center")
    # Key 1 step right of the centre, door far away: only the key is reachable.
    center = 4 * 9 + 4
    key_cell, door_cell = center + 1, 0
    rank = door_cell - (door_cell > key_cell)
    params = env.params_for_task(jnp.int32(key_cell * 80 + rank))
    assert float(env.optimal_return(params)) == 1.0
    got = _oracle_returns(env, jax.tree.map(lambda x: x[None], params), 6)
    assert float(got[0]) == 1.0


@pytest.mark.long
def test_key_to_door_reference_form_hides_the_key_and_starts_anywhere():
    """The ICRL form (AD's reference): the cell alone, a random start cell."""
    env = envs.make("dark_key_to_door", size=5, horizon=6)
    assert env.observation_space().n == 25 and env.stochastic_reset
    params = env.params_for_task(jnp.int32(7 * 24 + 3))
    keys = jax.random.split(jax.random.key(3), 400)
    obs, state = jax.vmap(env.reset, (0, None))(keys, params)
    np.testing.assert_array_equal(obs, state.pos[:, 1] * 5 + state.pos[:, 0])
    assert len(np.unique(np.asarray(obs))) == 25  # every cell is a start
    # the oracle's mean return over random starts is the expectation
    batch = jax.tree.map(lambda x: jnp.broadcast_to(x, (400, *x.shape)), params)
    got = _oracle_returns(env, batch, env.horizon)
    want = float(env.optimal_return(params))
    assert 1.0 < want < 2.0  # some starts are too far for the door
    assert abs(float(jnp.mean(got)) - want) < 3 * float(jnp.std(got)) / 20
    markov = envs.make("dark_key_to_door", size=5, horizon=6, observe_key=True)
    assert markov.observation_space().n == 50
    with pytest.raises(ValueError, match="observe_key"):
        envs.make("dark_key_to_door", observe_key=1)


@pytest.mark.long
@pytest.mark.parametrize("name", ["bernoulli_bandit", "gaussian_bandit"])
def test_bandit_oracle_expected_return(name):
    env = envs.make(name, num_arms=5, horizon=200)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 256))
    got = _oracle_returns(env, params, 200)
    want = jax.vmap(env.optimal_return)(params)
    # Mean over 256 tasks x 200 pulls: the sample mean is within 3 SE.
    assert abs(float(jnp.mean(got - want))) < 3 * 0.5 * np.sqrt(200) / 16
    np.testing.assert_array_equal(
        jax.vmap(env.optimal_action, (None, 0))(None, params),
        jnp.argmax(params.means, -1),
    )


def test_gaussian_bandit_dpt_setting():
    env = envs.make("gaussian_bandit", num_arms=5, horizon=500, noise_variance=0.3)
    p = env.sample_params(jax.random.key(0))
    assert p.means.shape == (5,)
    assert float(p.noise_std) ** 2 == pytest.approx(0.3, rel=1e-6)
    keys = jax.random.split(jax.random.key(1), 4000)
    _, state = env.reset(jax.random.key(2), p)
    rewards = jax.vmap(lambda k: env.step(k, state, 2, p)[2])(keys)
    assert float(jnp.var(rewards)) == pytest.approx(0.3, rel=0.1)
    assert float(jnp.mean(rewards)) == pytest.approx(float(p.means[2]), abs=0.05)
