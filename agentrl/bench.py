"""Shared plumbing for benchmarks: machine facts, matmul peak, result files.

Every benchmark writes ``benchmarks/results/<name>.json`` and ``<name>.md``.
The JSON has ``machine``, ``date``, ``agentrl_version``, ``results`` (free
form) and ``targets``: ``[{"name", "value", "target", "higher_is_better"}]``.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

import agentrl

RESULTS_DIR = Path(__file__).resolve().parent.parent / "benchmarks" / "results"


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


def markdown_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    cols = list(rows[0])
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def write_results(
    name: str,
    results: Any,
    targets: list[dict[str, Any]],
    table_rows: list[dict[str, Any]],
    notes: str = "",
    out_dir: Path | None = None,
) -> Path:
    """Write ``<name>.json`` and ``<name>.md``; return the JSON path."""
    out_dir = Path(out_dir or RESULTS_DIR)
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {
        "name": name,
        "machine": machine_info(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "agentrl_version": agentrl.__version__,
        "results": results,
        "targets": targets,
    }
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2))
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
    (out_dir / f"{name}.md").write_text("\n".join(md))
    return path
