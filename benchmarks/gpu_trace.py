"""Where a jitted program's device time goes: a profiler trace, summarised.

``profile_calls(run, updates, folder)`` runs ``run()`` under
``jax.profiler.trace`` (a Perfetto trace beside the XPlane) and
:func:`summarize` reads the trace back: per update, the number of device
kernels and memory copies, the summed kernel time, the time the device
was busy on any stream (the union of its kernels' intervals) against the
wall time, and the kernels that took the most time. A device busy for a
small part of the wall time, running many short kernels, is bound by the
launches (or the loop's host round trips), not by its arithmetic.

Device events are the ``X`` events of the processes named ``/device:GPU:*``
(``/device:TPU:*``) on threads named ``Stream ...``: the trace's derived
lines (``XLA Ops``, ``XLA Modules``, ``Steps``) repeat the same time under
other names and are left out. On a CPU there are none: the summary then
says so (``device_events: 0``) and names the threads it saw.
"""

from __future__ import annotations

import gzip
import json
import re
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: processes whose ``Stream`` threads hold device kernels
DEVICE_PROCESS = re.compile(r"^/device:(GPU|TPU):")
#: kernels of the summary's top list
TOP = 40


def profile_calls(run: Callable[[], Any], updates: int, folder: Path) -> dict:
    """Trace ``run()`` (``updates`` updates; it blocks until they are done)
    and :func:`summarize` it."""
    import jax

    start = time.perf_counter()
    with jax.profiler.trace(str(folder), create_perfetto_trace=True):
        run()
        wall = time.perf_counter() - start
    traces = sorted(Path(folder).rglob("perfetto_trace.json.gz"))
    if not traces:
        return {"error": f"no perfetto_trace.json.gz under {folder}"}
    with gzip.open(traces[-1], "rt") as f:
        return summarize(json.load(f), updates, wall)


def summarize(trace: Any, updates: int, wall_s: float) -> dict:
    """Per-update device counts and times of a Perfetto/Chrome ``trace``."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    processes, threads = _names(events)
    device_pids = {p for p, n in processes.items() if DEVICE_PROCESS.match(n)}
    stream = {
        key
        for key, name in threads.items()
        if key[0] in device_pids and name.startswith("Stream")
    }
    kernels: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    spans, copies = [], 0
    for e in events:
        if e.get("ph") != "X" or (e.get("pid"), e.get("tid")) not in stream:
            continue
        name, dur = str(e.get("name", "")), float(e.get("dur", 0.0))
        if "memcpy" in name.lower() or "memset" in name.lower():
            copies += 1
        kernels[name][0] += 1
        kernels[name][1] += dur
        spans.append((float(e["ts"]), float(e["ts"]) + dur))
    n = max(1, updates)
    busy_us = _union(spans)
    total_us = sum(v[1] for v in kernels.values())
    top = sorted(kernels.items(), key=lambda kv: -kv[1][1])[:TOP]
    return {
        "updates": updates,
        "wall_us_per_update": 1e6 * wall_s / n,
        "device_events": len(spans),
        "events_per_update": len(spans) / n,
        "copies_per_update": copies / n,
        "kernel_us_per_update": total_us / n,
        "busy_us_per_update": busy_us / n,
        "busy_fraction": busy_us / max(1e-9, 1e6 * wall_s),
        "top": [
            {"name": k, "per_update": c / n, "us_per_update": t / n, "mean_us": t / c}
            for k, (c, t) in top
        ],
        "streams": sorted(threads[k] for k in stream),
        "threads_seen": sorted({n for n in threads.values()})[:40],
    }


def _names(events) -> tuple[dict, dict]:
    """``{pid: process name}``, ``{(pid, tid): thread name}`` from metadata."""
    processes, threads = {}, {}
    for e in events:
        if e.get("ph") != "M":
            continue
        name = str(e.get("args", {}).get("name", ""))
        if e.get("name") == "process_name":
            processes[e.get("pid")] = name
        elif e.get("name") == "thread_name":
            threads[(e.get("pid"), e.get("tid"))] = name
    return processes, threads


def _union(spans: list[tuple[float, float]]) -> float:
    """Total length of the union of ``[start, end)`` intervals."""
    total, end = 0.0, float("-inf")
    for lo, hi in sorted(spans):
        if hi <= end:
            continue
        total += hi - max(lo, end)
        end = hi
    return total
