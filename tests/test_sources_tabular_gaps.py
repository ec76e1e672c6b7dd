"""Q-learning and the AD-ε oracle step by step: the TD update, the choice odds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs
from agentrl.agents.agent import Step
from agentrl.sources.registry import make_agent
from agentrl.sources.tabular import NoisyOracle, QLearning, QState

Q = np.array([[0.0, 0.0], [1.0, 3.0], [2.0, -1.0]])  # [state, action]


def _step(obs, action, reward, next_obs, terminated=False, truncated=False):
    return Step(
        jnp.int32(obs),
        jnp.int32(action),
        jnp.float32(reward),
        jnp.int32(next_obs),
        jnp.bool_(terminated),
        jnp.bool_(truncated),
        None,
    )


@pytest.mark.parametrize(
    "terminated, truncated, target",
    [
        (False, False, 1.0 + 0.9 * 3.0),  # bootstraps from max_a Q(s', a)
        (False, True, 1.0 + 0.9 * 3.0),  # a cut episode bootstraps too
        (True, False, 1.0),  # a terminal state's value does not count
    ],
)
def test_q_update_by_hand(terminated, truncated, target):
    agent = QLearning(num_states=3, num_actions=2, learning_rate=0.5, discount=0.9)
    state = QState(q=jnp.asarray(Q, jnp.float32), episode=jnp.int32(4))
    new = agent.update(state, _step(0, 1, 1.0, 1, terminated, truncated))
    want = Q.copy()
    want[0, 1] += 0.5 * (target - Q[0, 1])  # only (s, a) moves, by lr * TD error
    np.testing.assert_allclose(new.q, want, rtol=1e-6)
    # epsilon's clock counts finished episodes, however they end
    assert int(new.episode) == 4 + (terminated or truncated)


def _action_shares(agent, state, obs, seed, draws=20_000):
    keys = jax.random.split(jax.random.key(seed), draws)
    actions = jax.vmap(lambda k: agent.act(k, state, jnp.int32(obs), None, None))(keys)
    return np.bincount(np.asarray(actions), minlength=agent.num_actions) / draws


def test_q_learning_choice_odds():
    """Greedy w.p. ``1 - eps`` (ties at random), a uniform action w.p. ``eps``."""
    agent = QLearning(4, 4, epsilon_start=0.4, epsilon_end=0.4)
    q = jnp.array([[0.0, 0.5, 2.0, 1.0], [1.0, 1.0, 1.0, 1.0]] + [[0.0] * 4] * 2)
    state = QState(q=q, episode=jnp.int32(0))
    np.testing.assert_allclose(
        _action_shares(agent, state, 0, 1), [0.1, 0.1, 0.7, 0.1], atol=0.015
    )
    np.testing.assert_allclose(_action_shares(agent, state, 1, 2), 0.25, atol=0.015)


def test_q_learning_epsilon_by_finished_episodes():
    agent = QLearning(2, 2, epsilon_start=0.8, epsilon_end=0.2, decay_episodes=10)
    q = jnp.zeros((2, 2))
    eps = [float(agent.epsilon(QState(q, jnp.int32(e)))) for e in (0, 5, 10, 30)]
    np.testing.assert_allclose(eps, [0.8, 0.5, 0.2, 0.2], rtol=1e-6)
    fresh = agent.init(jax.random.key(3), None)
    np.testing.assert_array_equal(fresh.q, np.ones((2, 2)))  # initial_q = 1
    assert int(fresh.episode) == 0


def test_registry_settings_reach_q_learning_and_the_noisy_oracle():
    env = envs.make("darkroom", size=5, horizon=6)
    agent = make_agent(
        "q_learning",
        env,
        40,
        learning_rate=0.3,
        discount=0.7,
        epsilon_start=0.9,
        epsilon_end=0.05,
        explore_fraction=0.25,
        initial_q=0.5,
    )
    assert agent == QLearning(25, 5, 0.3, 0.7, 0.9, 0.05, 10, 0.5)
    np.testing.assert_array_equal(agent.init(jax.random.key(4), None).q, 0.5)
    oracle = make_agent("noisy_oracle", env, 20, epsilon_end=0.2, decay_fraction=0.5)
    assert oracle == NoisyOracle(env, 10, epsilon_end=0.2)


def test_noisy_oracle_counts_every_finished_episode():
    oracle = NoisyOracle(envs.make("darkroom", size=5, horizon=6), 10)
    for terminated, truncated, add in [(0, 0, 0), (1, 0, 1), (0, 1, 1), (1, 1, 1)]:
        step = _step(0, 0, 0.0, 0, terminated, truncated)
        assert int(oracle.update(jnp.int32(3), step)) == 3 + add
