"""Hopper-Params: Hopper with randomised physics (Meta-DT's HopperRandParams).

Brax's ``hopper`` on MJX physics (:mod:`agentrl.envs.mjx_base`; 4 substeps
of 2 ms, ``dt = 0.008``, the references' frame skip), whose task is its body
masses, inertias, joint damping and geom friction, drawn as rand_param_envs
draws them (:mod:`agentrl.envs.mjx_physics`). Reward, as Meta-DT's
``HopperRandParamsEnv`` (alive bonus 0, no termination)::

    reward = v - 1e-3 * sum(action ** 2)

Episodes never terminate and are truncated after ``horizon=200`` steps. The
start state is Brax's: ``init_q + U(-5e-3, 5e-3)`` positions and
``U(-5e-3, 5e-3)`` velocities.

Observation ``[11]`` float32: torso height, ``q[2:]`` and ``clip(qd, -10,
10)``, as Brax's and rand_param_envs' hopper (Meta-DT's variant observes the
full ``qpos``, the x position included, and unclipped ``qvel``: ``[12]``).
Action ``[3]`` in ``[-1, 1]``. No oracle. ``num_tasks=50`` fixed tasks
(Meta-DT: 45 for training) or ``0`` (continuous).

Static: ``horizon``, ``num_tasks``, ``task_seed``, ``log_scale_limit``,
``randomise``. Traced: every field of :class:`~agentrl.envs.mjx_physics.
PhysicsParams`.
"""

from __future__ import annotations

from agentrl.envs.mjx_physics import PlanarWalker


class HopperParams(PlanarWalker):
    """Hopper whose physics is the hidden task (see the module doc)."""

    brax_name = "hopper"
    brax_kwargs = {"n_frames": 4}

    def reward(self, before, after, action, params):
        return self.forward_reward(before, after, action)
