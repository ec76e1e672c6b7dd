"""Name -> environment registry: ``make(name, **overrides)``, ``registered()``,
``register_env(name, factory)`` (a task family of your own; see
:mod:`agentrl.plugins` for using it from the command line).

Overrides are constructor arguments; unknown names, unknown overrides and bad
values raise ``ValueError`` naming what is valid, before anything compiles.
The built-in families are registered by name and imported on first use,
so :func:`registered` and :func:`describe` import no JAX (``agentrl envs``
lists them at once). Any gymnax environment is available as
``make("gymnax:<id>")`` (gymnax is
imported only then, as it takes seconds to import), as a task family of one
task (:func:`agentrl.envs.gymnax_adapter.from_gymnax`; call it yourself to
give a task distribution).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

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


#: the built-in families: ``name -> ("module:class", description)``, imported
#: on first use, so listing them (``agentrl envs``) imports no JAX
BUILTIN_FAMILIES: dict[str, tuple[str, str]] = {
    "bernoulli_bandit": (
        "agentrl.envs.bandits:BernoulliBandit",
        "k-armed Bernoulli bandit; the task is the arms' success rates",
    ),
    "gaussian_bandit": (
        "agentrl.envs.bandits:GaussianBandit",
        "k-armed Gaussian bandit (DPT: 5 arms, H=500); the task is the arm means",
    ),
    "darkroom": (
        "agentrl.envs.darkroom:DarkRoom",
        "Algorithm Distillation's dense-reward Dark Room; the task is the goal cell",
    ),
    "darkroom_hard": (
        "agentrl.envs.darkroom:DarkRoomHard",
        "sparse Dark Room: reward once on reaching the goal, which ends it",
    ),
    "dark_key_to_door": (
        "agentrl.envs.key_to_door:DarkKeyToDoor",
        "find the key, then the door, in the dark; the task is both cells",
    ),
    "tmaze": (
        "agentrl.envs.tmaze:TMaze",
        "passive T-Maze (Ni et al., AMAGO); the task is the goal's side, shown once",
    ),
    "point_robot": (
        "agentrl.envs.point_robot:PointRobot",
        "2-D point robot with a hidden goal; reward -distance",
    ),
    "cartpole_contextual": (
        "agentrl.envs.contextual:CartPoleContextual",
        "CartPole-v1 with gravity, cart and pole masses and pole length as task",
    ),
    "pendulum_contextual": (
        "agentrl.envs.contextual:PendulumContextual",
        "Pendulum-v1 with mass, length and gravity as task",
    ),
    "mountaincar_contextual": (
        "agentrl.envs.contextual:MountainCarContextual",
        "MountainCar-v0 with engine force and gravity as task",
    ),
    "acrobot_contextual": (
        "agentrl.envs.contextual:AcrobotContextual",
        "Acrobot-v1 with both link lengths and masses as task",
    ),
    "xland": (
        "agentrl.envs.xland:XLandMiniGrid",
        "an XLand-MiniGrid environment; the ruleset is the task (extra xminigrid)",
    ),
    # MuJoCo locomotion on Brax/MJX (extra mujoco; brax is imported on make)
    "halfcheetah_vel": (
        "agentrl.envs.halfcheetah_vel:HalfCheetahVel",
        "HalfCheetah running at a hidden target velocity in [0, 3] (extra mujoco)",
    ),
    "halfcheetah_dir": (
        "agentrl.envs.halfcheetah_dir:HalfCheetahDir",
        "HalfCheetah running forward or backward (extra mujoco)",
    ),
    "ant_dir": (
        "agentrl.envs.ant_dir:AntDir",
        "Ant walking in a hidden direction on the circle (extra mujoco)",
    ),
    "walker_params": (
        "agentrl.envs.walker_params:WalkerParams",
        "Walker2d with randomised masses, inertia, damping, friction (extra mujoco)",
    ),
    "hopper_params": (
        "agentrl.envs.hopper_params:HopperParams",
        "Hopper with randomised masses, inertia, damping, friction (extra mujoco)",
    ),
}
#: the MuJoCo families (Brax/MJX physics, the extra ``agentrl[mujoco]``)
MUJOCO_FAMILIES = (
    "halfcheetah_vel",
    "halfcheetah_dir",
    "ant_dir",
    "walker_params",
    "hopper_params",
)
for _name, (_target, _description) in BUILTIN_FAMILIES.items():
    ENVS.register_lazy(_name, _target, _description)


def registered() -> list[str]:
    """Names accepted by :func:`make` (plus ``gymnax:<id>`` for gymnax envs)."""
    return ENVS.names()


def describe(name: str) -> str:
    """One line about the family ``name`` (a built-in one is not imported)."""
    return ENVS.describe(name)


def overrides_of(name: str) -> dict[str, Any]:
    """The overridable constructor arguments of ``name`` and their defaults."""
    factory = _lookup(name)
    return {
        p.name: p.default
        for p in inspect.signature(factory).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }


def constructor_args(name: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """Every constructor argument ``make(name, **overrides)`` builds with:
    the defaults with ``overrides`` over them, as JSON values (tuples read
    as lists), so two ways of naming one environment compare equal."""
    args = dict(overrides)
    if not name.startswith(GYMNAX_PREFIX):
        args = {**overrides_of(name), **args}
    return json.loads(json.dumps(args, default=repr))


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
