"""Loops over PRNG keys that JAX's key-reuse checker reads right.

``jax_debug_key_reuse`` (``JAX_DEBUG_KEY_REUSE=1``) raises ``KeyReuseError``
where a typed key is consumed twice. It knows no rule for ``transpose``, so
it takes the keys a transpose returns for consumed ones; and ``vmap`` of a
``lax.scan`` transposes the scan's batched ``xs`` (the step axis goes
first). A vmapped scan over one key per step, each used once, therefore
fails with "In scan, argument N is already consumed" (a false positive).

:func:`key_scan` and :func:`key_map` are ``jax.lax.scan`` and
``jax.lax.map`` whose ``xs`` may hold key arrays: the keys cross the loop as
their key data and are wrapped back into keys of the same implementation
in the body. The keys and the results are the same (wrapping is a bitcast);
the checker still sees every use of a key inside the body. The keys given
count as used by the loop: pass them to nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax


def is_key(x: Any) -> bool:
    """Whether ``x`` is a typed PRNG key array (or its ``ShapeDtypeStruct``)."""
    dtype = getattr(x, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def _as_data(xs: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``(xs with keys as key data, back)``: ``back`` wraps one step's data again."""
    leaves, tree = jax.tree.flatten(xs)
    dtypes = [x.dtype if is_key(x) else None for x in leaves]
    data = [jax.random.key_data(x) if is_key(x) else x for x in leaves]

    def back(step: Any) -> Any:
        parts = jax.tree.leaves(step)
        wrapped = [
            jax.random.wrap_key_data(x, dtype=d) if d else x
            for x, d in zip(parts, dtypes, strict=True)
        ]
        return jax.tree.unflatten(tree, wrapped)

    return jax.tree.unflatten(tree, data), back


def key_scan(
    f: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs: Any,
    length: int | None = None,
) -> tuple[Any, Any]:
    """``jax.lax.scan(f, init, xs, length)``; ``xs`` may hold keys ``[step, ...]``."""
    data, back = _as_data(xs)
    return jax.lax.scan(lambda carry, x: f(carry, back(x)), init, data, length)


def key_map(f: Callable[[Any], Any], xs: Any) -> Any:
    """``jax.lax.map(f, xs)`` where ``xs`` may hold keys ``[item, ...]``."""
    data, back = _as_data(xs)
    return jax.lax.map(lambda x: f(back(x)), data)
