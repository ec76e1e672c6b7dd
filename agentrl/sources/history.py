"""Re-export of the History schema, which lives in :mod:`agentrl.history`."""

from agentrl.history import History, episode_index

__all__ = ["History", "episode_index"]
