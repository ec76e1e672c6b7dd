"""Per-operation time of compiled XLA:CPU programs, from the profiler's thunk events.

XLA:CPU runs a compiled program as a sequence of thunks, one per top-level
HLO instruction (a fusion, a dot, a YNNPACK fusion, a copy ...), and emits one
profiler event per thunk execution named after the instruction. Here those
events are grouped by what the instruction does and by the pass it belongs
to (forward, backward, rest), so two programs that compute the same thing in
different forms (one seed vs 8 seeds under ``vmap``) can be compared op class
by op class.

Each instruction's time is its *median* event duration times its number of
executions: on a shared machine a thread descheduled mid-thunk inflates single
events, and the median ignores them. The total is the time the program spends
doing work; wall time minus that total is time spent waiting (between thunks,
or for a pool thread that the OS has not scheduled).
"""

from __future__ import annotations

import re
import statistics
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import jax

_INSTR = re.compile(r"^\s+(?:ROOT )?%([\w.\-]+) = \S+ ([\w\-]+)\(")
_COMP = re.compile(r"^(?:ENTRY )?%([\w.\-]+) ")
_ROOT = re.compile(r"^\s+ROOT %[\w.\-]+ = \S+ ([\w\-]+)\(")
_CALLS = re.compile(r"calls=%([\w.\-]+)")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_NOT_THUNKS = ("parameter", "while", "call", "tuple", "get-tuple-element")

#: op classes, in the order reports list them
KINDS = (
    "matmul (YNNPACK)",
    "matmul (Eigen)",
    "YNNPACK reduce/elementwise",
    "copy/transpose",
    "concatenate/pad/slice",
    "loop fusion",
    "other",
)


def _kind(name: str, opcode: str, root: str | None) -> str:
    op = root if opcode == "fusion" and root else opcode
    if name.startswith("ynn_fusion"):
        return "matmul (YNNPACK)" if op == "dot" else "YNNPACK reduce/elementwise"
    if op in ("dot", "convolution"):
        return "matmul (Eigen)"
    if op in ("copy", "transpose"):
        return "copy/transpose"
    if op in ("concatenate", "pad", "slice", "dynamic-slice", "dynamic-update-slice"):
        return "concatenate/pad/slice"
    return "loop fusion" if opcode == "fusion" else "other"


def _pass(op_name: str) -> str:
    if "transpose(jvp" in op_name:
        return "backward"
    if "jvp(" in op_name:
        return "forward"
    return "rest"


def _body_lines(hlo_text: str):
    """``(computation name or None, line)`` for every instruction line."""
    comp = None
    for line in hlo_text.splitlines():
        if line and not line[0].isspace():
            match = _COMP.match(line)
            comp = match.group(1) if match else None
        else:
            yield comp, line


def instructions(hlo_text: str) -> dict[str, tuple[str, str]]:
    """``{instruction name: (op class, pass)}`` of an optimised HLO module.

    ``hlo_text`` is ``compiled.as_text()``. The class of a fusion is that of
    its root instruction; the pass is read from the JAX op name (``jvp`` for
    the forward pass of a gradient, ``transpose(jvp ...)`` for the backward,
    anything else, e.g. the optimizer update, is "rest").
    """
    roots = {}
    for comp, line in _body_lines(hlo_text):
        match = _ROOT.match(line)
        if match and comp:
            roots[comp] = match.group(1)
    fused = set(_CALLS.findall(hlo_text))  # bodies of fusions: not thunks
    out = {}
    for comp, line in _body_lines(hlo_text):
        match = _INSTR.match(line)
        if comp in fused or not match:
            continue
        if match.group(2) in (
            "parameter",
            "while",
            "call",
            "tuple",
            "get-tuple-element",
        ):
            continue
        calls = _CALLS.search(line)
        root = roots.get(calls.group(1)) if calls else None
        op_name = _OP_NAME.search(line)
        out[match.group(1)] = (
            _kind(match.group(1), match.group(2), root),
            _pass(op_name.group(1) if op_name else ""),
        )
    return out


def thunk_seconds(
    run: Callable[[], object], hlo_texts: list[str]
) -> dict[tuple[str, str], float]:
    """Seconds of thunk work of one ``run()``, by ``(op class, pass)``.

    ``run`` calls compiled programs whose optimised HLO texts are
    ``hlo_texts`` (their instruction names must not clash where the classes
    differ; programs compiled from one function share their names). Each
    instruction counts its median event duration times its number of events.
    """
    names: dict[str, tuple[str, str]] = {}
    for text in hlo_texts:
        names.update(instructions(text))
    durations: dict[str, list[int]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp):
            jax.block_until_ready(run())
        (path,) = Path(tmp).rglob("*.xplane.pb")
        data = jax.profiler.ProfileData.from_file(str(path))
    for plane in data.planes:
        for line in plane.lines:
            if line.name == "python":
                continue
            for event in line.events:
                if event.name in names:
                    durations[event.name].append(event.duration_ns)
    out: Counter = Counter()
    for name, ds in durations.items():
        out[names[name]] += statistics.median(ds) * len(ds) * 1e-9
    return dict(out)
