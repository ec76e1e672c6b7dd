"""Point-Robot: 2-D navigation to a goal on a half circle (meta-RL standard).

The agent is a point in the plane that starts at the origin and observes its
own position ``[2]`` float32, never the goal. An action ``[2]`` float32 is a
displacement, clipped per axis to ``[-max_action, max_action]`` (default
``0.1``). The reward after each step is the negative Euclidean distance from
the new position to the goal; episodes never terminate and are truncated after
``horizon`` steps (default 20, the T2MIR setting).

Tasks (``params.goal [2]``):

- ``num_goals=0`` (default): a continuous task space; ``sample_params`` draws
  the goal angle uniformly in ``[0, pi]`` on the half circle of radius
  ``radius`` (default 1); ``num_tasks`` is ``None``.
- ``num_goals=N`` (e.g. 50 as in T2MIR, split 45/5 with
  ``task_split(0.9)``): a finite task space of ``N`` fixed goals at the evenly
  spaced angles ``pi * (i + 0.5) / N``, ``i = 0..N-1`` (no seed involved, so
  every machine has the same goals); ``params_for_task(i)`` gives goal ``i``
  and ``sample_params`` draws one of them uniformly.

Oracle: after ``t`` steps from the origin the reachable set is exactly the box
``[-t * max_action, t * max_action]^2``, and the Euclidean projection of the
goal onto a box is per-axis clipping. The greedy action
``clip(goal - pos, -max_action, max_action)`` reaches that projection at every
``t``, so it minimises every step's distance at once and is optimal for the
sum. Its return has the closed form
``-sum_{t=1..H} || goal - clip(goal, -t * max_action, t * max_action) ||``
(:meth:`PointRobot.optimal_return`).

Static: ``horizon``, ``num_goals``, ``radius``, ``max_action``.
Traced: ``goal``, ``max_steps_in_episode``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from agentrl.envs import spaces
from agentrl.envs.base import Environment, EnvParams, EnvState
from agentrl.envs.validate import check_float, check_int


@struct.dataclass
class PointRobotState(EnvState):
    """``pos [2]`` float32, the agent's position."""

    pos: jax.Array


@struct.dataclass
class PointRobotParams(EnvParams):
    """``goal [2]`` float32, the goal position (the task)."""

    goal: jax.Array


class PointRobot(Environment[PointRobotState, PointRobotParams]):
    """2-D point robot with a hidden goal on a half circle (see module doc)."""

    def __init__(
        self,
        horizon: int = 20,
        num_goals: int = 0,
        radius: float = 1.0,
        max_action: float = 0.1,
    ):
        self.horizon = check_int(self.name, "horizon", horizon, 1)
        self.num_goals = check_int(self.name, "num_goals", num_goals, 0)
        if self.num_goals == 1:
            raise ValueError(
                f"{self.name}: `num_goals` must be 0 (continuous goals) or >= 2, got 1"
            )
        self.radius = check_float(self.name, "radius", radius, 1e-6)
        self.max_action = check_float(self.name, "max_action", max_action, 1e-6)
        self.num_tasks = self.num_goals or None

    # ---------------------------------------------------------------- tasks
    def _params(self, angle: jax.Array) -> PointRobotParams:
        goal = self.radius * jnp.stack([jnp.cos(angle), jnp.sin(angle)])
        return PointRobotParams(
            max_steps_in_episode=jnp.int32(self.horizon),
            goal=goal.astype(jnp.float32),
        )

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
        return self._params(jnp.float32(jnp.pi / 2))

    def params_for_task(self, task_id: jax.Array) -> PointRobotParams:
        if not self.num_goals:
            return super().params_for_task(task_id)
        return self._params(self.goal_angles()[task_id])

    def sample_params(self, key: jax.Array) -> PointRobotParams:
        """A goal angle uniform in ``[0, pi]`` (or one of the fixed goals)."""
        if self.num_goals:
            return self.params_for_task(jax.random.randint(key, (), 0, self.num_goals))
        return self._params(jax.random.uniform(key, (), maxval=jnp.pi))

    # ------------------------------------------------------------- dynamics
    def reset_env(self, key: jax.Array, params: PointRobotParams):
        state = PointRobotState(time=jnp.int32(0), pos=jnp.zeros(2, jnp.float32))
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
        gap = params.goal[None, :] - jnp.clip(params.goal[None, :], -reach, reach)
        dist = jnp.linalg.norm(gap, axis=-1)
        live = jnp.arange(1, self.horizon + 1) <= params.max_steps_in_episode
        return -jnp.sum(jnp.where(live, dist, 0.0))
