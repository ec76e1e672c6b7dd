"""Name -> environment registry: ``make(name, **overrides)``, ``registered()``,
``register_env(name, factory)`` (a task family of your own; see
:mod:`agentrl.plugins` for using it from the command line).

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
from agentrl.registry import Registry, caller_module

GYMNAX_PREFIX = "gymnax:"

#: registered task families: name -> ``factory(**overrides) -> environment``
ENVS = Registry("environment", note=f"or '{GYMNAX_PREFIX}<gymnax id>'")


def register_env(name: str, factory: Callable[..., Any] | None = None) -> Any:
    """Add a task family; ``factory(**overrides)`` builds the environment.

    Returns ``factory``; without it, a decorator (``@register_env("name")``).
    Registering the same factory again is harmless, and a class defined
    again (a notebook cell re-run) replaces itself; another factory under a
    taken name is a ``ValueError`` naming both (:mod:`agentrl.registry`).
    """
    module = caller_module()
    if factory is None:
        return lambda target: ENVS.register(name, target, module=module)
    return ENVS.register(name, factory, module=module)


register_env("bernoulli_bandit", BernoulliBandit)
register_env("gaussian_bandit", GaussianBandit)
register_env("darkroom", DarkRoom)
register_env("darkroom_hard", DarkRoomHard)
register_env("dark_key_to_door", DarkKeyToDoor)
register_env("point_robot", PointRobot)
register_env("cartpole_contextual", CartPoleContextual)
register_env("pendulum_contextual", PendulumContextual)
register_env("mountaincar_contextual", MountainCarContextual)
register_env("acrobot_contextual", AcrobotContextual)
register_env("xland", XLandMiniGrid)


def registered() -> list[str]:
    """Names accepted by :func:`make` (plus ``gymnax:<id>`` for gymnax envs)."""
    return ENVS.names()


def overrides_of(name: str) -> dict[str, Any]:
    """The overridable constructor arguments of ``name`` and their defaults."""
    factory = _lookup(name)
    return {
        p.name: p.default
        for p in inspect.signature(factory).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }


def _lookup(name: str) -> Callable[..., Any]:
    return ENVS.get(name)


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
