"""Dark Key-to-Door (Algorithm Distillation).

A ``size x size`` dark grid (default 9x9, ``horizon=50``). The task is a
pair of distinct cells (key, door); ``layout`` sets which pairs and which
start cells (``n = size**2`` cells, ``s = size``):

- ``"any"`` (default; every committed Key-to-Door result was made on it):
  any ordered pair of distinct cells, ``n * (n - 1)`` tasks (6,480 on 9x9),
  and a random start on any cell, the key's included;
- ``"off_axis"``: the AD-ε reference's (corl-team/ad-eps
  ``key_to_door/utils/misc.py`` keeps only pairs that differ in both
  coordinates, ``key_to_door/envs/dark_key_to_door.py`` redraws a start on
  the key): key and door never share a row or a column, ``n * (s - 1)**2``
  tasks (5,184 on 9x9), and the random start is never the key's cell.

Task id ``k * m + r`` (``m`` doors a key: ``n - 1`` or ``(s - 1)**2``) is
key cell ``k`` and its ``r``-th allowed door in cell order, so ids run by
key, then door.

Reward 1 the first time the agent stands on the key (it then holds it) and
1 when it stands on the door while holding the key, which terminates the
episode; so an episode returns 0, 1 or 2.

Two forms:

- the in-context RL form (default, the AD / AD-ε reference code's): the
  agent observes its cell alone (``Discrete(n)``) and starts each episode at
  a uniformly random allowed cell (``start="random"``), so it must remember
  whether it already holds the key, and cannot memorise one path;
- the Markov form for tabular sources (``observe_key=True``, e.g. with
  ``start="center"``): the observation is ``cell_id + n * has_key``
  (``Discrete(2 * n)``), so Q-learning has a table of Markov states.

Optimal return from a start cell: ``[t1 <= H] + [t1 + t2 <= H]`` with
``t1 = max(d(start, key), 1)`` (a start on the key, possible only under
``layout="any"``, picks it up at step 1 by the no-op) and
``t2 = d(key, door)``; with random starts :meth:`DarkKeyToDoor.optimal_return`
is its mean over the allowed start cells (``n``, or the ``n - 1`` other
than the key's under ``"off_axis"``): the expected return of the oracle.

Static: ``size``, ``horizon``, ``start`` (``"random"``, ``"center"``,
``"corner"``; ``"off_axis"`` needs ``"random"``), ``observe_key``,
``layout``. Traced: ``key``, ``door``, ``max_steps_in_episode``.
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
#: ``"any"``: every ordered pair of distinct cells, starts anywhere;
#: ``"off_axis"``: corl-team/ad-eps's pairs (both coordinates differ), starts
#: never on the key.
LAYOUTS = ("any", "off_axis")


def _skip(rank: jax.Array, skipped: jax.Array) -> jax.Array:
    """The ``rank``-th of ``0, 1, ...`` without ``skipped`` (int32 scalars)."""
    return rank + (rank >= skipped).astype(jnp.int32)


class DarkKeyToDoor(Environment[KeyToDoorState, KeyToDoorParams]):
    """Find the key, then the door, in the dark."""

    episodes_end_early = True  # at the door, key in hand

    def __init__(
        self,
        size: int = 9,
        horizon: int = 50,
        start: str = "random",
        observe_key: bool = False,
        layout: str = "any",
    ):
        self.size = check_int(self.name, "size", size, 2)
        self.horizon = check_int(self.name, "horizon", horizon, 2)
        self.start = check_choice(self.name, "start", start, START_CHOICES)
        if not isinstance(observe_key, bool):
            raise ValueError(
                f"{self.name}: `observe_key` must be true or false, got {observe_key!r}"
            )
        self.observe_key = observe_key
        self.layout = check_choice(self.name, "layout", layout, LAYOUTS)
        if self.layout == "off_axis" and self.start != "random":
            raise ValueError(
                f"{self.name}: `layout='off_axis'` starts at a random cell other "
                f"than the key's, so `start` must be 'random', got {start!r}"
            )
        self.stochastic_reset = self.start == "random"
        self.num_tasks = self.size * self.size * self._doors_per_key

    @property
    def _doors_per_key(self) -> int:
        if self.layout == "off_axis":
            return (self.size - 1) ** 2
        return self.size * self.size - 1

    @property
    def default_params(self) -> KeyToDoorParams:
        return self.params_for_task(jnp.int32(self.num_tasks - 1))

    def params_for_task(self, task_id: jax.Array) -> KeyToDoorParams:
        task_id = jnp.asarray(task_id, jnp.int32)
        key_cell = task_id // self._doors_per_key
        rank = task_id % self._doors_per_key
        key = grid.cell_pos(key_cell, self.size)
        return KeyToDoorParams(
            max_steps_in_episode=jnp.int32(self.horizon),
            key=key,
            door=self._door(key_cell, key, rank),
        )

    def _door(self, key_cell: jax.Array, key: jax.Array, rank: jax.Array):
        """``[2]``: the ``rank``-th allowed door of the key at ``key [2]``."""
        if self.layout == "any":
            return grid.cell_pos(_skip(rank, key_cell), self.size)
        side = self.size - 1  # each coordinate skips the key's
        off = jnp.stack([rank % side, rank // side])
        return _skip(off, key).astype(jnp.int32)

    def sample_params(self, key: jax.Array) -> KeyToDoorParams:
        """A (key, door) pair uniform over the layout's pairs."""
        return self.params_for_task(jax.random.randint(key, (), 0, self.num_tasks))

    def _starts(self, params: KeyToDoorParams) -> jax.Array:
        """``[S, 2]``: every allowed start cell (``S`` = 1, ``n`` or ``n - 1``)."""
        if self.start != "random":
            return grid.start_position(self.size, self.start)[None]
        cells = self.size * self.size
        if self.layout == "any":
            ids = jnp.arange(cells)
        else:
            ids = _skip(jnp.arange(cells - 1), grid.cell_id(params.key, self.size))
        return jax.vmap(lambda c: grid.cell_pos(c, self.size))(ids)

    def _obs(self, state: KeyToDoorState) -> jax.Array:
        cell = grid.cell_id(state.pos, self.size)
        if not self.observe_key:
            return cell
        return cell + self.size * self.size * state.has_key.astype(jnp.int32)

    def _start(self, key: jax.Array, params: KeyToDoorParams) -> jax.Array:
        """``[2]``: the episode's start cell."""
        if self.start != "random":
            return grid.start_position(self.size, self.start)
        if self.layout == "any":
            return jax.random.randint(key, (2,), 0, self.size, dtype=jnp.int32)
        cells = self.size * self.size  # a rank among the cells but the key's
        rank = jax.random.randint(key, (), 0, cells - 1, dtype=jnp.int32)
        return grid.cell_pos(
            _skip(rank, grid.cell_id(params.key, self.size)), self.size
        )

    def reset_env(self, key: jax.Array, params: KeyToDoorParams):
        pos = self._start(key, params)
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
        """The oracle's return, averaged over the allowed start cells (module doc)."""
        horizon = params.max_steps_in_episode
        d = jax.vmap(lambda s: grid.manhattan(s, params.key))(self._starts(params))
        t1 = jnp.maximum(d, 1)
        t2 = grid.manhattan(params.key, params.door)
        value = (t1 <= horizon).astype(jnp.float32) + (t1 + t2 <= horizon).astype(
            jnp.float32
        )
        return jnp.mean(value)
