"""A learner's model agent reads the window its model was trained on."""

from types import SimpleNamespace

import jax
from model_factory import make_model
from test_models_transformer import small

from agentrl import envs

H, TASKS = 2, 2


def test_a_model_agent_reads_the_window_the_model_was_trained_on():
    from agentrl.agents.model_agents import model_agent
    from agentrl.agents.window import WindowModelAgent

    env = envs.make("darkroom", size=3, horizon=H)
    model = make_model(small(obs_size=9, action_size=5, max_steps=5), 7)
    config = SimpleNamespace(
        model=SimpleNamespace(max_steps=5),
        eval=SimpleNamespace(acting="greedy", temperature=1.0),
    )
    agent = model_agent(WindowModelAgent, model, env, config)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(11), TASKS))
    state = agent.init(jax.random.split(jax.random.key(12), TASKS), params)
    assert agent.greedy and state.obs.shape[:2] == (TASKS, 5)
