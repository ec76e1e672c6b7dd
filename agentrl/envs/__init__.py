"""Environments: the gymnax 1.0 API, task families, wrappers and the registry.

>>> from agentrl import envs
>>> env = envs.make("darkroom", size=9, horizon=20)
>>> envs.registered()[:2]
['bernoulli_bandit', 'dark_key_to_door']
"""

from agentrl.envs.bandits import BernoulliBandit, GaussianBandit
from agentrl.envs.base import Environment, EnvParams, EnvState
from agentrl.envs.darkroom import DarkRoom, DarkRoomHard
from agentrl.envs.gymnax_adapter import from_gymnax, to_gymnax
from agentrl.envs.key_to_door import DarkKeyToDoor
from agentrl.envs.registry import make, overrides_of, register_env, registered
from agentrl.envs.rollout import (
    Transitions,
    episode_returns,
    oracle_policy,
    random_policy,
    rollout,
)
from agentrl.envs.tasks import TaskSplit, split_task_ids
from agentrl.envs.trial import MultiEpisodeTrial

__all__ = [
    "from_gymnax",
    "to_gymnax",
    "BernoulliBandit",
    "DarkKeyToDoor",
    "DarkRoom",
    "DarkRoomHard",
    "EnvParams",
    "EnvState",
    "Environment",
    "GaussianBandit",
    "MultiEpisodeTrial",
    "TaskSplit",
    "Transitions",
    "episode_returns",
    "make",
    "oracle_policy",
    "overrides_of",
    "random_policy",
    "register_env",
    "registered",
    "rollout",
    "split_task_ids",
]
