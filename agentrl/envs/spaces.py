"""Jittable observation and action spaces with the gymnax 1.0 interface.

These mirror ``gymnax.environments.spaces`` (same attribute names: ``n``,
``shape``, ``dtype``, ``low``, ``high``) so code written against either works
with both, without importing gymnax (which costs seconds at import time).
Where gymnax checks types (its wrappers assert ``isinstance(space,
gymnax...Box)``), :func:`agentrl.envs.gymnax_adapter.space_to_gymnax` gives the
gymnax space, and
:func:`agentrl.envs.gymnax_adapter.to_gymnax` a whole environment's view.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


class Space:
    """A set of values with a jittable ``sample`` and ``contains``."""

    shape: tuple[int, ...]
    dtype: Any

    def sample(self, key: jax.Array) -> Any:
        raise NotImplementedError

    def contains(self, x: Any) -> jax.Array:
        raise NotImplementedError


class Discrete(Space):
    """Integers ``{0, ..., n - 1}`` as a scalar ``int32``."""

    def __init__(self, n: int):
        if int(n) < 1:
            raise ValueError(f"Discrete: n must be >= 1, got {n}")
        self.n = int(n)
        self.shape = ()
        self.dtype = jnp.int32

    def __repr__(self) -> str:
        return f"Discrete({self.n})"

    def sample(self, key: jax.Array) -> jax.Array:
        return jax.random.randint(key, (), 0, self.n, dtype=jnp.int32)

    def contains(self, x: Any) -> jax.Array:
        x = jnp.asarray(x)
        return jnp.logical_and(x >= 0, x < self.n)


class Box(Space):
    """A box ``[low, high]`` of the given shape (bounds broadcast)."""

    def __init__(self, low: Any, high: Any, shape: tuple[int, ...], dtype=jnp.float32):
        self.low = low
        self.high = high
        self.shape = tuple(shape)
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"Box(low={self.low}, high={self.high}, shape={self.shape})"

    def sample(self, key: jax.Array) -> jax.Array:
        return jax.random.uniform(
            key, self.shape, minval=self.low, maxval=self.high
        ).astype(self.dtype)

    def contains(self, x: Any) -> jax.Array:
        x = jnp.asarray(x)
        return jnp.logical_and(jnp.all(x >= self.low), jnp.all(x <= self.high))


class Dict(Space):
    """A dictionary of named sub-spaces (e.g. the trial wrapper's observation)."""

    def __init__(self, spaces: dict[str, Space]):
        self.spaces = dict(spaces)
        self.shape = ()
        self.dtype = None

    def __repr__(self) -> str:
        return f"Dict({self.spaces!r})"

    def sample(self, key: jax.Array) -> dict[str, Any]:
        keys = jax.random.split(key, len(self.spaces))
        return {
            name: space.sample(k)
            for (name, space), k in zip(self.spaces.items(), keys, strict=True)
        }

    def contains(self, x: dict[str, Any]) -> jax.Array:
        checks = [space.contains(x[name]) for name, space in self.spaces.items()]
        return jnp.all(jnp.stack(checks))


def is_discrete(space: Any) -> bool:
    """True for a discrete space of agentrl or gymnax (anything with ``n``)."""
    return hasattr(space, "n") and not hasattr(space, "spaces")
