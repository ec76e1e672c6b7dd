"""Q-learning learns Dark Room within a history; the AD-ε oracle anneals."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs
from agentrl.envs import random_policy, rollout
from agentrl.sources.registry import generate
from agentrl.sources.tabular import linear_epsilon

EPISODES = 100  # the default schedule reaches >= 90% of oracle within this


@pytest.mark.long
def test_q_learning_reaches_90_percent_of_oracle_on_darkroom():
    env = envs.make("darkroom")  # 9x9, horizon 20, centre start
    ids = jnp.arange(env.num_tasks)  # every goal once
    params = jax.vmap(env.params_for_task)(ids)
    history = generate("q_learning", env, params, jax.random.key(0), EPISODES, ids)
    assert history.obs.shape == (81, EPISODES * 20)
    returns = np.asarray(history.episode_returns(EPISODES))  # [task, episode]
    oracle = np.asarray(jax.vmap(env.optimal_return)(params))
    keys = jax.random.split(jax.random.key(1), 81)
    rand = jax.vmap(lambda p, k: rollout(env, random_policy(env), p, k, 20 * 20))(
        params, keys
    )
    random_return = float(np.asarray(rand.reward).sum() / (81 * 20))
    start = returns[:, :5].mean()
    end = returns[:, -10:].mean()
    assert start <= random_return + 0.5, (start, random_return)
    assert end >= 0.9 * oracle.mean(), (end, oracle.mean())
    # it improves within the history, not by chance on a few tasks
    assert (returns[:, -10:].mean(1) > returns[:, :5].mean(1)).mean() > 0.9


def test_q_learning_on_key_to_door_improves():
    # the Markov form (has-key bit observed) is the one for tabular sources
    env = envs.make(
        "dark_key_to_door", size=5, horizon=30, start="center", observe_key=True
    )
    ids = jnp.arange(0, env.num_tasks, 37)
    params = jax.vmap(env.params_for_task)(ids)
    history = generate("q_learning", env, params, jax.random.key(0), 150, ids)
    returns = np.asarray(history.episode_returns(150))
    assert returns[:, -15:].mean() > returns[:, :10].mean() + 0.5


def test_linear_epsilon_schedule():
    eps = linear_epsilon(jnp.arange(12), 1.0, 0.1, 9)
    np.testing.assert_allclose(eps[0], 1.0)
    np.testing.assert_allclose(eps[9:], 0.1, atol=1e-6)
    assert np.all(np.diff(np.asarray(eps[:10])) < 0)


def test_noisy_oracle_anneals_from_random_to_oracle():
    env = envs.make("darkroom")
    ids = jnp.arange(81)
    params = jax.vmap(env.params_for_task)(ids)
    n = 50
    history = generate("noisy_oracle", env, params, jax.random.key(0), n, ids)
    agree = np.asarray(history.action == history.optimal_action).reshape(81, n, 20)
    per_episode = agree.mean((0, 2))
    # epsilon = 1 at episode 0: agreement ~ 1/5 (+ no-op at goal coincidences)
    assert per_episode[0] < 0.35
    # floor 0 reached after 90% of the episodes: pure oracle
    assert per_episode[-4:].min() == 1.0
    returns = np.asarray(history.episode_returns(n))
    oracle = np.asarray(jax.vmap(env.optimal_return)(params))
    np.testing.assert_allclose(returns[:, -1], oracle)
    # monotone trend in between
    assert per_episode[10] < per_episode[25] < per_episode[40]


def test_noisy_oracle_per_step_schedule_falls_inside_episodes():
    """AD-ε's reference decays epsilon per step, over 90% of the history."""
    from agentrl.sources.registry import make_agent

    env = envs.make("darkroom", horizon=20)
    agent = make_agent("noisy_oracle", env, 10, epsilon_end=0.3, schedule="step")
    # 9 episodes = 180 steps of decay: step 90 is half-way, step 10 inside ep. 0
    eps = [float(agent.epsilon(jnp.int32(t))) for t in (0, 10, 90, 180, 199)]
    np.testing.assert_allclose(eps, [1.0, 1 - 0.7 * 10 / 180, 0.65, 0.3, 0.3], 1e-6)
    ids = jnp.arange(81)
    params = jax.vmap(env.params_for_task)(ids)
    history = generate(
        "noisy_oracle",
        env,
        params,
        jax.random.key(1),
        10,
        ids,
        epsilon_end=0.3,
        schedule="step",
    )
    agree = np.asarray(history.action == history.optimal_action).reshape(81, 10, 20)
    assert agree[:, 0].mean() < 0.3  # epsilon 1.0 -> 0.93: ~uniform actions
    # the floor: oracle w.p. 0.7 + 0.3 / 5 (a uniform action can agree)
    assert abs(agree[:, -1].mean() - 0.76) < 0.04
    with pytest.raises(ValueError, match="schedule"):
        make_agent("noisy_oracle", env, 10, schedule="x")


def test_noisy_oracle_per_step_count_skips_what_an_early_episode_left():
    """AD-ε's Key-to-Door generator takes off the steps an episode did not
    use when it ends early, so epsilon stays linear in episodes: the count
    rises a step at a time and jumps to the next episode's start at a done."""
    from agentrl.agents.agent import Step
    from agentrl.sources.registry import make_agent

    env = envs.make("dark_key_to_door", size=9, horizon=50)
    agent = make_agent("noisy_oracle", env, 10, epsilon_end=0.3, schedule="step")

    def after(count, done):
        flag = jnp.bool_(done)
        step = Step(None, None, None, None, flag, jnp.bool_(False), None)
        return int(agent.update(jnp.int32(count), step))

    assert after(7, False) == 8 and after(7, True) == 50  # ended early
    assert after(49, True) == 50 and after(57, True) == 100
    assert after(50, False) == 51
