"""Environments: the gymnax 1.0 API, task families, wrappers and the registry.

>>> from agentrl import envs
>>> env = envs.make("darkroom", size=9, horizon=20)
>>> envs.registered()[:2]
['acrobot_contextual', 'bernoulli_bandit']

The names below are imported on first use (PEP 562), so importing this
package (``agentrl envs`` lists the families through it) imports no JAX.
"""

import importlib
import importlib.util
from typing import Any

#: public name -> the module that defines it
_EXPORTS = {
    "BernoulliBandit": "agentrl.envs.bandits",
    "GaussianBandit": "agentrl.envs.bandits",
    "Environment": "agentrl.envs.base",
    "EnvParams": "agentrl.envs.base",
    "EnvState": "agentrl.envs.base",
    "DarkRoom": "agentrl.envs.darkroom",
    "DarkRoomHard": "agentrl.envs.darkroom",
    "from_gymnax": "agentrl.envs.gymnax_adapter",
    "to_gymnax": "agentrl.envs.gymnax_adapter",
    "DarkKeyToDoor": "agentrl.envs.key_to_door",
    "make": "agentrl.envs.registry",
    "overrides_of": "agentrl.envs.registry",
    "register_env": "agentrl.envs.registry",
    "registered": "agentrl.envs.registry",
    "Transitions": "agentrl.envs.rollout",
    "episode_returns": "agentrl.envs.rollout",
    "oracle_policy": "agentrl.envs.rollout",
    "random_policy": "agentrl.envs.rollout",
    "rollout": "agentrl.envs.rollout",
    "TaskSplit": "agentrl.envs.tasks",
    "split_task_ids": "agentrl.envs.tasks",
    "MultiEpisodeTrial": "agentrl.envs.trial",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """A public name (imported now) or a submodule (``envs.spaces``)."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
