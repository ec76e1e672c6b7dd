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
    ``loops_only``, only copies that run inside a loop are counted: those in
    the body or condition of a ``while`` and in every computation these call
    (fusions, branches, nested loops), i.e. once per decoding step or per
    partial update. Copies run once per call are not: in the ENTRY
    computation (e.g. materialising the initial zero cache) or in a fusion
    or branch it calls directly (XLA inlines a loop of one trip into ENTRY:
    its copies run once). Shapes are the test: an activation of a cache's
    shape (a whole-trial attention's keys) counts as well, so compare
    programs whose loops hold no such activations.
    """
    wanted = {tuple(int(n) for n in s) for s in shapes}
    if loops_only:
        comps = _computations(hlo_text)
        inside = _closure(comps, _loop_roots(comps))
        lines = (line for name in inside for line in comps[name])
    else:
        lines = iter(hlo_text.splitlines())
    count = 0
    for line in lines:
        match = _COPY.search(line)
        if match:
            dims = tuple(int(n) for n in match.group(2).split(",") if n)
            count += dims in wanted
    return count


def count_conditionals(hlo_text: str) -> int:
    """``conditional`` instructions outside the ENTRY computation of ``hlo_text``.

    Those run inside loop bodies, i.e. at every decoding step. A first-step
    ``lax.cond`` around a decode costs time even with no whole-cache copy
    (both branches' decodes, the branch's buffer assignment), so a decoding
    loop that should be one decode per step must show 0.
    """
    count, in_entry = 0, False
    for line in hlo_text.splitlines():
        if line and not line[0].isspace():
            in_entry = line.startswith("ENTRY")
            continue
        count += not in_entry and " conditional(" in line
    return count


def cache_shapes(cache) -> set[tuple[int, ...]]:
    """Shapes of the per-layer K/V arrays of a :class:`~agentrl.models.KVCache`."""
    return {tuple(a.shape) for a in (*cache.keys, *cache.values)}


_HEADER = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s")
_CALLED = re.compile(
    r"(?:body|condition|to_apply|calls|branch_computations)=\{?([^}\s,]+(?:,\s*%[\w.\-]+)*)\}?"
)


def _computations(hlo_text: str) -> dict[str, list[str]]:
    """Computation name -> its instruction lines."""
    comps, name = {}, None
    for line in hlo_text.splitlines():
        if line and not line[0].isspace():
            match = _HEADER.match(line)
            name = match.group(1) if match and line.rstrip().endswith("{") else None
            if name:
                comps[name] = []
        elif name:
            comps[name].append(line)
    return comps


def count_copies_per_iteration(hlo_text: str, shapes, carried) -> int:
    """Copies of ``shapes`` run once per iteration of the loops carrying ``carried``.

    The ``while`` loops whose state tuple holds an array of shape ``carried``
    (e.g. a decoding loop carrying its KV cache): copies in their bodies and
    in every computation those bodies call (branches, fusions, nested
    loops), for the innermost such loops. Copies outside them, e.g. in an
    outer loop over task blocks materialising each block's zero cache, are
    not counted.
    """
    comps = _computations(hlo_text)
    dims = ",".join(str(int(n)) for n in carried)
    body = re.compile(r"\bbody=%?([\w.\-]+)")
    roots = [
        body.search(line).group(1)
        for lines in comps.values()
        for line in lines
        if " while(" in line
        and f"[{dims}]" in line.split(" while(")[0]
        and body.search(line)
    ]

    # innermost such loops only: an outer loop (over task blocks) that also
    # carries the shape runs its own copies once per inner loop, not per step
    closures = {r: _closure(comps, [r]) for r in set(roots)}
    seen = set()
    for root, names in closures.items():
        if not any(other in names for other in closures if other != root):
            seen |= names
    text = "\n".join(f"%{n} {{\n" + "\n".join(comps[n]) for n in seen)
    return count_copies(text, shapes, loops_only=False)


_LOOP = re.compile(r"\b(?:body|condition)=%?([\w.\-]+)")


def _loop_roots(comps: dict[str, list[str]]) -> list[str]:
    """The body and condition computations of every ``while`` in ``comps``."""
    return [
        name
        for lines in comps.values()
        for line in lines
        if " while(" in line
        for name in _LOOP.findall(line)
    ]


def _closure(comps: dict[str, list[str]], roots) -> set[str]:
    """``roots`` and every computation they call, transitively."""
    seen, stack = set(), list(roots)
    while stack:
        name = stack.pop()
        if name in seen or name not in comps:
            continue
        seen.add(name)
        for line in comps[name]:
            for group in _CALLED.findall(line):
                stack.extend(n.strip().lstrip("%") for n in group.split(","))
    return seen
