"""DT acts in context on return-conditioned tokens, exactly as it trains."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from model_factory import make_model
from test_agents_window import fed_scores

from agentrl import envs
from agentrl.agents.agent import Step
from agentrl.algos.dt import DTState, dt_loss, dt_observation, returns_to_go
from agentrl.evaluate import run_batched_agent
from agentrl.models import DecisionModel, ModelConfig
from agentrl.train.config import complete_config
from agentrl.train.experiments import load_experiment

TARGET = 5.0


def _dt_model_and_config():
    env = envs.make("darkroom", size=5, horizon=6)
    config = load_experiment(
        "dt_darkroom",
        "smoke",
        {"data.env_args": "(('size', 5), ('horizon', 6))", "eval.acting": "greedy"},
    )
    config = complete_config(config, env)
    config = dataclasses.replace(
        config, algo=dataclasses.replace(config.algo, target_return=TARGET)
    )
    return env, config, DecisionModel(config.model, rngs=nnx.Rngs(3))


@pytest.mark.long
def test_dt_tokens_condition_on_target_minus_rewards_so_far():
    env, config, model = _dt_model_and_config()
    episodes = config.algo.context_episodes
    steps = episodes * env.horizon
    params = jax.vmap(env.params_for_task)(jnp.array([3, 12, 20, 24]))
    agent = config.algo.make_agent(model, env, steps, config)
    history, state = run_batched_agent(env, agent, params, jax.random.key(0), steps)

    # return-to-go at each step: target minus the episode's rewards before it
    reward = np.asarray(history.reward)
    episode = np.asarray(history.episode)
    rtg = np.zeros_like(reward)
    for t in range(steps):
        same = episode[:, :t] == episode[:, t : t + 1]
        rtg[:, t] = TARGET - (reward[:, :t] * same).sum(1)
    # the state holds the next token's: the last episode ended, so the target
    np.testing.assert_allclose(state.rtg, TARGET)

    # the uncached forward pass on those tokens picks the agent's actions
    num_obs = env.observation_space(None).n
    obs = dt_observation(history.obs, jnp.asarray(rtg), num_obs, config.algo.rtg_scale)
    out = model(obs, history.action, history.reward, deterministic=True)
    np.testing.assert_array_equal(np.argmax(out.action, -1), history.action)
    # and the conditioning matters: another target changes some actions
    other = dt_observation(
        history.obs, jnp.asarray(rtg) + 10.0, num_obs, config.algo.rtg_scale
    )
    changed = model(other, history.action, history.reward, deterministic=True)
    assert (np.argmax(changed.action, -1) != history.action).any()


def test_dt_target_return_defaults_to_the_data_best(darkroom_dataset):
    from agentrl.algos.dt import best_episode_return
    from agentrl.data import open_dataset

    dataset = open_dataset(darkroom_dataset)
    env = dataset.env
    config = load_experiment("dt_darkroom", "smoke")
    assert config.algo.target_return is None
    resolved = complete_config(config, env, dataset)
    best = best_episode_return(dataset)
    history = dataset.load_history("train")
    returns = np.asarray(history.episode_returns(dataset.metadata["num_episodes"]))
    assert resolved.algo.target_return == best == returns.max()
    assert resolved.algo.rtg_scale == env.horizon


def test_return_conditioning_defaults_and_explicit_values():
    from types import SimpleNamespace

    from agentrl.algos.dt import resolved_return_conditioning
    from agentrl.algos.meta_dt import MetaDT

    unset = SimpleNamespace(rtg_scale=None, target_return=None)
    filled = resolved_return_conditioning(unset, SimpleNamespace(horizon=20), None)
    assert filled == {"rtg_scale": 20.0, "target_return": None}
    no_horizon = resolved_return_conditioning(unset, object(), None)
    assert no_horizon["rtg_scale"] == 1.0
    given = SimpleNamespace(rtg_scale=5.0, target_return=3.0)
    assert resolved_return_conditioning(given, SimpleNamespace(horizon=20), None) == {
        "rtg_scale": 5.0,
        "target_return": 3.0,
    }
    meta = MetaDT().resolve(SimpleNamespace(horizon=50), None)  # shares the rule
    assert (meta.rtg_scale, meta.target_return) == (50.0, None)


@pytest.mark.long
def test_dt_window_reading_scores_a_fresh_pass_over_its_last_steps():
    """``eval_context="window"``: each step's scores come from one pass over
    exactly the last ``max_steps`` return-conditioned tokens; the rolling
    cache scores the same until the window slides, and differently after."""
    from agentrl.algos.dt import DTModelAgent

    env, config, model = _dt_model_and_config()
    width, horizon = config.model.max_steps, env.horizon
    steps, tasks, cells = width + 2 * horizon, 3, env.observation_space(None).n
    rng = np.random.default_rng(0)
    obs = jnp.asarray(rng.integers(0, cells, (tasks, steps + 1)), jnp.int32)
    action = jnp.asarray(rng.integers(0, 5, (tasks, steps)), jnp.int32)
    reward = jnp.asarray(rng.integers(0, 2, (tasks, steps)), jnp.float32)
    done = jnp.asarray(np.arange(1, steps + 1) % horizon == 0)[None].repeat(tasks, 0)

    def agent(window):
        scale = config.algo.rtg_scale
        return DTModelAgent(model, env, width, TARGET, scale, True, window=window)

    def inner(state):
        return state.inner.scores

    windowed = fed_scores(agent(True), env, obs, action, reward, done, inner)
    # each token's return-to-go: the target less the episode's earlier rewards
    earlier = np.cumsum(reward, 1) - reward
    rtg = TARGET - (earlier - earlier[:, (np.arange(steps) // horizon) * horizon])
    tokens = dt_observation(
        obs[:, :steps], jnp.asarray(rtg), cells, config.algo.rtg_scale
    )
    for t in (0, width // 2, width - 1, width, width + 5, steps - 1):
        seen = slice(max(0, t + 1 - width), t + 1)
        out = model(
            tokens[:, seen], action[:, seen], reward[:, seen], deterministic=True
        )
        np.testing.assert_allclose(
            windowed[t], out.action[:, -1], atol=1e-5, err_msg=f"{t}"
        )
    rolling = fed_scores(agent(False), env, obs, action, reward, done, inner)
    np.testing.assert_allclose(rolling[:width], windowed[:width], atol=1e-5)
    gap = np.abs(rolling[width:] - windowed[width:]).max(axis=(1, 2))
    assert (gap > 1e-3).all(), gap


def test_dt_eval_context_picks_its_reading_and_refuses_others():
    from agentrl.agents.rolling import ADModelAgent
    from agentrl.agents.window import WindowModelAgent
    from agentrl.algos.dt import DT

    env, config, model = _dt_model_and_config()
    for reading, inner in (("rolling", ADModelAgent), ("window", WindowModelAgent)):
        algo = dataclasses.replace(config.algo, eval_context=reading)
        agent = algo.make_agent(model, env, 10, config)
        assert isinstance(agent.inner, inner)
    with pytest.raises(ValueError, match="algo.eval_context must be one of"):
        DT(eval_context="sorted_episodes")


# Mutants the tests above let through (session 56's mutation pass).


RTG_REWARD = [[1.0, 2.0, 3.0, 4.0, 5.0], [0.0, 1.0, 0.0, 0.0, 2.0]]
RTG_DONE = [[False, True, False, False, True], [False, False, True, False, True]]
# R_t = r_t + ... + r_(end of t's episode), back to 0 after each episode end:
# row 0: episodes [1, 2] and [3, 4, 5] -> [1+2, 2, 3+4+5, 4+5, 5]
# row 1: episodes [0, 1, 0] and [0, 2] -> [1, 1, 0, 2, 2]
RTG_HAND = [[3.0, 2.0, 12.0, 9.0, 5.0], [1.0, 1.0, 0.0, 2.0, 2.0]]


def test_returns_to_go_by_hand():
    rtg = returns_to_go(jnp.asarray(RTG_REWARD), jnp.asarray(RTG_DONE))
    np.testing.assert_allclose(rtg, RTG_HAND)


def test_dt_observation_appends_the_scaled_return_to_go():
    obs = jnp.array([[2, 0]])
    got = dt_observation(obs, jnp.array([[6.0, -2.0]]), 3, 4.0)
    np.testing.assert_allclose(got, [[[0, 0, 1, 1.5], [1, 0, 0, -0.5]]])


def test_dt_loss_conditions_each_step_on_its_return_to_go():
    # dt_loss's model input is [one_hot(s_t), R_t / scale] with R_t by hand
    # (RTG_HAND, the step's own reward included), scale 4
    cfg = ModelConfig(
        obs_kind="continuous", obs_size=6, action_size=3, num_layers=1,
        num_heads=2, d_model=16, d_ff=32, max_steps=5, dropout=0.0,
    )  # fmt: skip
    model = make_model(cfg, seed=1)
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 5, (2, 5))
    batch = {
        "obs": jnp.asarray(obs, jnp.int32),
        "action": jnp.asarray(rng.integers(0, 3, (2, 5)), jnp.int32),
        "reward": jnp.asarray(RTG_REWARD),
        "done": jnp.asarray(RTG_DONE),
    }
    _, _, out = dt_loss(model, batch, num_obs=5, rtg_scale=4.0, deterministic=True)
    tokens = np.concatenate(
        [np.eye(5)[obs], np.asarray(RTG_HAND)[..., None] / 4.0], -1
    ).astype(np.float32)
    want = model(
        jnp.asarray(tokens), batch["action"], batch["reward"], deterministic=True
    )
    np.testing.assert_allclose(out.action, want.action, atol=1e-6)


class _Recorder:
    """An inner agent that keeps the step it is handed (DT's tokens)."""

    def update(self, state, step):
        return step


def test_acting_tokens_carry_the_return_to_go_before_and_after_each_step():
    # Two tasks at returns-to-go 5 and 3 get rewards 1 and 2; the second's
    # episode ends. The step's token holds the return-to-go it was acted at,
    # the next token (reset_obs) the one after: 5 - 1 = 4, and the target 5
    # again where an episode ended (the long test checks whole evaluations).
    env, config, model = _dt_model_and_config()
    agent = config.algo.make_agent(model, env, 12, config)
    agent.inner = _Recorder()
    scale, target = config.algo.rtg_scale, TARGET
    state = DTState(None, jnp.array([5.0, 3.0]))
    step = Step(
        obs=jnp.array([0, 1]),
        action=jnp.array([0, 0]),
        reward=jnp.array([1.0, 2.0]),
        next_obs=jnp.array([2, 3]),
        terminated=jnp.array([False, False]),
        truncated=jnp.array([False, True]),
        reset_obs=jnp.array([2, 4]),
    )
    seen, next_rtg = agent.update(state, step)
    np.testing.assert_allclose(next_rtg, [4.0, target])
    np.testing.assert_allclose(seen.obs[:, -1], np.array([5.0, 3.0]) / scale)
    np.testing.assert_allclose(seen.reset_obs[:, -1], np.array([4.0, target]) / scale)
    np.testing.assert_array_equal(seen.reset_obs[:, :-1].argmax(-1), [2, 4])
