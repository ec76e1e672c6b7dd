"""Re-export of the History schema, which lives in :mod:`agentrl.history`."""

from agentrl.history import History, check_history, episode_index

__all__ = ["History", "check_history", "episode_index"]
