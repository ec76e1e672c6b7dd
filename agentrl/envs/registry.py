"""Name -> environment registry: ``make(name, **overrides)`` and ``registered()``.

Overrides are constructor arguments; unknown names, unknown overrides and bad
values raise ``ValueError`` naming what is valid, before anything compiles.
Any gymnax environment is available as ``make("gymnax:<id>")`` (gymnax is
imported only then, as it takes seconds to import), as a task family of one
task (:func:`agentrl.envs.gymnax_adapter.from_gymnax`; call it yourself to
give a task distribution).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from agentrl.envs.bandits import BernoulliBandit, GaussianBandit
from agentrl.envs.contextual import (
    AcrobotContextual,
    CartPoleContextual,
    MountainCarContextual,
    PendulumContextual,
)
from agentrl.envs.darkroom import DarkRoom, DarkRoomHard
from agentrl.envs.key_to_door import DarkKeyToDoor
from agentrl.envs.point_robot import PointRobot
from agentrl.envs.xland import XLandMiniGrid

_REGISTRY: dict[str, Callable[..., Any]] = {
    "bernoulli_bandit": BernoulliBandit,
    "gaussian_bandit": GaussianBandit,
    "darkroom": DarkRoom,
    "darkroom_hard": DarkRoomHard,
    "dark_key_to_door": DarkKeyToDoor,
    "point_robot": PointRobot,
    "cartpole_contextual": CartPoleContextual,
    "pendulum_contextual": PendulumContextual,
    "mountaincar_contextual": MountainCarContextual,
    "acrobot_contextual": AcrobotContextual,
    "xland": XLandMiniGrid,
}

GYMNAX_PREFIX = "gymnax:"


def register(name: str, factory: Callable[..., Any]) -> None:
    """Add a task family; ``factory(**overrides)`` builds the environment."""
    if name in _REGISTRY:
        raise ValueError(f"environment {name!r} is already registered")
    _REGISTRY[name] = factory


def registered() -> list[str]:
    """Names accepted by :func:`make` (plus ``gymnax:<id>`` for gymnax envs)."""
    return sorted(_REGISTRY)


def overrides_of(name: str) -> dict[str, Any]:
    """The overridable constructor arguments of ``name`` and their defaults."""
    factory = _lookup(name)
    return {
        p.name: p.default
        for p in inspect.signature(factory).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }


def _lookup(name: str) -> Callable[..., Any]:
    if name not in _REGISTRY:
        raise ValueError(
            f"unknown environment {name!r}; registered: {', '.join(registered())} "
            f"(or '{GYMNAX_PREFIX}<gymnax id>')"
        )
    return _REGISTRY[name]


def make(name: str, **overrides: Any) -> Any:
    """Build the environment ``name`` with constructor ``overrides``."""
    if name.startswith(GYMNAX_PREFIX):
        return _make_gymnax(name[len(GYMNAX_PREFIX) :], overrides)
    factory = _lookup(name)
    valid = overrides_of(name)
    unknown = sorted(set(overrides) - set(valid))
    if unknown:
        allowed = ", ".join(f"{k}={v!r}" for k, v in valid.items()) or "none"
        raise ValueError(
            f"{name}: unknown override(s) {unknown}; valid overrides (defaults): "
            f"{allowed}"
        )
    return factory(**overrides)


def _make_gymnax(env_id: str, overrides: dict[str, Any]) -> Any:
    import gymnax

    if env_id not in gymnax.registered_envs:
        raise ValueError(
            f"unknown gymnax environment {env_id!r}; gymnax has: "
            f"{', '.join(gymnax.registered_envs)}"
        )
    env, _ = gymnax.make(env_id, **overrides)
    from agentrl.envs.gymnax_adapter import from_gymnax

    return from_gymnax(env)  # a task family (one task: the default params)
