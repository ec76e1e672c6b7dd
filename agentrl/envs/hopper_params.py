"""Hopper-Params: Hopper with randomised physics (Meta-DT's HopperRandParams).

Brax's ``hopper`` on MJX physics (:mod:`agentrl.envs.mjx_base`; 4 substeps
of 2 ms, ``dt = 0.008``), whose task is its body masses, inertias, joint
damping and geom friction, drawn as rand_param_envs draws them
(:mod:`agentrl.envs.mjx_physics`). Reward, as Meta-DT's
``HopperRandParamsEnv`` (alive bonus 0, no termination)::

    reward = v - 1e-3 * sum(action ** 2)

Episodes never terminate and are truncated after ``horizon=200`` steps. The
start state is Brax's: ``init_q + U(-5e-3, 5e-3)`` positions and
``U(-5e-3, 5e-3)`` velocities.

Time step: the frame skip, 4, is the reference's (rand_param_envs'
``RandomEnv`` builds every model with 4), the substep is not. Meta-DT's
hopper loads rand_param_envs' own ``hopper.xml`` (mujoco-py), whose RK4
timestep is 4 ms, in Meta-DT's vendored copy
(``src/tp_envs/rand_param_envs/gym/envs/mujoco/assets/hopper.xml``) and in
the upstream package (dennisl88/rand_param_envs) alike: ``dt = 0.016``,
twice this family's. A 200-step episode is 3.2 s of motion there and 1.6 s
here; the reward is a velocity, on the same scale in both, but each action
is held half as long here, an episode covers half the time and a larger
share of it goes to getting started, so returns are not comparable to
Meta-DT's. The default stays Brax's 2 ms, with which every Hopper-Params
number here was measured.

Observation ``[11]`` float32: torso height, ``q[2:]`` and ``clip(qd, -10,
10)``, as Brax's and upstream rand_param_envs' hopper (Meta-DT's config
says ``state_dim 11``). Action ``[3]`` in ``[-1, 1]``. No oracle.
``num_tasks=50`` fixed tasks (Meta-DT: 45 for training) or ``0``
(continuous).

Meta-DT's in-repo copy observes the full ``qpos``, the x position included,
and unclipped ``qvel`` (``[12]``), but its ``src/envs.py`` imports the
top-level ``rand_param_envs`` package, which is not in the repository, so
which of the two its runs observed is not certain; nor which reward (the
upstream hopper pays an alive bonus of 1 and terminates on a fall; the
reward above is the in-repo copy's). Both have the 4 ms timestep.

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
