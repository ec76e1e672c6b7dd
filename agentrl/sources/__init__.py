"""Source algorithms that produce learning histories on many tasks at once."""

from agentrl.sources.agent import Agent, Step, run_agent, run_agent_on_tasks
from agentrl.sources.history import History, episode_index

__all__ = [
    "Agent",
    "History",
    "Step",
    "episode_index",
    "run_agent",
    "run_agent_on_tasks",
]
