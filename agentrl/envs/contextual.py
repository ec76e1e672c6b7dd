"""Contextual classic control (CARL-style) on top of gymnax's own physics.

Each family wraps a gymnax classic-control environment unchanged; the task is
a *context*: the physical constants in gymnax's ``EnvParams`` (which already
hold them as fields), drawn per task. Context variables are named after those
fields, each with a default (gymnax's value) and a sampling range (by default
``[default / 2, 2 * default]``, override with ``ranges={name: (low, high)}``).
``GYMNAX_REFERENCE`` maps each registry name to its gymnax id, the throughput
reference:

=========================  ==============  ======================================
registry name              gymnax id       context variables
=========================  ==============  ======================================
``cartpole_contextual``    CartPole-v1     ``gravity``, ``masscart``,
                                           ``masspole``, ``length`` (half pole)
``pendulum_contextual``    Pendulum-v1     ``m``, ``l``, ``g``
``mountaincar_contextual`` MountainCar-v0  ``force``, ``gravity``
``acrobot_contextual``     Acrobot-v1      ``link_length_1``, ``link_length_2``,
                                           ``link_mass_1``, ``link_mass_2``
=========================  ==============  ======================================

(As in gym and CARL, Acrobot's ``link_length_2`` does not enter the dynamics;
it is kept for parity with CARL's context set.) CartPole's derived fields
``total_mass`` and ``polemass_length`` are recomputed from the context.

Sampling modes (constructor ``mode``, as in CARL):

- ``"all"``: every variable in ``variables`` is drawn uniformly from its range;
- ``"one"``: one variable at a time: a task changes a single variable, picked
  uniformly from ``variables`` and drawn from its range; the others keep their
  defaults.

``observe_context=True`` appends the context divided by its defaults
(``[num_context]``, all ones at the default) to the observation ("visible
context" in CARL); by default the context is hidden, as in-context RL wants.
At the default context the dynamics, rewards and terminations are exactly
gymnax's (tested step by step). The continuous context space has
``num_tasks = None`` and no oracle. ``gymnax_id`` names the reference
environment for throughput comparisons.

Static: ``mode``, ``variables``, ``ranges``, ``horizon``, ``observe_context``.
Traced: every field of ``params.physics`` (the gymnax params) and
``max_steps_in_episode``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

import agentrl.envs.spaces as spaces
from agentrl.envs.base import Environment, EnvParams, EnvState
from agentrl.envs.validate import check_choice, check_int

MODES = ("all", "one")
#: Registry name -> the gymnax id of the unmodified reference environment.
GYMNAX_REFERENCE = {
    "cartpole_contextual": "CartPole-v1",
    "pendulum_contextual": "Pendulum-v1",
    "mountaincar_contextual": "MountainCar-v0",
    "acrobot_contextual": "Acrobot-v1",
}


@struct.dataclass
class ContextualState(EnvState):
    """``inner``: the wrapped gymnax environment's state."""

    inner: Any


@struct.dataclass
class ContextualParams(EnvParams):
    """``physics``: the gymnax ``EnvParams`` holding this task's context."""

    physics: Any


class ContextualClassicControl(Environment[ContextualState, ContextualParams]):
    """Base of the contextual gymnax families (see the module docstring)."""

    episodes_end_early = True  # gymnax's terminations (a pole falls)

    #: gymnax id of the wrapped environment (the throughput reference).
    gymnax_id: str = ""
    #: context variable name (a gymnax ``EnvParams`` field) -> default value.
    defaults: dict[str, float] = {}

    def __init__(
        self,
        mode: str = "all",
        variables: tuple[str, ...] | None = None,
        ranges: dict[str, tuple[float, float]] | None = None,
        horizon: int | None = None,
        observe_context: bool = False,
    ):
        names = tuple(self.defaults)
        self.mode = check_choice(self.name, "mode", mode, MODES)
        variables = names if variables is None else tuple(variables)
        for var in variables:
            check_choice(self.name, "variables", var, names)
        if not variables or len(set(variables)) != len(variables):
            raise ValueError(
                f"{self.name}: `variables` must be distinct names from {names}, "
                f"got {variables!r}"
            )
        self.variables = variables
        self.ranges = {v: (0.5 * d, 2.0 * d) for v, d in self.defaults.items()}
        for var, bounds in (ranges or {}).items():
            check_choice(self.name, "ranges", var, names)
            ok = isinstance(bounds, tuple | list) and len(bounds) == 2
            if not ok or not 0 < bounds[0] <= bounds[1]:
                raise ValueError(
                    f"{self.name}: `ranges[{var!r}]` must be (low, high) with "
                    f"0 < low <= high, got {bounds!r}"
                )
            self.ranges[var] = (float(bounds[0]), float(bounds[1]))
        if not isinstance(observe_context, bool):
            raise ValueError(
                f"{self.name}: `observe_context` must be True or False, "
                f"got {observe_context!r}"
            )
        self.observe_context = observe_context
        self.env = self._make_gymnax()
        gymnax_default = self.env.default_params
        if horizon is None:
            horizon = int(gymnax_default.max_steps_in_episode)
        self.horizon = check_int(self.name, "horizon", horizon, 1)
        self.num_tasks = None
        self._base = jax.tree.map(jnp.asarray, gymnax_default)

    def _make_gymnax(self) -> Any:
        raise NotImplementedError

    def _derive(self, physics: Any) -> Any:
        """Recompute fields that depend on the context (CartPole's masses)."""
        return physics

    # ---------------------------------------------------------------- tasks
    def context_params(self, **context: Any) -> ContextualParams:
        """Params with the given context values (the rest at their defaults)."""
        unknown = sorted(set(context) - set(self.defaults))
        if unknown:
            raise ValueError(
                f"{self.name}: unknown context variable(s) {unknown}; valid: "
                f"{tuple(self.defaults)}"
            )
        values = {
            v: jnp.asarray(context.get(v, d), jnp.float32)
            for v, d in self.defaults.items()
        }
        physics = self._base.replace(
            max_steps_in_episode=jnp.int32(self.horizon), **values
        )
        return ContextualParams(
            max_steps_in_episode=jnp.int32(self.horizon),
            physics=self._derive(physics),
        )

    def context(self, params: ContextualParams) -> jax.Array:
        """``[num_context]`` the context values, in ``defaults`` order."""
        return jnp.stack([getattr(params.physics, v) for v in self.defaults])

    @property
    def default_params(self) -> ContextualParams:
        return self.context_params()

    def sample_params(self, key: jax.Array) -> ContextualParams:
        """A context drawn in ``mode`` ("all" or "one" variable at a time)."""
        key_values, key_pick = jax.random.split(key)
        low = jnp.array([self.ranges[v][0] for v in self.variables], jnp.float32)
        high = jnp.array([self.ranges[v][1] for v in self.variables], jnp.float32)
        drawn = jax.random.uniform(
            key_values, (len(self.variables),), minval=low, maxval=high
        )
        if self.mode == "one":
            pick = jax.random.randint(key_pick, (), 0, len(self.variables))
            default = jnp.array([self.defaults[v] for v in self.variables], jnp.float32)
            drawn = jnp.where(jnp.arange(len(self.variables)) == pick, drawn, default)
        return self.context_params(**dict(zip(self.variables, drawn, strict=True)))

    # ------------------------------------------------------------- dynamics
    def _obs(self, obs: jax.Array, params: ContextualParams) -> jax.Array:
        if not self.observe_context:
            return obs
        scale = jnp.array(list(self.defaults.values()), jnp.float32)
        return jnp.concatenate([obs, self.context(params) / scale])

    def reset_env(self, key: jax.Array, params: ContextualParams):
        obs, inner = self.env.reset_env(key, params.physics)
        return self._obs(obs, params), ContextualState(time=inner.time, inner=inner)

    def step_env(self, key: jax.Array, state: ContextualState, action: Any, params):
        obs, inner, reward, terminated, info = self.env.step_env(
            key, state.inner, action, params.physics
        )
        state = ContextualState(time=inner.time, inner=inner)
        return self._obs(obs, params), state, reward, terminated, info

    def action_space(self, params: ContextualParams | None = None):
        params = self.default_params if params is None else params
        return self.env.action_space(params.physics)

    def observation_space(self, params: ContextualParams | None = None):
        params = self.default_params if params is None else params
        space = self.env.observation_space(params.physics)
        if not self.observe_context:
            return space
        shape = (space.shape[0] + len(self.defaults),)
        return spaces.Box(-jnp.inf, jnp.inf, shape, jnp.float32)


class CartPoleContextual(ContextualClassicControl):
    """CartPole-v1 with gravity, cart mass, pole mass and (half) pole length."""

    gymnax_id = "CartPole-v1"
    defaults = {"gravity": 9.8, "masscart": 1.0, "masspole": 0.1, "length": 0.5}

    def _make_gymnax(self):
        from gymnax.environments.classic_control.cartpole import CartPole

        return CartPole()

    def _derive(self, physics):
        return physics.replace(
            total_mass=physics.masscart + physics.masspole,
            polemass_length=physics.masspole * physics.length,
        )


class PendulumContextual(ContextualClassicControl):
    """Pendulum-v1 with mass ``m``, length ``l`` and gravity ``g``."""

    gymnax_id = "Pendulum-v1"
    defaults = {"m": 1.0, "l": 1.0, "g": 10.0}

    def _make_gymnax(self):
        from gymnax.environments.classic_control.pendulum import Pendulum

        return Pendulum()


class MountainCarContextual(ContextualClassicControl):
    """MountainCar-v0 with engine ``force`` and ``gravity``."""

    gymnax_id = "MountainCar-v0"
    defaults = {"force": 0.001, "gravity": 0.0025}

    def _make_gymnax(self):
        from gymnax.environments.classic_control.mountain_car import MountainCar

        return MountainCar()


class AcrobotContextual(ContextualClassicControl):
    """Acrobot-v1 with both link lengths and masses."""

    gymnax_id = "Acrobot-v1"
    defaults = {
        "link_length_1": 1.0,
        "link_length_2": 1.0,
        "link_mass_1": 1.0,
        "link_mass_2": 1.0,
    }

    def _make_gymnax(self):
        from gymnax.environments.classic_control.acrobot import Acrobot

        return Acrobot()
