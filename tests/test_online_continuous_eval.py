"""Online learners over Box actions: evaluation acts with the trained Gaussian.

Transformer PPO:

The trainer's state-independent log std lives in its ``PolicyParams``; the
policy it hands to evaluation (``weights(state)``, what ``load_run`` and the
sweeps act with) must carry it, so that

- its outputs' ``log_std`` is the trainer's in the env's units (clipped as
  the training head clips it, plus log half the box width) and its mean is
  the training head's mean, exactly;
- the ``sample`` rule at temperature 1 draws the first action from the
  distribution training's rollout drew it from (same actor, same context:
  a two-sample Kolmogorov-Smirnov test per dimension, one dimension mostly
  unclipped, one mostly clipped to the box), with per-dimension std
  ``half x exp(log_std) x temperature``; ``greedy`` is the clipped mean;
- (long) a fitted, loaded run carries the trained std and its ``sample``
  and ``greedy`` evaluations differ.

Before the fix the exported policy was the bare ``DecisionModel`` (``"mse"``
head, no std): every rule acted by the mean.

RL² (its agent samples with the weights' ``log_std``): ``sample`` draws
with std ``temperature x std`` (before, the temperature was ignored).
"""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_online_transformer_continuous import MAX_ACTION, make_trainer

from agentrl.agents.agent import run_batched_agent
from agentrl.agents.model_agents import action_scores
from agentrl.algos import TransformerPPO
from agentrl.online.transformer import Acting, PolicyParams

N = 4096  # samples per distribution (envs of one training step, eval tasks)


def with_log_std(state, log_std):
    actor = state.actor
    assert isinstance(actor, PolicyParams)
    return state._replace(actor=actor._replace(log_std=jnp.asarray(log_std)))


def eval_config(rule, temperature=1.0, steps=8):
    return types.SimpleNamespace(
        model=types.SimpleNamespace(max_steps=steps),
        eval=types.SimpleNamespace(acting=rule, temperature=temperature),
    )


@pytest.mark.parametrize("log_std", [[-1.5, 1.0], [-7.0, 3.0]])
@pytest.mark.long
def test_the_policy_outputs_the_training_gaussian(log_std):
    trainer = make_trainer(update_every=8)
    state = with_log_std(trainer.init(jax.random.key(0), {}), log_std)
    obs = jax.random.normal(jax.random.key(1), (3, 8, 2))
    act = MAX_ACTION * jax.random.uniform(jax.random.key(2), (3, 8, 2), minval=-1)
    rew = jax.random.normal(jax.random.key(3), (3, 8))
    clipped = np.clip(log_std, -5.0, 2.0)
    space = trainer.head.space

    @jax.jit
    def gaussians(state):
        """The training head's mean (half box widths) of every step, and the
        policy's scores by its full pass and by step-by-step decoding."""
        mean = trainer.policy_scores(trainer.forward(state.actor, obs, act, rew))
        policy = trainer.weights(state)
        full = action_scores(policy(obs, act, rew), space)  # [B, T, 2, A]
        cache, steps = policy.init_cache(3, 8), []
        for t in range(8):
            prev_a = act[:, t - 1] if t else jnp.zeros((3, 2))
            prev_r = rew[:, t - 1] if t else jnp.zeros((3,))
            out, cache = policy.decode(cache, obs[:, t], prev_a, prev_r)
            steps.append(action_scores(out, space))
        return mean, full, jnp.stack(steps, 1)

    mean, full, step = gaussians(state)
    np.testing.assert_allclose(step, full, rtol=1e-5, atol=1e-6)
    for scores in (full, step):
        m, ls = np.asarray(scores[..., 0, :]), np.asarray(scores[..., 1, :])
        np.testing.assert_allclose(m / MAX_ACTION, mean, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(
            ls, np.broadcast_to(clipped + np.log(MAX_ACTION), ls.shape), rtol=1e-6
        )


def first_actions(trainer, state, rule, temperature, key):
    """The first action of ``N`` eval tasks, by the algorithm's own agent."""
    env = trainer.env
    agent = TransformerPPO().make_agent(
        trainer.weights(state), env, 1, eval_config(rule, temperature)
    )
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(7), N))
    run = jax.jit(lambda p, k: run_batched_agent(env, agent, p, k, 1)[0].action)
    return np.asarray(run(params, key))[:, 0]


def training_actions(trainer, state, key):
    """The env actions of the first step of a training trial in ``N`` envs."""
    env, n = trainer.env, trainer.shape.num_envs
    k_task, k_reset = jax.random.split(jax.random.key(8))
    tasks = jax.vmap(env.sample_params)(jax.random.split(k_task, n))
    obs, env_state = jax.vmap(env.reset)(jax.random.split(k_reset, n), tasks)
    carry = Acting(
        state.actor,
        trainer.model(state.actor).init_cache(n, trainer.shape.trial_steps),
        obs,
        env_state,
        jnp.zeros((n, 2), jnp.float32),
        jnp.zeros((n,), jnp.float32),
        trainer._empty_buffers(obs),
    )
    step = jax.jit(lambda c, k: trainer._act_step(tasks, c, (0, k))[0].buf["action"])
    return np.asarray(step(carry, key))[:, 0]


def ks_statistic(a, b):
    """Two-sample Kolmogorov-Smirnov statistic (ties included: atoms at the
    box bounds)."""
    grid = np.union1d(a, b)
    fa = np.searchsorted(np.sort(a), grid, side="right") / a.size
    fb = np.searchsorted(np.sort(b), grid, side="right") / b.size
    return np.abs(fa - fb).max()


@pytest.mark.long
def test_sample_draws_from_the_training_rollouts_distribution():
    # Point-Robot starts every task at the origin: the first step's Gaussian
    # is the same in every env / task, so N of them are N draws of it
    trainer = make_trainer(update_every=8, num_envs=N)
    log_std = np.array([-1.5, 0.5])  # std 0.022 (rarely clipped), 0.16 (often)
    state = with_log_std(trainer.init(jax.random.key(0), {}), log_std)
    train = training_actions(trainer, state, jax.random.key(11))
    sample = first_actions(trainer, state, "sample", 1.0, jax.random.key(12))
    greedy = first_actions(trainer, state, "greedy", 1.0, jax.random.key(13))
    assert train.shape == sample.shape == greedy.shape == (N, 2)
    # greedy: the mean (the same in every task), inside the box
    mean = greedy[0]
    np.testing.assert_array_equal(greedy, np.broadcast_to(mean, greedy.shape))
    assert np.abs(mean).max() < 0.2 * MAX_ACTION  # the head starts near the centre
    # sample: training's distribution. KS at N = 4096 per side: the 1e-4
    # critical value is 2.22 x sqrt(2 / N) = 0.049 (the mean alone: ~0.5)
    for d in range(2):
        assert ks_statistic(sample[:, d], train[:, d]) < 0.05, d
    # dimension 0: the unclipped Gaussian's std, MAX_ACTION x exp(-1.5) =
    # 0.0223 (its bounds >= 3.5 std from the mean); the std of 4096 draws
    # has a relative standard error of 1.1%: 6% is over 5 of them
    want = MAX_ACTION * np.exp(log_std[0])
    np.testing.assert_allclose(sample[:, 0].std(), want, rtol=0.06)
    np.testing.assert_allclose(train[:, 0].std(), want, rtol=0.06)
    np.testing.assert_allclose(sample[:, 0].mean(), mean[0], atol=4 * want / N**0.5)
    # dimension 1: mostly at the bounds, as in training (P(|x| > half) ~ 0.54)
    at_bounds = np.mean(np.isclose(np.abs(sample[:, 1]), MAX_ACTION))
    assert 0.45 < at_bounds < 0.63
    assert np.abs(sample).max() <= MAX_ACTION
    # temperature scales the std
    cool = first_actions(trainer, state, "sample", 0.5, jax.random.key(14))
    np.testing.assert_allclose(cool[:, 0].std(), 0.5 * want, rtol=0.06)


def test_the_policy_of_a_traced_state_carries_its_std():
    """Sweeps build each member's policy inside ``jit(vmap(...))``."""
    trainer = make_trainer(update_every=8)
    states = jax.vmap(lambda k: trainer.init(k, {}))(
        jax.random.split(jax.random.key(0), 2)
    )
    states = states._replace(
        actor=states.actor._replace(log_std=jnp.asarray([[-1.0, -2.0], [0.0, 1.0]]))
    )
    env = trainer.env
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(1), 3))

    def one(state):
        agent = TransformerPPO().make_agent(
            trainer.weights(state), env, 2, eval_config("sample")
        )
        agent_state = agent.init(jax.random.split(jax.random.key(2), 3), params)
        return agent.start(agent_state, jnp.zeros((3, 2))).scores[:, 1]

    log_std = np.asarray(jax.jit(jax.vmap(one))(states))
    want = np.log(MAX_ACTION) + np.array([[-1.0, -2.0], [0.0, 1.0]])
    np.testing.assert_allclose(log_std, np.broadcast_to(want[:, None], (2, 3, 2)))


@pytest.mark.long
def test_a_loaded_run_samples_with_its_trained_std(tmp_path):
    from test_online_transformer_continuous import point_robot_config

    from agentrl.evaluate.run import run_results
    from agentrl.online.transformer import GaussianPolicy
    from agentrl.train import fit
    from agentrl.train.rundir import load_run

    config = point_robot_config("tppo-point-std", lr=1e-2)
    fit(config, tmp_path / "run", progress=False)
    run = load_run(tmp_path / "run")
    assert isinstance(run.model, GaussianPolicy)
    half = np.asarray(run.env.action_space(None).high, np.float32)
    trained = np.asarray(run.model.log_std[...]) - np.log(half)
    assert np.isfinite(trained).all()
    assert not np.allclose(trained, -0.5)  # trained away from init_log_std
    returns = {}
    for rule in ("sample", "greedy"):
        results, _ = run_results(
            tmp_path / "run", eval_overrides={"acting": rule}, run=run
        )
        returns[rule] = results["transformer_ppo"].returns
        assert np.isfinite(returns[rule]).all()
    assert not np.allclose(returns["sample"], returns["greedy"])


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_rl2_samples_with_its_std_at_the_temperature(temperature):
    from test_online_rl2 import small_shape

    from agentrl.envs.point_robot import PointRobot
    from agentrl.online.agent import RL2Agent
    from agentrl.online.ppo import TrialPPO

    env = PointRobot(horizon=4, max_action=MAX_ACTION)
    core = TrialPPO(env, small_shape(), env.sample_params).core
    log_std = np.array([-1.5, -2.0])
    weights = dict(core.init(jax.random.key(0)), log_std=jnp.asarray(log_std))
    agent = RL2Agent(weights, core, env, temperature=temperature)
    mean = jnp.asarray([0.2, -0.1])  # in half box widths
    keys = jax.random.split(jax.random.key(1), N)
    sample = jax.jit(lambda k, s: agent.select(k, s, False))
    actions = np.asarray(sample(keys, jnp.broadcast_to(mean, (N, 2))))
    want = temperature * MAX_ACTION * np.exp(log_std)  # bounds >= 3.5 std away
    np.testing.assert_allclose(actions.std(0), want, rtol=0.06)
    err = np.abs(actions.mean(0) - MAX_ACTION * np.asarray(mean))
    assert (err < 4 * want / N**0.5).all(), err
    greedy = np.asarray(agent.select(keys, jnp.broadcast_to(mean, (N, 2)), True))
    np.testing.assert_allclose(greedy, np.broadcast_to(MAX_ACTION * mean, (N, 2)))
