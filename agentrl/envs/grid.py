"""Shared geometry of the dark grid worlds: moves, cell ids, greedy steering.

Positions are ``[x, y]`` int32 with ``0 <= x, y < size``; the cell id is
``y * size + x``. Actions are ``0 up (y - 1), 1 down (y + 1), 2 left (x - 1),
3 right (x + 1), 4 no-op``; a move into a wall leaves the agent in place.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

UP, DOWN, LEFT, RIGHT, NOOP = 0, 1, 2, 3, 4
NUM_ACTIONS = 5
MOVES = jnp.array([[0, -1], [0, 1], [-1, 0], [1, 0], [0, 0]], dtype=jnp.int32)
START_CHOICES = ("center", "corner")


def start_position(size: int, start: str) -> jax.Array:
    """``center``: ``(size // 2, size // 2)``; ``corner``: ``(0, 0)``."""
    c = size // 2 if start == "center" else 0
    return jnp.array([c, c], dtype=jnp.int32)


def move(pos: jax.Array, action: jax.Array, size: int) -> jax.Array:
    """Apply ``action`` to ``pos [2]``, clipped to the grid."""
    return jnp.clip(pos + MOVES[action], 0, size - 1)


def cell_id(pos: jax.Array, size: int) -> jax.Array:
    return (pos[1] * size + pos[0]).astype(jnp.int32)


def cell_pos(cell: jax.Array, size: int) -> jax.Array:
    cell = jnp.asarray(cell, jnp.int32)
    return jnp.stack([cell % size, cell // size]).astype(jnp.int32)


def manhattan(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.sum(jnp.abs(a - b)).astype(jnp.int32)


def steer(pos: jax.Array, target: jax.Array) -> jax.Array:
    """A shortest-path action from ``pos`` to ``target`` (x first, then y).

    Returns ``NOOP`` when already there.
    """
    dx, dy = target[0] - pos[0], target[1] - pos[1]
    return jnp.select(
        [dx > 0, dx < 0, dy > 0, dy < 0],
        [RIGHT, LEFT, DOWN, UP],
        default=NOOP,
    ).astype(jnp.int32)
