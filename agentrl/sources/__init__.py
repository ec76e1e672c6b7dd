"""Source algorithms that produce learning histories on many tasks at once.

>>> from agentrl.sources import generate
>>> history = generate("q_learning", env, params, key, num_episodes=100)

The :class:`Agent` protocol and its one driver (:func:`run_agent_on_tasks`)
live in :mod:`agentrl.agents.agent`; evaluation runs its baselines and
models through the same driver.
"""

from agentrl.agents.agent import (
    Agent,
    RandomAgent,
    Step,
    as_batched,
    is_agent,
    is_batched,
    run_agent,
    run_agent_on_tasks,
    run_batched_agent,
)
from agentrl.history import History, episode_index
from agentrl.sources.bandits import (
    UCB,
    BernoulliThompson,
    EpsilonGreedy,
    FixedPolicyBandit,
    GaussianThompson,
)
from agentrl.sources.registry import (
    SOURCES,
    Source,
    SourceHistories,
    applicable_sources,
    check_settings,
    generate,
    make_agent,
    register_source,
    source_histories,
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
    "Source",
    "SourceHistories",
    "Step",
    "applicable_sources",
    "as_batched",
    "check_settings",
    "episode_index",
    "generate",
    "is_agent",
    "is_batched",
    "linear_epsilon",
    "make_agent",
    "register_source",
    "run_agent",
    "run_agent_on_tasks",
    "run_batched_agent",
    "source_histories",
    "source_names",
]
