"""HalfCheetah-Vel: run at a hidden target velocity (T2MIR's and Meta-DT's).

Brax's ``halfcheetah`` on MJX physics (:mod:`agentrl.envs.mjx_base`; 5
substeps of 0.01 s, ``dt = 0.05``), with the reward of the references'
``HalfCheetahVelEnv``::

    reward = -|v - target_velocity| - 0.05 * sum(action ** 2)

where ``v = Δq[0] / dt`` is the forward velocity over the step (the
references' ``Δqpos[0] / dt``; Brax's own reward differences the torso pose
``x``, which lags ``q`` by one substep). The task is
``params.target_velocity`` (a scalar): ``num_tasks=50`` (default, the
references' count; T2MIR trains on 45 and evaluates on 5) fixed velocities
drawn once from ``U(0, max_velocity)`` (``max_velocity=3``, the references'
range) with NumPy's PCG64 from ``task_seed``; ``num_tasks=0`` draws one per
task. Episodes never terminate and are truncated after ``horizon=200``
steps. The start state is Brax's: ``init_q + U(-0.1, 0.1)`` positions and
``0.1 * N(0, 1)`` velocities.

Observation ``[20]`` float32 (``observe_torso=True``, the references'):
``q[1:]`` (8), ``qd`` (9) and the torso's world position (3, the
references' ``get_body_com("torso")``); ``observe_torso=False`` gives Brax's
own ``[17]``. Action ``[6]`` in ``[-1, 1]`` (joint torques, scaled by the
gears). No oracle.

Static: ``horizon``, ``num_tasks``, ``max_velocity``, ``task_seed``,
``observe_torso``. Traced: ``target_velocity``, ``max_steps_in_episode``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from agentrl.envs.base import EnvParams
from agentrl.envs.mjx_base import ScalarTaskLocomotion
from agentrl.envs.validate import check_float

#: The references' control cost weight for HalfCheetah-Vel and -Dir.
CHEETAH_CTRL_COST = 0.05


@struct.dataclass
class HalfCheetahVelParams(EnvParams):
    """``target_velocity`` [] float32: the forward speed to hold (the task)."""

    target_velocity: jax.Array


class HalfCheetahBase(ScalarTaskLocomotion):
    """Brax's halfcheetah with the references' observation (see the module doc)."""

    brax_name = "halfcheetah"
    brax_kwargs = {"n_frames": 5}
    reset_noise = 0.1
    velocity_noise = "normal"

    def __init__(self, horizon, num_tasks, task_seed, low, high, observe_torso):
        if not isinstance(observe_torso, bool):
            raise ValueError(
                f"{self.name}: `observe_torso` must be True or False, "
                f"got {observe_torso!r}"
            )
        self.observe_torso = observe_torso
        super().__init__(horizon, num_tasks, task_seed, low, high)

    @property
    def observation_size(self) -> int:
        return 17 + 3 * self.observe_torso

    def observe(self, ps: Any) -> jax.Array:
        parts = [ps.q[1:], ps.qd]
        if self.observe_torso:
            parts.append(ps.x.pos[0])
        return jnp.concatenate(parts)

    def ctrl_cost(self, action: jax.Array) -> jax.Array:
        return CHEETAH_CTRL_COST * jnp.sum(jnp.square(action))


class HalfCheetahVel(HalfCheetahBase):
    """Hold a hidden target velocity (see the module doc)."""

    task_field = "target_velocity"
    task_parameter_name = "target velocity (m/s)"
    params_class = HalfCheetahVelParams

    def __init__(
        self,
        horizon: int = 200,
        num_tasks: int = 50,
        max_velocity: float = 3.0,
        task_seed: int = 0,
        observe_torso: bool = True,
    ):
        max_velocity = check_float(self.name, "max_velocity", max_velocity, 1e-6)
        super().__init__(
            horizon, num_tasks, task_seed, 0.0, max_velocity, observe_torso
        )

    def reward(self, before, after, action, params: HalfCheetahVelParams):
        velocity = self.forward_velocity(before, after)
        gap = jnp.abs(velocity - params.target_velocity)
        return -gap - self.ctrl_cost(action)
