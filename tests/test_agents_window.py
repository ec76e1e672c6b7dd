"""AD's reference reading (``eval_context="window"``) held to a plain reference.

The AD-ε reference code re-runs its model every step over the last
``seq_len`` steps of the trial (fewer while the trial is younger) and acts
from the last position. The reference here is written apart from the agent:
one jitted full pass over exactly ``steps[max(0, s + 1 - W) : s + 1]``.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from model_factory import make_model
from test_models_transformer import forward, small

from agentrl import envs
from agentrl.agents.agent import Step
from agentrl.agents.rolling import ADModelAgent
from agentrl.agents.window import WindowModelAgent

W, STEPS, TASKS = 5, 13, 3


def _history(obs_size: int, actions: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    obs = jnp.asarray(rng.integers(0, obs_size, (TASKS, STEPS + 1)), jnp.int32)
    action = jnp.asarray(rng.integers(0, actions, (TASKS, STEPS)), jnp.int32)
    reward = jnp.asarray(rng.integers(0, 2, (TASKS, STEPS)), jnp.float32)
    return obs, action, reward


def _reference(model, obs, action, reward):
    """``[step, B, A]``: each step's logits from a fresh pass over its window."""
    out = []
    for s in range(STEPS):
        lo = max(0, s + 1 - W)
        window = slice(lo, s + 1)
        scores = forward(model, obs[:, window], action[:, window], reward[:, window])
        out.append(scores.action[:, -1])
    return np.stack(out)


def fed_scores(agent, env, obs, action, reward, done=None, read=None):
    """``[step, B, A]``: the agent's next-action scores, fed the recorded
    history ``obs [B, T + 1]``, ``action``, ``reward [B, T]`` with episodes
    ending at ``done [B, T]`` (default: every 4 steps); ``read(state)`` finds
    the scores in the agent's state (default ``state.scores``)."""
    tasks, steps = action.shape[:2]
    if done is None:
        done = jnp.asarray(np.arange(1, steps + 1) % 4 == 0)[None].repeat(tasks, 0)
    read = read or (lambda state: state.scores)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(1), tasks))
    state = agent.start(
        agent.init(jax.random.split(jax.random.key(2), tasks), params), obs[:, 0]
    )
    update, got = jax.jit(agent.update), []
    for s in range(steps):
        got.append(np.asarray(read(state)))
        end, seen = done[:, s], obs[:, s + 1]
        step = Step(obs[:, s], action[:, s], reward[:, s], seen, end, end, seen)
        state = update(state, step)
    return np.stack(got)


@pytest.mark.parametrize("layout", ["step", "sar"])
@pytest.mark.long
def test_each_step_reads_exactly_its_last_window_from_scratch(layout):
    env = envs.make("darkroom", size=3, horizon=4)
    cfg = small(obs_size=9, action_size=5, max_steps=W, token_layout=layout)
    model = make_model(cfg, 3)
    obs, action, reward = _history(9, 5)
    want = _reference(model, obs[:, :STEPS], action, reward)
    got = fed_scores(WindowModelAgent(model, env, W), env, obs, action, reward)
    # the window fills (steps 0-4), then slides 8 times
    np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.long
def test_the_rolling_cache_reads_the_same_until_the_window_slides():
    env = envs.make("darkroom", size=3, horizon=4)
    model = make_model(small(obs_size=9, action_size=5, max_steps=W), 4)
    obs, action, reward = _history(9, 5, seed=1)
    window = fed_scores(WindowModelAgent(model, env, W), env, obs, action, reward)
    rolling = fed_scores(ADModelAgent(model, env, W), env, obs, action, reward)
    np.testing.assert_allclose(window[:W], rolling[:W], atol=1e-5)
    # after it slides, the cache's deeper layers still carry older steps
    gap = np.abs(window[W:] - rolling[W:]).max(axis=(1, 2))
    assert (gap > 1e-3).all(), gap


def test_a_model_agent_by_default_reads_the_window_it_was_trained_on():
    """``make_model_agent`` (``run_model_online``, ``evaluate_online`` on a
    bare model) once kept the whole evaluation in its cache, attending
    further back than training did, and scored otherwise than the
    algorithm's own agent (a cache of ``model.max_steps``)."""
    from agentrl.agents.driver import make_model_agent
    from agentrl.agents.model_agents import split_model

    env = envs.make("darkroom", size=3, horizon=4)
    model = make_model(small(obs_size=9, action_size=5, max_steps=W), 4)
    obs, action, reward = _history(9, 5, seed=2)
    own = fed_scores(ADModelAgent(model, env, W), env, obs, action, reward)
    default = make_model_agent(model, env, STEPS, protocol="decode")
    got = fed_scores(default, env, obs, action, reward)
    np.testing.assert_allclose(got, own, atol=1e-5)
    whole = make_model_agent(model, env, STEPS, protocol="decode", cache_steps=STEPS)
    longer = fed_scores(whole, env, obs, action, reward)
    assert np.abs(longer[W:] - own[W:]).max() > 1e-3  # told to: reads further
    # as run_model_online passes it: a (graphdef, weights) handle (it once
    # read no config there, so the cache held the whole evaluation)
    handle = make_model_agent(split_model(model), env, STEPS, protocol="decode")
    assert handle.cache_steps == W


def test_a_gaussian_head_keeps_its_mean_and_std_at_the_last_step():
    env = envs.make("point_robot")
    obs_size, act = 2, 2
    cfg = small(
        obs_size=obs_size,
        action_size=act,
        max_steps=W,
        obs_kind="continuous",
        action_kind="continuous",
        head="gaussian",
    )
    model = make_model(cfg, 5)
    rng = np.random.default_rng(2)
    obs = jnp.asarray(rng.normal(size=(TASKS, STEPS + 1, obs_size)), jnp.float32)
    action = jnp.asarray(rng.uniform(-1, 1, (TASKS, STEPS, act)), jnp.float32)
    reward = jnp.asarray(rng.normal(size=(TASKS, STEPS)), jnp.float32)
    got = fed_scores(WindowModelAgent(model, env, W), env, obs, action, reward)
    for s in (0, W - 1, STEPS - 1):
        lo = max(0, s + 1 - W)
        ref = forward(
            model, obs[:, lo : s + 1], action[:, lo : s + 1], reward[:, lo : s + 1]
        )
        np.testing.assert_allclose(got[s, :, 0], ref.action[:, -1], atol=1e-5)
        np.testing.assert_allclose(got[s, :, 1], ref.log_std[:, -1], atol=1e-5)


@pytest.mark.long
def test_ad_acts_by_the_window_it_is_told_through_the_lane_program(tiny_ad_config):
    """``AD(eval_context="window")`` through the shared lane program (a rule
    and a control as traced lanes) equals its agent run alone."""
    from flax import nnx

    from agentrl.agents.driver import ModelPolicy, run_policy
    from agentrl.evaluate import programs
    from agentrl.evaluate.controls import control_policy
    from agentrl.evaluate.lanes import lane
    from agentrl.models.transformer import DecisionModel
    from agentrl.train.config import complete_config

    config = tiny_ad_config(2)
    env = envs.make(config.data.env, **dict(config.data.env_args))
    config = complete_config(config, env)
    assert config.model.max_steps < 3 * env.horizon  # the window slides
    model = DecisionModel(config.model, rngs=nnx.Rngs(0))
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(3), 2))
    key, steps = jax.random.key(5), 3 * env.horizon
    windowed = dataclasses.replace(
        config,
        algo=dataclasses.replace(config.algo, eval_context="window"),
        eval=dataclasses.replace(config.eval, acting="sample"),  # the lane's rule
    )
    runner = programs.lane_runner(windowed, env, "darkroom", model, steps)
    laned = runner(params, key, lane("sample", "zero_rewards"))
    policy = ModelPolicy(
        model, lambda handle, n: windowed.algo.make_agent(handle, env, n, windowed)
    )
    same_key = jax.random.clone(key)  # the same draws, by design
    controlled = control_policy(policy, "zero_rewards")
    alone = run_policy(env, controlled, params, same_key, steps)[0]
    np.testing.assert_array_equal(laned.action, alone.action)
    np.testing.assert_array_equal(laned.reward, alone.reward)
