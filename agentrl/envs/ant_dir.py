"""Ant-Dir: walk in a hidden direction on the circle (Meta-DT's AntDir).

Brax's ``ant`` on MJX physics (:mod:`agentrl.envs.mjx_base`; Brax's MJX
solver settings, 5 substeps of 0.01 s, ``dt = 0.05``), with the reward of
Meta-DT's ``AntDirEnv``::

    reward = v_xy . (cos(angle), sin(angle)) - 0.5 * sum(action ** 2) + 1

where ``v_xy`` is the torso's planar velocity over the step (from its pose
``x``, MuJoCo's ``xpos``, which Meta-DT's ``get_body_com`` reads) and ``+1`` the
survive reward (paid on every step: the references never terminate). The
task is ``params.angle`` (a scalar, radians): ``num_tasks=50`` (default,
Meta-DT's count, 45 for training) fixed angles drawn once from
``U(0, 2 pi)`` with NumPy's PCG64 from ``task_seed``; ``num_tasks=0`` draws
one per task. Episodes never terminate and are truncated after
``horizon=200`` steps. The start state is Brax's: ``init_q + U(-0.1, 0.1)``
positions and ``0.1 * N(0, 1)`` velocities.

Observation ``[27]`` float32: ``q[2:]`` (13: torso height and orientation,
joint angles) and ``qd`` (14), as Meta-DT's and Brax's. Action ``[8]`` in
``[-1, 1]``. No oracle. Meta-DT's contact cost (``5e-4`` times the clipped
external contact forces squared) is left out, as in Brax: MJX's step does
not compute ``cfrc_ext``.

Static: ``horizon``, ``num_tasks``, ``task_seed``. Traced: ``angle``,
``max_steps_in_episode``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from agentrl.envs.base import EnvParams
from agentrl.envs.mjx_base import TWO_PI, ScalarTaskLocomotion

ANT_CTRL_COST = 0.5
ANT_SURVIVE_REWARD = 1.0


@struct.dataclass
class AntDirParams(EnvParams):
    """``angle`` [] float32: the direction to walk in, radians (the task)."""

    angle: jax.Array


class AntDir(ScalarTaskLocomotion):
    """Walk in a hidden direction (see the module doc)."""

    brax_name = "ant"
    brax_kwargs = {"n_frames": 5}
    reset_noise = 0.1
    velocity_noise = "normal"
    task_field = "angle"
    task_parameter_name = "direction angle (rad)"
    params_class = AntDirParams

    def __init__(self, horizon: int = 200, num_tasks: int = 50, task_seed: int = 0):
        super().__init__(horizon, num_tasks, task_seed, 0.0, TWO_PI)

    @property
    def observation_size(self) -> int:
        return 27

    def observe(self, ps: Any) -> jax.Array:
        return jnp.concatenate([ps.q[2:], ps.qd])

    def reward(self, before, after, action, params: AntDirParams):
        # the torso pose x, as Meta-DT's get_body_com("torso") (mujoco's xpos)
        velocity = (after.x.pos[0, :2] - before.x.pos[0, :2]) / self.dt
        heading = jnp.stack([jnp.cos(params.angle), jnp.sin(params.angle)])
        ctrl_cost = ANT_CTRL_COST * jnp.sum(jnp.square(action))
        return jnp.dot(velocity, heading) - ctrl_cost + ANT_SURVIVE_REWARD
