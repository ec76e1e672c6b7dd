"""Source algorithms that produce learning histories on many tasks at once.

>>> from agentrl.sources import generate
>>> history = generate("q_learning", env, params, key, num_episodes=100)
"""

from agentrl.sources.agent import Agent, Step, run_agent, run_agent_on_tasks
from agentrl.sources.bandits import (
    UCB,
    BernoulliThompson,
    EpsilonGreedy,
    FixedPolicyBandit,
    GaussianThompson,
    RandomAgent,
)
from agentrl.sources.history import History, episode_index
from agentrl.sources.registry import (
    SOURCES,
    applicable_sources,
    check_settings,
    generate,
    make_agent,
    source_names,
)
from agentrl.sources.tabular import NoisyOracle, QLearning, linear_epsilon

__all__ = [
    "SOURCES",
    "UCB",
    "Agent",
    "BernoulliThompson",
    "EpsilonGreedy",
    "FixedPolicyBandit",
    "GaussianThompson",
    "History",
    "NoisyOracle",
    "QLearning",
    "RandomAgent",
    "Step",
    "applicable_sources",
    "check_settings",
    "episode_index",
    "generate",
    "linear_epsilon",
    "make_agent",
    "run_agent",
    "run_agent_on_tasks",
    "source_names",
]
