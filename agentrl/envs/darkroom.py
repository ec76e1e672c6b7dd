"""Dark Room (AD, AD-ε, DPT, T2MIR) and Dark Room Hard.

A ``size x size`` grid; the agent observes only its own cell id
(``Discrete(size * size)``, ``y * size + x``), never the goal. The goal cell is
the task (``params.goal [2]``, task id = goal cell id, ``size**2`` tasks).
Five actions: up, down, left, right, no-op (see :mod:`agentrl.envs.grid`).

``darkroom`` (defaults: 9x9, ``horizon=20``, start at the centre): reward 1 for
every step after which the agent stands on the goal; reaching the goal does
not end the episode, which is truncated after ``horizon`` steps. The optimal
return is ``max(horizon - max(d, 1) + 1, 0)`` with ``d`` the Manhattan
distance from the start to the goal (a goal on the start cell pays every step).
The DPT / T2MIR variant is ``make("darkroom", size=10, horizon=100)``; with
``start="center"`` (the default) the agent starts at ``(5, 5)``, and with
``start="corner"`` at ``(0, 0)`` as in DPT's reference code.

``darkroom_hard`` (defaults: 17x17, ``horizon=20``): reward 1 only on the
first arrival at the goal, and the episode terminates there. Optimal return
``1`` if ``max(d, 1) <= horizon`` else ``0``.

``uniform_state(key, params)`` draws the agent's cell uniformly (DPT's
uniform roll-in, ``agentrl.sources.rollin``).

Goal region: ``min_goal_distance`` and ``max_goal_distance`` (Manhattan
distance from the start cell; defaults 0 and ``None``: every cell) restrict
the goals to a band around the start, e.g. train on near goals
(``max_goal_distance=4``) and evaluate on the far ones
(``min_goal_distance=5``, :mod:`agentrl.evaluate.shift`). With a region the
task ids ``0 .. num_tasks - 1`` number its cells in row-major order; without
one, task id = goal cell id as always.

Static: ``size``, ``horizon``, ``start``, the goal region. Traced: ``goal``,
``max_steps_in_episode``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

import agentrl.envs.grid as grid
import agentrl.envs.spaces as spaces
from agentrl.envs.base import Environment, EnvParams, EnvState
from agentrl.envs.validate import check_choice, check_int


@struct.dataclass
class DarkRoomState(EnvState):
    """``pos [2]`` int32, the agent's ``[x, y]``."""

    pos: jax.Array


@struct.dataclass
class DarkRoomParams(EnvParams):
    """``goal [2]`` int32, the goal cell ``[x, y]`` (the task)."""

    goal: jax.Array


class DarkRoom(Environment[DarkRoomState, DarkRoomParams]):
    """Dense-reward Dark Room of Algorithm Distillation."""

    terminate_on_goal = False
    stochastic_reset = False

    def __init__(
        self,
        size: int = 9,
        horizon: int = 20,
        start: str = "center",
        min_goal_distance: int = 0,
        max_goal_distance: int | None = None,
    ):
        self.size = check_int(self.name, "size", size, 2)
        self.horizon = check_int(self.name, "horizon", horizon, 1)
        self.start = check_choice(self.name, "start", start, grid.START_CHOICES)
        self.min_goal_distance = check_int(
            self.name, "min_goal_distance", min_goal_distance, 0
        )
        self.max_goal_distance = max_goal_distance
        if max_goal_distance is not None:
            check_int(self.name, "max_goal_distance", max_goal_distance, 0)
        self._goal_cells = self._region_cells()
        self.num_tasks = (
            self.size * self.size if self._goal_cells is None else len(self._goal_cells)
        )

    def _region_cells(self) -> np.ndarray | None:
        """The goal cells of the region (row-major), ``None`` for every cell."""
        if self.min_goal_distance == 0 and self.max_goal_distance is None:
            return None
        cells = np.arange(self.size * self.size)
        x, y = cells % self.size, cells // self.size
        sx, sy = (int(v) for v in grid.start_position(self.size, self.start))
        distance = np.abs(x - sx) + np.abs(y - sy)
        far_enough = distance >= self.min_goal_distance
        limit = self.max_goal_distance
        near_enough = distance <= (2 * self.size if limit is None else limit)
        inside = cells[far_enough & near_enough]
        if not len(inside):
            raise ValueError(
                f"{self.name}: no goal cell lies at a distance in "
                f"[min_goal_distance={self.min_goal_distance}, max_goal_distance="
                f"{self.max_goal_distance}] of the start on a {self.size}x"
                f"{self.size} grid"
            )
        return inside.astype(np.int32)

    @property
    def default_params(self) -> DarkRoomParams:
        return self.params_for_task(jnp.int32(self.num_tasks - 1))

    def params_for_task(self, task_id: jax.Array) -> DarkRoomParams:
        cell = task_id
        if self._goal_cells is not None:
            cell = jnp.asarray(self._goal_cells)[task_id]
        return DarkRoomParams(
            max_steps_in_episode=jnp.int32(self.horizon),
            goal=grid.cell_pos(cell, self.size),
        )

    def sample_params(self, key: jax.Array) -> DarkRoomParams:
        """A goal cell uniform over the grid (over the goal region, if any)."""
        return self.params_for_task(jax.random.randint(key, (), 0, self.num_tasks))

    def reset_env(self, key: jax.Array, params: DarkRoomParams):
        state = DarkRoomState(time=jnp.int32(0), pos=self._start())
        return grid.cell_id(state.pos, self.size), state

    def _start(self) -> jax.Array:
        return grid.start_position(self.size, self.start)

    def uniform_state(self, key: jax.Array, params: DarkRoomParams):
        """``(obs, state)`` at a cell uniform over the grid, time 0.

        DPT's uniform roll-in draws each context transition from such a state.
        """
        pos = jax.random.randint(key, (2,), 0, self.size, dtype=jnp.int32)
        state = DarkRoomState(time=jnp.int32(0), pos=pos)
        return grid.cell_id(pos, self.size), state

    def step_env(self, key: jax.Array, state: DarkRoomState, action: Any, params):
        pos = grid.move(state.pos, jnp.asarray(action, jnp.int32), self.size)
        on_goal = jnp.all(pos == params.goal)
        reward = on_goal.astype(jnp.float32)
        terminated = jnp.logical_and(on_goal, self.terminate_on_goal)
        state = DarkRoomState(time=state.time + 1, pos=pos)
        return grid.cell_id(pos, self.size), state, reward, terminated, {}

    def action_space(self, params=None) -> spaces.Discrete:
        return spaces.Discrete(grid.NUM_ACTIONS)

    def observation_space(self, params=None) -> spaces.Discrete:
        return spaces.Discrete(self.size * self.size)

    def optimal_action(self, state: DarkRoomState, params: DarkRoomParams):
        return grid.steer(state.pos, params.goal)

    def optimal_return(self, params: DarkRoomParams) -> jax.Array:
        steps = jnp.maximum(grid.manhattan(self._start(), params.goal), 1)
        horizon = params.max_steps_in_episode
        return jnp.maximum(horizon - steps + 1, 0).astype(jnp.float32)


class DarkRoomHard(DarkRoom):
    """Sparse Dark Room: reward once on reaching the goal, which ends the episode."""

    terminate_on_goal = True
    episodes_end_early = True

    def __init__(
        self,
        size: int = 17,
        horizon: int = 20,
        start: str = "center",
        min_goal_distance: int = 0,
        max_goal_distance: int | None = None,
    ):
        super().__init__(size, horizon, start, min_goal_distance, max_goal_distance)

    def optimal_return(self, params: DarkRoomParams) -> jax.Array:
        steps = jnp.maximum(grid.manhattan(self._start(), params.goal), 1)
        return (steps <= params.max_steps_in_episode).astype(jnp.float32)
