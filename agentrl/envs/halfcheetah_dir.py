"""HalfCheetah-Dir: run forward or backward (MAML's task, Meta-DT's settings).

Brax's ``halfcheetah`` on MJX physics, the observation and start state of
:mod:`agentrl.envs.halfcheetah_vel` (``[20]``, or ``[17]`` with
``observe_torso=False``), with the reward of Meta-DT's ``HalfCheetahDirEnv``::

    reward = direction * v - 0.05 * sum(action ** 2)

where ``v = Δq[0] / dt`` is the forward velocity over the step. The task is
``params.direction``: ``num_tasks=4`` fixed tasks (Meta-DT's; any even
number from 4) that alternate ``+1`` (forward) and ``-1`` (backward), as
Meta-DT's ``sample_tasks`` does (``(-1) ** n``): task ``2k`` runs forward,
task ``2k + 1`` backward. Meta-DT trains on tasks 0 and 1 and tests on 2 and
3, so a test task repeats a training direction and the agent has to tell
which one from its context. :meth:`HalfCheetahDir.task_split` keeps that
for every split: it splits the pairs ``(2k, 2k + 1)`` rather than the tasks
(:func:`~agentrl.envs.tasks.split_task_ids` over ``num_tasks // 2`` pairs),
so training and each held-out split hold both directions; the default 4
tasks give one training pair and one test pair (no validation pair: that
takes at least two held-out pairs). Episodes never terminate and are
truncated after ``horizon=200`` steps. No oracle.

Static: ``horizon``, ``num_tasks``, ``observe_torso``. Traced:
``direction``, ``max_steps_in_episode``.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from flax import struct

from agentrl.envs.base import EnvParams
from agentrl.envs.halfcheetah_vel import HalfCheetahBase
from agentrl.envs.tasks import TaskSplit, split_task_ids
from agentrl.envs.validate import check_int

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
    #: two directions and nothing between them: no task beyond the fixed ones
    draw_params = None

    def __init__(
        self, horizon: int = 200, num_tasks: int = 4, observe_torso: bool = True
    ):
        if check_int(self.name, "num_tasks", num_tasks, 4) % 2:
            raise ValueError(
                f"{self.name}: `num_tasks` must be an even integer >= 4 (pairs "
                f"of a forward and a backward task), got {num_tasks!r}"
            )
        super().__init__(horizon, num_tasks, 0, -1.0, 1.0, observe_torso)
        self._table = np.resize(np.asarray(DIRECTIONS, np.float32), num_tasks)

    def task_split(
        self, train_fraction: float = 0.8, seed: int = 0, validation_share: float = 0.0
    ) -> TaskSplit:
        """Split the ``(forward, backward)`` pairs ``(2k, 2k + 1)``, not the
        tasks, so that every split holds both directions (module doc)."""
        pairs = split_task_ids(
            self.num_tasks // 2, train_fraction, seed, validation_share
        )

        def tasks(ids: np.ndarray) -> np.ndarray:
            return np.sort(np.concatenate([2 * ids, 2 * ids + 1])).astype(np.int32)

        return dataclasses.replace(
            pairs,
            train=tasks(pairs.train),
            test=tasks(pairs.test),
            validation=tasks(pairs.validation),
        )

    def reward(self, before, after, action, params: HalfCheetahDirParams):
        velocity = self.forward_velocity(before, after)
        return params.direction * velocity - self.ctrl_cost(action)
