"""The passive T-Maze (Ni et al. 2023; AMAGO's memory probe): remember a cue
over a corridor of ``corridor_length`` steps.

The agent starts at the foot of a corridor of cells ``x = 0 .. L``
(``L = corridor_length``); at ``x = L`` is the junction, with the two goal
candidates above and below it (``y = +1``, ``y = -1``). The goal's side is
the task (``params.goal``, ``+1`` or ``-1``) and is shown once: the first
observation is ``[0, goal]``; every later one is ``[0, 0]`` in the
corridor (the start cell included, so the cue is never shown again) and
``[1, y]`` at the junction or a goal candidate. Four actions:
``0`` right (``x + 1``), ``1`` up (``y + 1``), ``2`` left (``x - 1``),
``3`` down (``y - 1``); a move off the maze leaves the agent in place.

An episode is ``L + 1`` steps (``horizon``): ``L`` moves right reach the
junction, the last step turns. Reward: at the last step ``1`` if the
agent stands on the goal (``y == goal``) else ``0``; before it ``penalty``
(default ``-1 / L``) for every action other than right. It ends at the
last step (terminated, and truncated: the time limit). So a successful
episode returns exactly 1 and a failed one at most 0: *success* is a
return above 0.5. The oracle (right ``L`` times, then towards the goal)
returns 1; a policy without memory reaches the junction as well but turns
the right way half the time: its best is success 50% (expected return
0.5), the ceiling a memory probe is read against.

Settings read from AMAGO (UT-Austin-RPL/amago ``amago/envs/builtin/
tmaze.py``: ``TMazeAltPassive``, with ``examples/04_tmaze.py``'s
``penalty = -1 / L``) and Ni et al.'s (twni2016/Memory-RL ``envs/tmaze.py``,
``TMazeClassicPassive``): the "ambiguous position" observation (two
numbers, the junction flag and the cue or the side), the action order,
the ``L + 1`` steps, the goal reward 1 at the last step only, the cue at
the first step only. Deviations (named, with reasons):

- the penalty is AMAGO's (``TMazeAlt``: any non-right action before the
  last step), not Ni et al.'s (a step on which ``x`` lags behind the time
  step); both cost nothing on the optimal path and at most ``-1`` over an
  episode, and AMAGO's is the one its T-Maze results use;
- the side is the task, in ``EnvParams``, rather than drawn by ``reset``
  (so a trial of several episodes keeps one side, and vmapping over params
  is vmapping over sides); the family has no finite task split
  (``num_tasks`` is ``None``: both sides are trained and tested, drawn
  from independent keys, as the references draw the side every episode: a
  T-Maze probes memory, not generalisation to unseen tasks);
  :meth:`TMaze.params_for_goal` gives one side's params, and
  :meth:`TMaze.task_parameter` a task's side (each evaluation result
  records its tasks' sides: ``metadata["task_parameter"]``);
- terminated and truncated are both true at the last step (the
  references' ``terminated = truncated``); the episode cannot end sooner.

Static: ``corridor_length`` (the memory length: the cue is ``L`` steps
before the turn that needs it). Traced: ``goal``, ``penalty``,
``max_steps_in_episode``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

import agentrl.envs.spaces as spaces
from agentrl.envs.base import Environment, EnvParams, EnvState
from agentrl.envs.validate import check_int

RIGHT, UP, LEFT, DOWN = 0, 1, 2, 3
NUM_ACTIONS = 4
#: ``[dx, dy]`` of each action (AMAGO's order)
MOVES = jnp.array([[1, 0], [0, 1], [-1, 0], [0, -1]], dtype=jnp.int32)


@struct.dataclass
class TMazeState(EnvState):
    """``x`` (``0 .. L``) and ``y`` (``-1, 0, 1``), int32 scalars."""

    x: jax.Array
    y: jax.Array


@struct.dataclass
class TMazeParams(EnvParams):
    """``goal`` int32 ``+1`` (up) or ``-1`` (down): the task; ``penalty``
    float32, the reward of a non-right action before the last step."""

    goal: jax.Array
    penalty: jax.Array


class TMaze(Environment[TMazeState, TMazeParams]):
    """The passive T-Maze: a cue at the first step, the turn ``L`` steps later."""

    stochastic_reset = False

    def __init__(self, corridor_length: int = 10, penalty: float | None = None):
        self.corridor_length = check_int(
            self.name, "corridor_length", corridor_length, 1
        )
        if penalty is None:
            penalty = -1.0 / self.corridor_length
        ok = isinstance(penalty, int | float) and not isinstance(penalty, bool)
        if not ok or not -1.0 <= penalty <= 0.0:
            raise ValueError(
                f"{self.name}: `penalty` must be a number in [-1, 0] (None: "
                f"-1 / corridor_length), got {penalty!r}"
            )
        self.penalty = float(penalty)
        self.horizon = self.corridor_length + 1

    @property
    def default_params(self) -> TMazeParams:
        return self.params_for_goal(1)

    def params_for_goal(self, goal: Any) -> TMazeParams:
        """The params of the side ``goal`` (``+1`` up, ``-1`` down); jittable."""
        return TMazeParams(
            max_steps_in_episode=jnp.int32(self.horizon),
            goal=jnp.asarray(goal, jnp.int32),
            penalty=jnp.float32(self.penalty),
        )

    def sample_params(self, key: jax.Array) -> TMazeParams:
        """Either side with probability 1/2."""
        up = jax.random.bernoulli(key)
        return self.params_for_goal(jnp.where(up, 1, -1))

    def reset_env(self, key: jax.Array, params: TMazeParams):
        zero = jnp.int32(0)
        state = TMazeState(time=zero, x=zero, y=zero)
        obs = jnp.stack([jnp.float32(0), params.goal.astype(jnp.float32)])
        return obs, state

    def _obs(self, state: TMazeState) -> jax.Array:
        """``[0, 0]`` in the corridor, ``[1, y]`` at the junction or a goal."""
        junction = state.x >= self.corridor_length
        flag = junction.astype(jnp.float32)
        return jnp.stack([flag, jnp.where(junction, state.y, 0).astype(jnp.float32)])

    def step_env(self, key: jax.Array, state: TMazeState, action: Any, params):
        action = jnp.asarray(action, jnp.int32)
        move = MOVES[action]
        x, y = state.x + move[0], state.y + move[1]
        in_corridor = (y == 0) & (x >= 0) & (x <= self.corridor_length)
        on_candidate = (x == self.corridor_length) & (jnp.abs(y) == 1)
        valid = in_corridor | on_candidate
        x = jnp.where(valid, x, state.x)
        y = jnp.where(valid, y, state.y)
        time = state.time + 1
        last = time >= params.max_steps_in_episode
        goal = (y == params.goal).astype(jnp.float32)
        penalty = jnp.where(action != RIGHT, params.penalty, 0.0)
        reward = jnp.where(last, goal, penalty).astype(jnp.float32)
        state = TMazeState(time=time, x=x, y=y)
        return self._obs(state), state, reward, last, {}

    def action_space(self, params=None) -> spaces.Discrete:
        return spaces.Discrete(NUM_ACTIONS)

    def observation_space(self, params=None) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (2,))

    def optimal_action(self, state: TMazeState, params: TMazeParams) -> jax.Array:
        """Right along the corridor, then towards the goal (right, a blocked
        move, stays on it)."""
        turn = jnp.where(
            state.y < params.goal, UP, jnp.where(state.y > params.goal, DOWN, RIGHT)
        )
        return jnp.where(state.x < self.corridor_length, RIGHT, turn).astype(jnp.int32)

    def optimal_return(self, params: TMazeParams) -> jax.Array:
        """1: the right moves cost nothing and the turn reaches the goal."""
        return jnp.float32(1.0) * jnp.ones_like(params.penalty)

    #: what :meth:`task_parameter` gives (evaluation records it per task)
    task_parameter_name = "goal side (+1 up, -1 down)"

    def task_parameter(self, params: TMazeParams) -> jax.Array:
        """``[]`` one task's goal side, ``+1.0`` or ``-1.0``: each result
        records its tasks' sides, which the memory probe balances over."""
        return params.goal.astype(jnp.float32)

    @staticmethod
    def success(returns: Any) -> Any:
        """Whether each episode reached the goal (its return is above 0.5)."""
        return returns > 0.5
