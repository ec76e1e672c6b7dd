"""Checkpoint restore: bytes read and time of inspect, restore, params-only restore.

    agentrl bench checkpoint_io [--quick]

Saves the training state of ``ad_darkroom``'s ``full`` preset model (4
layers, width 512, with Adam's state; ``--quick``: the smoke model) once,
then measures, each in a fresh ``Checkpointer``:

- ``inspect`` (the pre-restore check of names and shapes),
- ``restore`` (the whole state, onto the arrays' shardings, as a resume),
- ``restore_part`` of ``params`` + ``rest`` (what ``agentrl.load_run`` reads),

as bytes read by this process (``rchar`` of ``/proc/self/io``: every byte
read through a system call, page-cache hits included) and wall time (median
of 5). The reference is the size of the stored arrays (the checkpoint's
``state`` directory on disk). Targets: the check reads < 1% of it; a full
restore reads it about once (<= 1.1x; agentrl 0.1's check read every array
before orbax read them again: 2x).

Writes ``benchmarks/results/checkpoint_io.{json,md}`` (``--quick``: a
temporary folder, unless ``agentrl bench --out DIR`` names one, so a smoke
run never replaces the full record).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import jax
from common import target, write_record

from agentrl.project import RESULTS_ENV


def _rchar() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar")).split()[1])


def _random_state(state):
    """``(state, leaves)``: ``state`` with random normal floats (a trained
    state is not mostly zeros: Adam's moments start at 0)."""
    leaves, treedef = jax.tree.flatten(state)
    keys = jax.random.split(jax.random.key(0), len(leaves))
    leaves = [
        jax.random.normal(k, x.shape, x.dtype)
        if hasattr(x, "dtype") and jax.numpy.issubdtype(x.dtype, jax.numpy.floating)
        else x
        for k, x in zip(keys, leaves, strict=True)
    ]
    return jax.tree.unflatten(treedef, leaves), leaves


def _time_ops(ops: dict, directory: Path, stored: int) -> list[dict]:
    """Bytes read and seconds of each operation on the checkpoint, median of 5."""
    from agentrl.train.checkpoint import Checkpointer

    rows = []
    for name, op in ops.items():
        times, reads = [], []
        for _ in range(5):
            c = Checkpointer(directory, every=1, create=False)
            before, start = _rchar(), time.perf_counter()
            op(c)
            times.append(time.perf_counter() - start)
            reads.append(_rchar() - before)
            c.close()
        rows.append(
            {
                "operation": name,
                "MB read": round(statistics.median(reads) / 1e6, 2),
                "x stored": round(statistics.median(reads) / stored, 3),
                "seconds (median of 5)": round(statistics.median(times), 3),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    from agentrl import envs
    from agentrl.train.checkpoint import Checkpointer
    from agentrl.train.experiments import load_experiment
    from agentrl.train.loop import build_model
    from agentrl.train.step import init_train_state

    parser = argparse.ArgumentParser(prog="agentrl bench checkpoint_io")
    parser.add_argument("--quick", action="store_true", help="the smoke model")
    args = parser.parse_args(argv)
    config = load_experiment("ad_darkroom", "smoke" if args.quick else "full")
    env = envs.make(config.data.env, **dict(config.data.env_args))
    _, state = init_train_state(build_model(config, env), config)
    state, leaves = _random_state(state)
    like = {"params": state["params"], "rest": state["rest"]}
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Checkpointer(Path(tmp) / "c", every=1)
        ckpt.save(1, state, {"step": 1})
        ckpt.close()
        stored = sum(
            p.stat().st_size
            for p in (Path(tmp) / "c" / "1" / "state").rglob("*")
            if p.is_file()  # a folder's own size is not stored bytes
        )
        ops = {
            "inspect": lambda c: c.inspect(1),
            "restore": lambda c: jax.block_until_ready(c.restore(state, 1)[0]),
            "restore_part (params+rest)": lambda c: jax.block_until_ready(
                c.restore_part(like, 1)[0]
            ),
        }
        rows = _time_ops(ops, Path(tmp) / "c", stored)
    by = {r["operation"]: r for r in rows}
    targets = [
        target("inspect reads / stored bytes", by["inspect"]["x stored"], 0.01, False),
        target("restore reads / stored bytes", by["restore"]["x stored"], 1.1, False),
    ]
    results = {
        "stored_bytes": stored,
        "arrays": len(leaves),
        "values": int(sum(getattr(x, "size", 1) for x in leaves)),
        "rows": rows,
    }
    notes = (
        f"State of {results['values']:,} values in {len(leaves)} arrays; "
        f"{stored / 1e6:.1f} MB stored. Bytes read count page-cache hits too."
    )
    # --quick (the smoke model) never replaces the full record: a temporary
    # folder unless `agentrl bench --out` names one
    quick_dir = Path(tempfile.mkdtemp()) if args.quick else None
    out_dir = None if os.environ.get(RESULTS_ENV) else quick_dir
    print(write_record("checkpoint_io", results, targets, rows, notes, out_dir))
    for row in rows:
        print(row)
    for t in targets:
        print(t)


if __name__ == "__main__":
    main()
