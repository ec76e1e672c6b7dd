"""DT acts in context on return-conditioned tokens, exactly as it trains."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from agentrl import envs
from agentrl.algos.dt import dt_observation
from agentrl.evaluate import run_batched_agent
from agentrl.models import DecisionModel
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
