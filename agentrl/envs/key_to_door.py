"""Dark Key-to-Door (Algorithm Distillation).

A ``size x size`` dark grid (default 9x9, ``horizon=50``). The task is a
pair of distinct cells (key, door): task id ``k * (n - 1) + r`` with
``n = size**2``, key cell ``k`` and the door the ``r``-th cell other than
``k`` — ``n * (n - 1)`` tasks.

Reward 1 the first time the agent stands on the key (it then holds it) and
1 when it stands on the door while holding the key, which terminates the
episode; so an episode returns 0, 1 or 2.

Two forms:

- the in-context RL form (default, the AD / AD-ε reference code's): the
  agent observes its cell alone (``Discrete(n)``) and starts each episode at
  a uniformly random cell (``start="random"``), so it must remember whether
  it already holds the key, and cannot memorise one path;
- the Markov form for tabular sources (``observe_key=True``, e.g. with
  ``start="center"``): the observation is ``cell_id + n * has_key``
  (``Discrete(2 * n)``), so Q-learning has a table of Markov states.

Optimal return from a start cell: ``[t1 <= H] + [t1 + t2 <= H]`` with
``t1 = max(d(start, key), 1)`` and ``t2 = d(key, door)``; with random starts
:meth:`DarkKeyToDoor.optimal_return` is its mean over the ``n`` start cells
(the expected return of the oracle).

Static: ``size``, ``horizon``, ``start`` (``"random"``, ``"center"``,
``"corner"``), ``observe_key``. Traced: ``key``, ``door``,
``max_steps_in_episode``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

import agentrl.envs.grid as grid
import agentrl.envs.spaces as spaces
from agentrl.envs.base import Environment, EnvParams, EnvState
from agentrl.envs.validate import check_choice, check_int


@struct.dataclass
class KeyToDoorState(EnvState):
    """``pos [2]`` int32 and ``has_key`` bool."""

    pos: jax.Array
    has_key: jax.Array


@struct.dataclass
class KeyToDoorParams(EnvParams):
    """``key [2]`` and ``door [2]`` cells ``[x, y]`` (the task)."""

    key: jax.Array
    door: jax.Array


START_CHOICES = ("random", *grid.START_CHOICES)


class DarkKeyToDoor(Environment[KeyToDoorState, KeyToDoorParams]):
    """Find the key, then the door, in the dark."""

    episodes_end_early = True  # at the door, key in hand

    def __init__(
        self,
        size: int = 9,
        horizon: int = 50,
        start: str = "random",
        observe_key: bool = False,
    ):
        self.size = check_int(self.name, "size", size, 2)
        self.horizon = check_int(self.name, "horizon", horizon, 2)
        self.start = check_choice(self.name, "start", start, START_CHOICES)
        if not isinstance(observe_key, bool):
            raise ValueError(
                f"{self.name}: `observe_key` must be true or false, got {observe_key!r}"
            )
        self.observe_key = observe_key
        self.stochastic_reset = self.start == "random"
        cells = self.size * self.size
        self.num_tasks = cells * (cells - 1)

    @property
    def default_params(self) -> KeyToDoorParams:
        return self.params_for_task(jnp.int32(self.num_tasks - 1))

    def params_for_task(self, task_id: jax.Array) -> KeyToDoorParams:
        cells = self.size * self.size
        task_id = jnp.asarray(task_id, jnp.int32)
        key_cell = task_id // (cells - 1)
        rank = task_id % (cells - 1)
        door_cell = rank + (rank >= key_cell)
        return KeyToDoorParams(
            max_steps_in_episode=jnp.int32(self.horizon),
            key=grid.cell_pos(key_cell, self.size),
            door=grid.cell_pos(door_cell, self.size),
        )

    def sample_params(self, key: jax.Array) -> KeyToDoorParams:
        """A (key, door) pair uniform over distinct cells."""
        return self.params_for_task(jax.random.randint(key, (), 0, self.num_tasks))

    def _starts(self) -> jax.Array:
        """``[S, 2]``: every start cell (all cells for random starts)."""
        if self.start == "random":
            cells = jnp.arange(self.size * self.size)
            return jax.vmap(lambda c: grid.cell_pos(c, self.size))(cells)
        return grid.start_position(self.size, self.start)[None]

    def _obs(self, state: KeyToDoorState) -> jax.Array:
        cell = grid.cell_id(state.pos, self.size)
        if not self.observe_key:
            return cell
        return cell + self.size * self.size * state.has_key.astype(jnp.int32)

    def reset_env(self, key: jax.Array, params: KeyToDoorParams):
        if self.start == "random":
            pos = jax.random.randint(key, (2,), 0, self.size, dtype=jnp.int32)
        else:
            pos = grid.start_position(self.size, self.start)
        state = KeyToDoorState(time=jnp.int32(0), pos=pos, has_key=jnp.bool_(False))
        return self._obs(state), state

    def step_env(self, key: jax.Array, state: KeyToDoorState, action: Any, params):
        pos = grid.move(state.pos, jnp.asarray(action, jnp.int32), self.size)
        picks_key = jnp.logical_and(~state.has_key, jnp.all(pos == params.key))
        opens_door = jnp.logical_and(state.has_key, jnp.all(pos == params.door))
        reward = picks_key.astype(jnp.float32) + opens_door.astype(jnp.float32)
        state = KeyToDoorState(
            time=state.time + 1, pos=pos, has_key=state.has_key | picks_key
        )
        return self._obs(state), state, reward, opens_door, {}

    def action_space(self, params=None) -> spaces.Discrete:
        return spaces.Discrete(grid.NUM_ACTIONS)

    def observation_space(self, params=None) -> spaces.Discrete:
        layers = 2 if self.observe_key else 1
        return spaces.Discrete(layers * self.size * self.size)

    def optimal_action(self, state: KeyToDoorState, params: KeyToDoorParams):
        target = jnp.where(state.has_key, params.door, params.key)
        return grid.steer(state.pos, target)

    def optimal_return(self, params: KeyToDoorParams) -> jax.Array:
        """The oracle's return, averaged over the start cells (module doc)."""
        horizon = params.max_steps_in_episode
        d = jax.vmap(lambda s: grid.manhattan(s, params.key))(self._starts())
        t1 = jnp.maximum(d, 1)
        t2 = grid.manhattan(params.key, params.door)
        value = (t1 <= horizon).astype(jnp.float32) + (t1 + t2 <= horizon).astype(
            jnp.float32
        )
        return jnp.mean(value)
