"""A vectorized sweep of many members against one member alone, same run.

Run: ``agentrl bench sweep_members [--experiment NAME] [--preset P]
[--members M] [--tasks N] [--chunks C] [--quick]``

Issue 34's sweep target: ``M = 16`` members (seeds) of ``dpt_bandit``'s
``gpu`` preset trained by :func:`agentrl.sweep.train_sweep` (the same scanned
updates as ``fit``, each member's batches drawn on the device) in at most
twice the time of one member. Both sides run ``train_sweep`` on the same
dataset with the same ``steps_per_call`` ``K`` (the platform's default,
:func:`agentrl.train.config.steps_per_call`); only the member count
differs.

Timing (compile kept out): each side runs ``K`` updates (one call) twice,
then ``K * (1 + C)`` updates twice. A step count is its own config, so the
first run of each count traces its program again (``train_sweep`` caches
the compiled chunk per config) and loads it from the persistent compilation
cache; the second runs of the two counts pay the same start-up (model
init, the cached program) and their difference is ``C`` calls of ``K``
updates. (Until session 53 the long count ran once, so its first-run
start-up was charged to the updates: a fixed cost that pulled the ratio
towards 1.) The learning rate is constant (the preset's warm-up and cosine
decay depend on the step count, which would make each run a new program,
and a warm-up longer than one call is refused; one scalar per update
either way). Reported per side:
seconds per update (all members together), member-updates per second; and
the ratio of the two sides' seconds per
update (``M`` members over one), target <= 2.

Data: the preset's histories at ``--tasks`` tasks (default 10,000 of the
preset's 100,000; the update's shapes, batch and context, do not depend on
the number of tasks; recorded). Each member's device sampler holds its own
copy of the decoded split.

Writes ``sweep_members.{json,md}`` (``--quick``: ``dpt_bandit`` smoke, 4
members, 2 chunks: the plumbing on the CPU).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from pathlib import Path

import common as bench
import jax

from agentrl import envs
from agentrl.sweep import train_sweep
from agentrl.train.config import complete_config, steps_per_call
from agentrl.train.data import prepare_dataset
from agentrl.train.experiments import load_experiment

TARGET_RATIO = 2.0


def _config(name: str, preset: str, tasks: int):
    """The experiment at ``preset`` with at most ``tasks`` training tasks."""
    config = load_experiment(name, preset)
    if tasks and tasks < config.data.num_tasks:
        config = dataclasses.replace(
            config, data=dataclasses.replace(config.data, num_tasks=tasks)
        )
    return config


def _with_steps(config, steps: int):
    """``config`` at ``steps`` updates with a schedule that does not depend on
    them (constant, no warm-up: a warm-up longer than the shortest run is
    refused): the program is the same at every step count, so the warm runs
    reuse the compiled one."""
    fixed = dataclasses.replace(
        config.train, steps=steps, schedule="constant", warmup_steps=0
    )
    return dataclasses.replace(config, train=fixed)


def time_side(config, env, dataset, members: int, k: int, chunks: int) -> dict:
    """Seconds per update of ``members`` seeds in one ``train_sweep``."""
    seeds = list(range(members))
    runs = []
    long = k * (1 + chunks)
    for steps in (k, k, long, long):
        start = time.perf_counter()
        result = train_sweep(
            _with_steps(config, steps), env, dataset, seeds, steps_per_call=k
        )
        jax.block_until_ready(result.state)
        runs.append(time.perf_counter() - start)
        # a step's limit that kills this process still leaves these lines
        print(f"{members} member(s), {steps} updates: {runs[-1]:.1f} s", flush=True)
    per_update = (runs[3] - runs[1]) / (k * chunks)  # the warm runs' difference
    return {
        "members": members,
        "first_call_s": runs[0],
        "warm_call_s": runs[1],
        "long_first_run_s": runs[2],
        "long_run_s": runs[3],
        "s_per_update": per_update,
        "member_updates_per_s": members / per_update,
    }


def measure(args: argparse.Namespace, root: Path) -> dict:
    config = _config(args.experiment, args.preset, args.tasks)
    env = envs.make(config.data.env, **dict(config.data.env_args))
    start = time.perf_counter()
    dataset = prepare_dataset(config, env, root, progress=False)
    data_s = time.perf_counter() - start
    full = complete_config(config, env, dataset)
    k = steps_per_call(full.train, jax.default_backend())
    one = time_side(config, env, dataset, 1, k, args.chunks)
    many = time_side(config, env, dataset, args.members, k, args.chunks)
    return {
        "experiment": args.experiment,
        "preset": args.preset,
        "num_tasks": config.data.num_tasks,
        "batch_size": full.train.batch_size,
        "model": {
            f: getattr(full.model, f) for f in ("num_layers", "d_model", "num_heads")
        },
        "steps_per_call": k,
        "timed_calls": args.chunks,
        "data_s": data_s,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "one": one,
        "many": many,
        "ratio": many["s_per_update"] / one["s_per_update"],
    }


def _use_compile_cache(root: Path) -> None:
    """A persistent compile cache (the device check's, else a fresh one), every
    program cached: the warm runs load what the first one compiled."""
    if not os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        jax.config.update("jax_compilation_cache_dir", str(root / "jax_cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def _table(r: dict) -> list[dict]:
    return [
        {
            "members": side["members"],
            "first call (s)": f"{side['first_call_s']:.1f}",
            "ms per update (all members)": f"{1e3 * side['s_per_update']:.3f}",
            "member-updates/s": f"{side['member_updates_per_s']:.0f}",
        }
        for side in (r["one"], r["many"])
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="dpt_bandit")
    parser.add_argument("--preset", default="gpu")
    parser.add_argument("--members", type=int, default=16)
    parser.add_argument("--tasks", type=int, default=10_000, help="0: the preset's")
    # 5 calls: on one H200 (2026-11-28) 20 calls of 16 members ran past the
    # device check's 120 s limit before a record was written
    parser.add_argument("--chunks", type=int, default=5, help="timed calls")
    parser.add_argument("--quick", action="store_true", help="smoke, 4 members")
    args = parser.parse_args(argv)
    if args.quick:
        args.preset, args.members, args.chunks = "smoke", 4, 2
    with tempfile.TemporaryDirectory() as tmp:
        _use_compile_cache(Path(tmp))
        r = measure(args, Path(tmp))
    name = f"{args.members} members vs 1"
    targets = [
        bench.target(
            f"{args.experiment} {args.preset}: time per update, {name}",
            r["ratio"],
            TARGET_RATIO,
            higher_is_better=False,
        )
    ]
    notes = (
        f"{r['backend']} ({', '.join(r['devices'])}); {r['num_tasks']} tasks; "
        f"{r['steps_per_call']} updates per call, {r['timed_calls']} calls timed "
        "per side after a compile run and a warm run (their difference)."
    )
    path = bench.write_record("sweep_members", r, targets, _table(r), notes)
    print(bench.markdown_table(_table(r)))
    print(f"ratio {r['ratio']:.2f} (target <= {TARGET_RATIO}); wrote {path}")


if __name__ == "__main__":
    main()
