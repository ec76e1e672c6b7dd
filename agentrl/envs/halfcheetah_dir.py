"""HalfCheetah-Dir: run forward or backward (MAML's task, Meta-DT's settings).

Brax's ``halfcheetah`` on MJX physics, the observation and start state of
:mod:`agentrl.envs.halfcheetah_vel` (``[20]``, or ``[17]`` with
``observe_torso=False``), with the reward of Meta-DT's ``HalfCheetahDirEnv``::

    reward = direction * v - 0.05 * sum(action ** 2)

where ``v = Δq[0] / dt`` is the forward velocity over the step. Two tasks:
``params.direction`` is ``+1`` (task 0, forward) or ``-1`` (task 1,
backward); Meta-DT's task list alternates the two signs and trains on both,
so a held-out task repeats a training direction (``task_split`` of two tasks
keeps both for training at the default fraction). Episodes never terminate
and are truncated after ``horizon=200`` steps. No oracle.

Static: ``horizon``, ``observe_torso``. Traced: ``direction``,
``max_steps_in_episode``.
"""

from __future__ import annotations

import jax
import numpy as np
from flax import struct

from agentrl.envs.base import EnvParams
from agentrl.envs.halfcheetah_vel import HalfCheetahBase

DIRECTIONS = (1.0, -1.0)


@struct.dataclass
class HalfCheetahDirParams(EnvParams):
    """``direction`` [] float32: ``+1`` forward or ``-1`` backward (the task)."""

    direction: jax.Array


class HalfCheetahDir(HalfCheetahBase):
    """Run in a hidden direction (see the module doc)."""

    task_field = "direction"
    task_parameter_name = "direction (+1 forward, -1 backward)"
    params_class = HalfCheetahDirParams
    #: two directions and nothing between them: no task beyond the fixed two
    draw_params = None

    def __init__(self, horizon: int = 200, observe_torso: bool = True):
        super().__init__(horizon, 2, 0, -1.0, 1.0, observe_torso)
        self._table = np.asarray(DIRECTIONS, np.float32)

    def reward(self, before, after, action, params: HalfCheetahDirParams):
        velocity = self.forward_velocity(before, after)
        return params.direction * velocity - self.ctrl_cost(action)
