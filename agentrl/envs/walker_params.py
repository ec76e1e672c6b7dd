"""Walker-Params: Walker2d with randomised physics (T2MIR's WalkerRandParams).

Brax's ``walker2d`` on MJX physics (:mod:`agentrl.envs.mjx_base`; 4
substeps of 2 ms, ``dt = 0.008``, T2MIR's: below), whose task is its body
masses, inertias, joint damping and geom friction, drawn as rand_param_envs
draws them (:mod:`agentrl.envs.mjx_physics`: ``1.5 ** U(-3, 3)`` factors,
``1.3 ** U(-3, 3)`` for damping). Reward, as T2MIR's
``WalkerRandParamsEnv`` (which turns termination into a lost alive bonus)::

    reward = v + 1[healthy] - 1e-3 * sum(action ** 2)
    healthy = 0.8 < torso height < 2.0 and -1 < torso angle < 1

Episodes never terminate and are truncated after ``horizon=200`` steps. The
start state is Brax's: ``init_q + U(-5e-3, 5e-3)`` positions and
``U(-5e-3, 5e-3)`` velocities.

Observation ``[17]`` float32 (torso height, ``q[2:]``, ``clip(qd, -10,
10)``; T2MIR's and Brax's). Action ``[6]`` in ``[-1, 1]``. No oracle.
``num_tasks=50`` fixed tasks (T2MIR: 45 train, 5 test) or ``0``
(continuous); ``randomise`` picks the fields (Meta-DT's walker randomises
only ``("body_mass", "geom_friction")``).

Time step: T2MIR's ``WalkerRandParams-v0`` is rand_param_envs'
``RandomEnv`` on gymnasium, which builds the model with frame skip 4
whatever the subclass asks, on gymnasium's ``walker2d.xml`` (timestep 2 ms;
the env's ``render_fps: 125`` passes gymnasium's check against ``1 / dt``):
``dt = 0.008``, as here. Meta-DT's walker is rand_param_envs on mujoco-py,
whose own ``walker2d.xml`` has an RK4 timestep of 4 ms: ``dt = 0.016``,
twice ours, a 200-step episode 3.2 s of motion to our 1.6 s. T2MIR's task
file (``datasets/WalkerRandParams-v0``) was written by a mujoco-py variant
(its ``(8, 1)``-shaped fields are what the gymnasium ``set_task``
flattens), so at which ``dt`` T2MIR's own data were collected the
repository does not show.

Static: ``horizon``, ``num_tasks``, ``task_seed``, ``log_scale_limit``,
``randomise``. Traced: every field of :class:`~agentrl.envs.mjx_physics.
PhysicsParams`.
"""

from __future__ import annotations

import jax.numpy as jnp

from agentrl.envs.mjx_physics import PlanarWalker

HEALTHY_HEIGHT = (0.8, 2.0)
HEALTHY_ANGLE = (-1.0, 1.0)


class WalkerParams(PlanarWalker):
    """Walker2d whose physics is the hidden task (see the module doc)."""

    brax_name = "walker2d"
    brax_kwargs = {"n_frames": 4}

    def reward(self, before, after, action, params):
        height, angle = self.torso_height(after), after.q[2]
        healthy = (
            (height > HEALTHY_HEIGHT[0])
            & (height < HEALTHY_HEIGHT[1])
            & (angle > HEALTHY_ANGLE[0])
            & (angle < HEALTHY_ANGLE[1])
        )
        bonus = jnp.where(healthy, 1.0, 0.0)
        return self.forward_reward(before, after, action) + bonus
