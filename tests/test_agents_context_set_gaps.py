"""DPT's context set step by step: the query after a full context, a fixed context."""

import jax
import jax.numpy as jnp
import numpy as np
from test_evaluate_fakes import EmpiricalMeanDPT

from agentrl import envs
from agentrl.agents.agent import Step
from agentrl.agents.context_set import DPTModelAgent, empty_context

ARMS, SIZE, TASKS, STRENGTH = 3, 3, 2, 20.0
PULLS = [(0, 1.0), (1, 0.0), (2, 1.0), (2, 1.0), (1, 1.0)]  # (arm, reward)


def _bandit():
    env = envs.make("bernoulli_bandit", num_arms=ARMS, horizon=10)
    keys = jax.random.split(jax.random.key(11), TASKS)
    return (
        env,
        jax.vmap(env.sample_params)(keys),
        jax.random.split(jax.random.key(12), TASKS),
    )


def _step(obs, arm, reward, done=False):
    a = jnp.full((TASKS,), arm, jnp.int32)
    r = jnp.full((TASKS,), reward, jnp.float32)
    no = jnp.zeros((TASKS,), bool)
    return Step(obs, a, r, obs, no, no | done, obs)


def _empirical_mean(pulls):
    """The fake's logits after ``pulls``: strength (sum + 0.5) / (count + 1)."""
    sums, counts = np.zeros(ARMS), np.zeros(ARMS)
    for arm, reward in pulls:
        sums[arm] += reward
        counts[arm] += 1
    return STRENGTH * (sums + 0.5) / (counts + 1.0)


def test_a_full_context_scores_the_query_after_its_last_transitions():
    env, params, keys = _bandit()
    agent = DPTModelAgent(EmpiricalMeanDPT(ARMS), env, SIZE, "step", greedy=True)
    state = agent.init(keys, params)
    obs, _ = jax.vmap(env.reset)(keys, params)
    update = jax.jit(agent.update)
    for n in range(1, len(PULLS) + 1):
        state = update(state, _step(obs, *PULLS[n - 1]))
        # the last SIZE pulls, all of them read (the query after the last)
        want = _empirical_mean(PULLS[max(0, n - SIZE) : n])
        got = agent.scores(state, obs, None, params)
        np.testing.assert_allclose(got, np.tile(want, (TASKS, 1)), rtol=1e-6)


def test_a_fixed_context_is_never_updated():
    env, params, keys = _bandit()
    ctx = empty_context(env, keys, params, SIZE)
    ctx = ctx._replace(
        action=jnp.array([[0, 2, 0]] * TASKS, jnp.int32),
        reward=jnp.array([[0.0, 1.0, 0.0]] * TASKS),
        count=jnp.full((TASKS,), 2, jnp.int32),
    )
    agent = DPTModelAgent(
        EmpiricalMeanDPT(ARMS), env, context=ctx, context_update="none"
    )
    state = agent.init(keys, params)
    obs, _ = jax.vmap(env.reset)(keys, params)
    want = np.tile(_empirical_mean([(0, 0.0), (2, 1.0)]), (TASKS, 1))
    for arm, reward in PULLS:  # each pull a whole episode: still not read
        state = agent.update(state, _step(obs, arm, reward, done=True))
        np.testing.assert_allclose(agent.scores(state, obs, None, params), want)
        np.testing.assert_array_equal(state.context.count, 2)
