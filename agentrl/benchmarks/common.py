"""Shared plumbing of the benchmarks: machine facts, timing, result files.

Every benchmark writes ``<name>.json`` and ``<name>.md`` into
:func:`results_dir` (``benchmarks/results`` under the current directory, or
``$AGENTRL_BENCH_RESULTS``). The JSON has ``machine``, ``date``,
``agentrl_version``, ``results`` (free form) and ``targets``:
``[{"name", "value", "target", "higher_is_better", "met"}]``.
"""

from __future__ import annotations

import datetime
import os
import platform
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

import agentrl
from agentrl.benchmarks import RESULTS_ENV
from agentrl.tables import markdown_table, write_json, write_text


def results_dir() -> Path:
    """Where results go: ``$AGENTRL_BENCH_RESULTS`` or ``./benchmarks/results``.

    Relative to the current directory, so that run from a checkout the
    results land beside the committed ones.
    """
    return Path(os.environ.get(RESULTS_ENV) or Path("benchmarks") / "results")


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    device = jax.devices()[0]
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "device_kind": device.device_kind,
        "platform": device.platform,
        "num_devices": jax.device_count(),
        "jax_version": jax.__version__,
    }


def timeit(fn, *args, repeats: int = 3) -> float:
    """Best wall time in seconds of ``fn(*args)`` (already compiled), blocking."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best


def matmul_peak_flops(n: int = 2048, dtype=jnp.float32) -> float:
    """Achieved FLOP/s of a large jitted square matmul: the machine's peak here."""
    a = jnp.ones((n, n), dtype)
    f = jax.jit(lambda x: x @ x)
    jax.block_until_ready(f(a))
    return 2 * n**3 / timeit(f, a, repeats=5)


def target(name: str, value: float, goal: float, higher_is_better: bool = True):
    """One entry of the ``targets`` list; ``met`` says whether it holds."""
    met = value >= goal if higher_is_better else value <= goal
    return {
        "name": name,
        "value": float(value),
        "target": float(goal),
        "higher_is_better": higher_is_better,
        "met": bool(met),
    }


def write_results(
    name: str,
    results: Any,
    targets: list[dict[str, Any]],
    table_rows: list[dict[str, Any]],
    notes: str = "",
    out_dir: Path | None = None,
) -> Path:
    """Write ``<name>.json`` and ``<name>.md``; return the JSON path."""
    out_dir = Path(out_dir or results_dir())
    payload = {
        "name": name,
        "machine": machine_info(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "agentrl_version": agentrl.__version__,
        "results": results,
        "targets": targets,
    }
    path = write_json(out_dir / f"{name}.json", payload)
    md = [
        f"# {name}",
        "",
        f"{payload['date']} · {payload['machine']['cpu']} · "
        f"{payload['machine']['cores']} cores · {payload['machine']['device_kind']}",
        "",
        markdown_table(table_rows),
        "",
    ]
    if targets:
        md += ["## Targets", "", markdown_table(targets), ""]
    if notes:
        md += [notes, ""]
    write_text(out_dir / f"{name}.md", "\n".join(md))
    return path
