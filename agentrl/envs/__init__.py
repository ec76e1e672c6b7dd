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
import sys
import types
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
    "TMaze": "agentrl.envs.tmaze",
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


class _Package(types.ModuleType):
    """This package, keeping ``envs.rollout`` the function: the import system
    binds a loaded submodule as an attribute of its package, which would
    shadow the public function of the same name (as the eager imports did
    not)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return  # the public name is the function, resolved on first use
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
