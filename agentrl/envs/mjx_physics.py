"""Randomised physical parameters as the task (rand_param_envs, on MJX).

The ``*_params`` families (Walker-Params, Hopper-Params) draw a task as
rand_param_envs' ``RandomEnv.sample_tasks`` does, the way T2MIR and Meta-DT
use it: every entry of each randomised model field is multiplied by its own
log-uniform factor ``base ** U(-log_scale_limit, log_scale_limit)``
(``log_scale_limit=3``):

==================  =====  =====================================
field               base   shape
==================  =====  =====================================
``body_mass``       1.5    ``[nbody]``
``body_inertia``    1.5    ``[nbody, 3]``
``dof_damping``     1.3    ``[nv]``
``geom_friction``   1.5    ``[ngeom, 3]``
==================  =====  =====================================

``params`` (:class:`PhysicsParams`) holds the resulting absolute values, and
``task_sys`` writes them into Brax's ``sys`` inside ``reset`` and ``step``,
so vmapping over params runs each task's own physics. As in the references
(which ``setattr`` the fields of a compiled mujoco model), quantities MuJoCo
derives from these at compile time (``body_subtreemass``,
``dof_invweight0``) keep the default model's values.

``num_tasks=50`` (default, the references' count) fixes the task set: all
four fields' factors are drawn once with NumPy's PCG64 from ``task_seed``
(a field left out of ``randomise`` keeps factor 1, and the others keep their
draws); ``num_tasks=0`` draws the factors per task in JAX.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from agentrl.envs.base import EnvParams
from agentrl.envs.mjx_base import RANDOMISED_FIELDS, MjxLocomotion
from agentrl.envs.validate import check_choice, check_float


@struct.dataclass
class PhysicsParams(EnvParams):
    """This task's model fields, float32: ``body_mass [nbody]``,
    ``body_inertia [nbody, 3]``, ``dof_damping [nv]``, ``geom_friction
    [ngeom, 3]``."""

    body_mass: jax.Array
    body_inertia: jax.Array
    dof_damping: jax.Array
    geom_friction: jax.Array


class RandomPhysics(MjxLocomotion):
    """A MuJoCo family whose task is its physical parameters (module doc)."""

    def __init__(
        self,
        horizon: int = 200,
        num_tasks: int = 50,
        task_seed: int = 0,
        log_scale_limit: float = 3.0,
        randomise: tuple[str, ...] = tuple(RANDOMISED_FIELDS),
    ):
        super().__init__(horizon, num_tasks, task_seed)
        limit = check_float(self.name, "log_scale_limit", log_scale_limit, 0.0, 10.0)
        self.log_scale_limit = limit
        randomise = tuple(randomise)
        for field in randomise:
            check_choice(self.name, "randomise", field, tuple(RANDOMISED_FIELDS))
        if not randomise or len(set(randomise)) != len(randomise):
            raise ValueError(
                f"{self.name}: `randomise` must be distinct names from "
                f"{tuple(RANDOMISED_FIELDS)}, got {randomise!r}"
            )
        self.randomise = randomise
        self.defaults = {
            f: np.asarray(getattr(self.sys, f), np.float32) for f in RANDOMISED_FIELDS
        }
        self._tables = None
        if self.num_tasks is not None:
            rng = self.task_rng()
            self._tables = {
                f: self._scaled(
                    f, rng.uniform(-limit, limit, (self.num_tasks, *d.shape))
                )
                for f, d in self.defaults.items()
            }

    def _scaled(self, field: str, exponents: Any) -> Any:
        """The default values times ``base ** exponents`` (factor 1 if not
        randomised); NumPy in, NumPy out, or JAX in, JAX out."""
        xp = np if isinstance(exponents, np.ndarray) else jnp
        if field not in self.randomise:
            exponents = xp.zeros_like(exponents)
        factor = xp.power(RANDOMISED_FIELDS[field], exponents)
        return (self.defaults[field] * factor).astype(np.float32)

    def params_of(self, fields: dict[str, Any]) -> PhysicsParams:
        return PhysicsParams(
            max_steps_in_episode=jnp.int32(self.horizon),
            **{f: jnp.asarray(v, jnp.float32) for f, v in fields.items()},
        )

    @property
    def default_params(self) -> PhysicsParams:
        if self._tables is not None:
            return self.params_for_task(jnp.int32(0))
        return self.params_of(self.defaults)

    def params_for_task(self, task_id: jax.Array) -> PhysicsParams:
        if self._tables is None:
            return super().params_for_task(task_id)
        return self.params_of(
            {f: jnp.asarray(t)[task_id] for f, t in self._tables.items()}
        )

    def sample_params(self, key: jax.Array) -> PhysicsParams:
        if self._tables is not None:
            return self.params_for_task(self.task_index(key))
        return self.draw_params(key)

    def draw_params(self, key: jax.Array) -> PhysicsParams:
        """A fresh body: every randomised field's default times ``base ** u``,
        ``u ~ U(-limit, limit)``, the distribution the fixed bodies came from."""
        keys = jax.random.split(key, len(RANDOMISED_FIELDS))
        limit = self.log_scale_limit
        fields = {}
        for k, (f, d) in zip(keys, self.defaults.items(), strict=True):
            exponents = jax.random.uniform(k, d.shape, minval=-limit, maxval=limit)
            fields[f] = self._scaled(f, exponents)
        return self.params_of(fields)

    #: The scalar evaluation plots returns against (the task is many numbers;
    #: the total mass is the one that most sets how fast a body can run).
    task_parameter_name = "total body mass (x default)"

    def task_parameter(self, params: PhysicsParams) -> jax.Array:
        """``[]`` the task's total body mass over the default model's."""
        default_total = float(self.defaults["body_mass"].sum())
        return jnp.sum(params.body_mass) / default_total

    def task_sys(self, params: PhysicsParams) -> Any:
        return self.sys.replace(
            body_mass=params.body_mass,
            body_inertia=params.body_inertia,
            dof_damping=params.dof_damping,
            geom_friction=params.geom_friction,
        )


class PlanarWalker(RandomPhysics):
    """Brax's walker2d / hopper observation and forward velocity.

    Observation: the torso height, the other joint positions ``q[2:]`` and
    ``clip(qd, -10, 10)``, as Brax's and rand_param_envs' (whose ``rootz``
    position is the height). The height is Brax's, the torso pose
    ``x.pos[0, 2]``, which lags ``q`` by one 2 ms substep; the rewards use
    ``q`` as the references do (:meth:`torso_height`).
    """

    reset_noise = 5e-3
    velocity_noise = "uniform"
    ctrl_cost_weight = 1e-3

    @property
    def observation_size(self) -> int:
        return 2 * int(self.sys.nq) - 1

    def observe(self, ps: Any) -> jax.Array:
        position = ps.q.at[1].set(ps.x.pos[0, 2])[1:]
        return jnp.concatenate([position, jnp.clip(ps.qd, -10, 10)])

    def forward_reward(self, before: Any, after: Any, action: jax.Array):
        """Forward velocity minus the control cost (both references)."""
        velocity = self.forward_velocity(before, after)
        return velocity - self.ctrl_cost_weight * jnp.sum(jnp.square(action))

    def torso_height(self, ps: Any) -> jax.Array:
        """The torso's height from ``q`` (the references' ``qpos[1]``, whose
        ``rootz`` is the height; Brax's ``x.pos[0, 2]`` lags a substep)."""
        body_z = np.asarray(self.sys.body_pos)[1, 2]  # NumPy: concrete in a trace
        return ps.q[1] + float(body_z - np.asarray(self.sys.qpos0)[1])
