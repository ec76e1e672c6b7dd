"""Source algorithms that produce learning histories on many tasks at once."""

from agentrl.sources.history import History, episode_index

__all__ = ["History", "episode_index"]
