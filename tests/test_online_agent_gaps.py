"""RL²'s acting agent (agentrl.online.agent): mutants the tests before let
through.

Pass 9 of the hand-made mutation passes. The agent's inputs are rebuilt
from the history by the module docstring's rule (training's features:
observation, previous action and reward, new-episode flag; zeros before
the first step, carried over episode boundaries; the hidden state kept over
the whole run) and the core stepped over them by hand.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_online_rl2 import FlipBandit, small_shape

from agentrl.agents.agent import run_batched_agent
from agentrl.envs.registry import make as make_env
from agentrl.online.agent import RL2Agent, RL2State
from agentrl.online.ppo import TrialPPO

HORIZON, STEPS = 3, 6  # two whole episodes


def _replay(trainer, weights, history):
    """The core's state and output after the history's steps and the next
    episode's first observation (a fixed start: the history's first),
    stepped by hand over the inputs the history implies."""
    obs, action = np.asarray(history.obs), np.asarray(history.action)
    reward = np.asarray(history.reward)
    b = obs.shape[0]
    h = jnp.zeros((b, trainer.shape.hidden))
    prev_a, prev_r = np.zeros(b, np.int32), np.zeros(b, np.float32)
    for t in range(STEPS + 1):
        o = obs[:, t] if t < STEPS else obs[:, 0]
        first = np.full(b, t % HORIZON == 0)
        x = jax.vmap(trainer.features)(
            {"obs": o, "prev_action": prev_a, "prev_reward": prev_r}, first
        )
        h, out, _ = trainer.core.step(weights, h, x)
        if t < STEPS:
            prev_a, prev_r = action[:, t], reward[:, t]
    return h, out


@pytest.mark.parametrize("family", ["bandit", "darkroom"])
@pytest.mark.long
def test_the_agent_acts_on_trainings_inputs_and_keeps_its_state_across_episodes(
    family,
):
    # Dark Room: an episode's last successor is not the next episode's
    # first observation (the start cell), which the agent must read
    if family == "bandit":
        env = FlipBandit(num_arms=2, horizon=HORIZON)
    else:
        env = make_env("darkroom", size=5, horizon=HORIZON)
    trainer = TrialPPO(env, small_shape(trial_episodes=2), env.sample_params)
    weights = jax.tree.map(  # perturbed so that the history moves the policy
        lambda w: w + 0.7 * jax.random.normal(jax.random.key(5), w.shape),
        trainer.core.init(jax.random.key(1)),
    )
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 6))
    agent = RL2Agent(weights, trainer.core, env)  # sampling: the actions vary
    history, state = jax.jit(lambda p, k: run_batched_agent(env, agent, p, k, STEPS))(
        params, jax.random.key(1)
    )
    assert len(np.unique(np.asarray(history.action))) > 1
    assert np.asarray(history.reward).any()
    np.testing.assert_array_equal(history.obs[:, 0], history.obs[:, HORIZON])
    # after the last step the agent has stepped over the next observation:
    # its state holds every step's input
    hidden, out = _replay(trainer, weights, history)
    np.testing.assert_allclose(state.hidden, hidden, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.out, out, rtol=1e-5, atol=1e-6)


def test_a_greedy_agent_takes_the_argmax_and_a_sampling_one_its_temperature():
    # logits (0, 1): greedy plays action 1; sampled at temperature 0.5 the
    # policy is softmax(0, 2), action 1 with probability 0.881 (0.731 at 1)
    env = FlipBandit(num_arms=2, horizon=HORIZON)
    trainer = TrialPPO(env, small_shape(trial_episodes=2), env.sample_params)
    weights = trainer.core.init(jax.random.key(1))
    n = 4000
    state = RL2State(
        jnp.zeros((n, trainer.shape.hidden)), jnp.tile(jnp.array([0.0, 1.0]), (n, 1))
    )
    keys = jax.random.split(jax.random.key(3), n)
    greedy = RL2Agent(weights, trainer.core, env, greedy=True)
    np.testing.assert_array_equal(greedy.act(keys, state, None, None, None), 1)
    warm = RL2Agent(weights, trainer.core, env, temperature=0.5)
    played = np.asarray(warm.act(keys, state, None, None, None))
    assert abs(played.mean() - 1 / (1 + np.exp(-2.0))) < 0.025
