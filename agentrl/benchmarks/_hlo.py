"""Counting whole-buffer copies in compiled XLA programs.

A decode loop that updates its KV cache in place shows no ``copy`` of a
cache-shaped array in its optimised HLO; every copy that does appear is a
full read and write of that buffer per loop iteration (or per call).
"""

from __future__ import annotations

import re

_COPY = re.compile(r"=\s*([a-z0-9]+)\[([0-9,]*)\]\{[^}]*\}\s+copy(?:-start)?\(")


def count_copies(hlo_text: str, shapes, loops_only: bool = True) -> int:
    """Copies in ``hlo_text`` whose result has one of ``shapes`` (tuples of ints).

    ``hlo_text`` is ``jax.jit(f).lower(...).compile().as_text()``. With
    ``loops_only``, copies in the ENTRY computation (run once per call, e.g.
    materialising the initial zero cache) are not counted: what remains runs
    inside loop bodies and branches, i.e. once per decoding step.
    """
    wanted = {tuple(int(n) for n in s) for s in shapes}
    count, in_entry = 0, False
    for line in hlo_text.splitlines():
        if line and not line[0].isspace():  # a computation header (or its end)
            in_entry = line.startswith("ENTRY")
            continue
        if loops_only and in_entry:
            continue
        match = _COPY.search(line)
        if match:
            dims = tuple(int(n) for n in match.group(2).split(",") if n)
            count += dims in wanted
    return count


def cache_shapes(cache) -> set[tuple[int, ...]]:
    """Shapes of the per-layer K/V arrays of a :class:`~agentrl.models.KVCache`."""
    return {tuple(a.shape) for a in (*cache.keys, *cache.values)}
