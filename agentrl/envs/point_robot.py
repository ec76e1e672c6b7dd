"""Point-Robot: 2-D navigation to a hidden goal (meta-RL standard; T2MIR's).

The agent is a point in the plane that starts at the origin (or, with
``start_range=r``, uniformly in ``[-r, r]^2`` each episode: T2MIR's 0.1) and
observes its own position ``[2]`` float32, never the goal. An action ``[2]``
float32 is a displacement, clipped per axis to ``[-max_action, max_action]`` (default
``0.1``). The reward after each step is the negative Euclidean distance from
the new position to the goal; episodes never terminate and are truncated after
``horizon`` steps (default 20, the T2MIR setting).

Tasks (``params.goal [2]``), by ``goals``:

- ``"half_circle"`` (default, the PEARL-style variant): goals on the upper
  half circle of radius ``radius`` (default 1). ``num_goals=0``: a
  continuous task space, the angle uniform in ``[0, pi]``; ``num_goals=N``:
  ``N`` fixed goals at the evenly spaced angles ``pi * (i + 0.5) / N``.
- ``"uniform"`` (T2MIR's): goals uniform in the square ``[-radius,
  radius]^2``. ``num_goals=N`` (T2MIR: 50, split 45/5): ``N`` fixed goals
  drawn once with NumPy's PCG64 from ``goal_seed``, so every machine has the
  same goals, and held-out goals are not in narrow gaps between trained ones
  as on an evenly spaced half circle; ``num_goals=0``: drawn per task.

With ``num_goals=N`` the task space is finite: ``params_for_task(i)`` gives
goal ``i`` and ``sample_params`` draws one of them uniformly; otherwise
``num_tasks`` is ``None``. ``draw_params`` draws a fresh goal from the
layout's distribution either way (validation goals beyond the split's).

Oracle: after ``t`` steps from the origin the reachable set is exactly the box
``[-t * max_action, t * max_action]^2``, and the Euclidean projection of the
goal onto a box is per-axis clipping. The greedy action
``clip(goal - pos, -max_action, max_action)`` reaches that projection at every
``t``, so it minimises every step's distance at once and is optimal for the
sum. Its return has the closed form
``-sum_{t=1..H} || goal - clip(goal, -t * max_action, t * max_action) ||``
(:meth:`PointRobot.optimal_return`); from a start ``s`` the box is centred on
``s``, and with random starts the optimal return is the mean over an 8 x 8
midpoint grid of start positions (the expectation to within ~1e-3 of an
episode's return).

Task parameter (the optional ``task_parameter_name`` /
``task_parameter(params)`` protocol evaluation plots returns against): the
goal angle on the half circle, the goal's distance from the origin for
uniform goals.

Static: ``horizon``, ``num_goals``, ``radius``, ``max_action``, ``goals``,
``goal_seed``, ``start_range``. Traced: ``goal``, ``max_steps_in_episode``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

import agentrl.envs.spaces as spaces
from agentrl.envs.base import Environment, EnvParams, EnvState
from agentrl.envs.validate import check_choice, check_float, check_int

GOAL_LAYOUTS = ("half_circle", "uniform")


@struct.dataclass
class PointRobotState(EnvState):
    """``pos [2]`` float32, the agent's position."""

    pos: jax.Array


@struct.dataclass
class PointRobotParams(EnvParams):
    """``goal [2]`` float32, the goal position (the task)."""

    goal: jax.Array


class PointRobot(Environment[PointRobotState, PointRobotParams]):
    """2-D point robot with a hidden goal (see the module doc)."""

    def __init__(
        self,
        horizon: int = 20,
        num_goals: int = 0,
        radius: float = 1.0,
        max_action: float = 0.1,
        goals: str = "half_circle",
        goal_seed: int = 0,
        start_range: float = 0.0,
    ):
        self.horizon = check_int(self.name, "horizon", horizon, 1)
        self.num_goals = check_int(self.name, "num_goals", num_goals, 0)
        if self.num_goals == 1:
            raise ValueError(
                f"{self.name}: `num_goals` must be 0 (continuous goals) or >= 2, got 1"
            )
        self.radius = check_float(self.name, "radius", radius, 1e-6)
        self.max_action = check_float(self.name, "max_action", max_action, 1e-6)
        self.goals = check_choice(self.name, "goals", goals, GOAL_LAYOUTS)
        self.goal_seed = check_int(self.name, "goal_seed", goal_seed, 0)
        self.start_range = check_float(self.name, "start_range", start_range, 0)
        self.stochastic_reset = self.start_range > 0
        self.num_tasks = self.num_goals or None
        self._goal_table = None
        if self.goals == "uniform" and self.num_goals:
            rng = np.random.default_rng(self.goal_seed)
            box = rng.uniform(-self.radius, self.radius, (self.num_goals, 2))
            self._goal_table = box.astype(np.float32)

    # ---------------------------------------------------------------- tasks
    def _params(self, angle: jax.Array) -> PointRobotParams:
        goal = self.radius * jnp.stack([jnp.cos(angle), jnp.sin(angle)])
        return self._goal_params(goal)

    def _goal_params(self, goal: jax.Array) -> PointRobotParams:
        return PointRobotParams(
            max_steps_in_episode=jnp.int32(self.horizon),
            goal=jnp.asarray(goal, jnp.float32),
        )

    def goal_positions(self) -> jax.Array:
        """``[num_goals, 2]`` the fixed goals (finite variant only)."""
        if self._goal_table is not None:
            return jnp.asarray(self._goal_table)
        angles = self.goal_angles()
        return self.radius * jnp.stack([jnp.cos(angles), jnp.sin(angles)], -1)

    def goal_angles(self) -> jax.Array:
        """``[num_goals]`` angles of the fixed goals (finite variant only)."""
        if not self.num_goals:
            raise ValueError(
                f"{self.name}: goal_angles needs `num_goals` >= 2, got 0 "
                "(continuous goals)"
            )
        index = jnp.arange(self.num_goals, dtype=jnp.float32)
        return jnp.pi * (index + 0.5) / self.num_goals

    @property
    def default_params(self) -> PointRobotParams:
        if self.num_goals:
            return self.params_for_task(jnp.int32(0))
        if self.goals == "uniform":
            return self._goal_params(jnp.array([0.0, self.radius]))
        return self._params(jnp.float32(jnp.pi / 2))

    def params_for_task(self, task_id: jax.Array) -> PointRobotParams:
        if not self.num_goals:
            return super().params_for_task(task_id)
        if self._goal_table is not None:
            return self._goal_params(jnp.asarray(self._goal_table)[task_id])
        return self._params(self.goal_angles()[task_id])

    def sample_params(self, key: jax.Array) -> PointRobotParams:
        """A goal from the layout's distribution (or one of the fixed goals)."""
        if self.num_goals:
            return self.params_for_task(jax.random.randint(key, (), 0, self.num_goals))
        return self.draw_params(key)

    def draw_params(self, key: jax.Array) -> PointRobotParams:
        """A fresh goal from the layout's distribution (the square, or the
        half circle's angles), whether or not the family fixes ``num_goals``."""
        if self.goals == "uniform":
            r = self.radius
            return self._goal_params(jax.random.uniform(key, (2,), minval=-r, maxval=r))
        return self._params(jax.random.uniform(key, (), maxval=jnp.pi))

    @property
    def task_parameter_name(self) -> str:
        """What :meth:`task_parameter` measures (evaluation's plot axis)."""
        if self.goals == "half_circle":
            return "goal angle (rad)"
        return "goal distance from the origin"

    def task_parameter(self, params: PointRobotParams) -> jax.Array:
        """``[]`` one task's scalar: the goal's angle on the half circle, or
        its distance from the origin for uniform goals (how far to travel)."""
        goal = params.goal
        if self.goals == "half_circle":
            return jnp.arctan2(goal[1], goal[0])
        return jnp.linalg.norm(goal)

    # ------------------------------------------------------------- dynamics
    def reset_env(self, key: jax.Array, params: PointRobotParams):
        r = self.start_range
        pos = jnp.zeros(2, jnp.float32)
        if r > 0:
            pos = jax.random.uniform(key, (2,), jnp.float32, -r, r)
        state = PointRobotState(time=jnp.int32(0), pos=pos)
        return state.pos, state

    def step_env(self, key: jax.Array, state: PointRobotState, action: Any, params):
        action = jnp.asarray(action, jnp.float32).reshape(2)
        action = jnp.clip(action, -self.max_action, self.max_action)
        pos = state.pos + action
        reward = -jnp.linalg.norm(pos - params.goal)
        state = PointRobotState(time=state.time + 1, pos=pos)
        return pos, state, reward, jnp.bool_(False), {}

    def action_space(self, params=None) -> spaces.Box:
        return spaces.Box(-self.max_action, self.max_action, (2,), jnp.float32)

    def observation_space(self, params=None) -> spaces.Box:
        return spaces.Box(-jnp.inf, jnp.inf, (2,), jnp.float32)

    # --------------------------------------------------------------- oracle
    def optimal_action(self, state: PointRobotState, params: PointRobotParams):
        """``[2]`` the per-axis clipped step straight towards the goal."""
        return jnp.clip(params.goal - state.pos, -self.max_action, self.max_action)

    def optimal_return(self, params: PointRobotParams) -> jax.Array:
        """Closed form return of the oracle over one episode (module doc)."""
        t = jnp.arange(1, self.horizon + 1, dtype=jnp.float32)[:, None]
        reach = t * self.max_action
        live = jnp.arange(1, self.horizon + 1) <= params.max_steps_in_episode

        def from_start(start):
            goal = params.goal[None, :]
            gap = goal - jnp.clip(goal, start - reach, start + reach)
            dist = jnp.linalg.norm(gap, axis=-1)
            return -jnp.sum(jnp.where(live, dist, 0.0))

        if self.start_range == 0:
            return from_start(jnp.zeros(2, jnp.float32))
        # the mean over random starts: a midpoint rule on an 8 x 8 grid
        mid = (jnp.arange(8, dtype=jnp.float32) + 0.5) / 8 * 2 - 1
        grid = self.start_range * jnp.stack(jnp.meshgrid(mid, mid), -1).reshape(-1, 2)
        return jnp.mean(jax.vmap(from_start)(grid))
