"""Generation throughput of the history sources, and peak RSS of chunked writes.

    agentrl bench data_generation [--quick | --gpu] [--no-rss]

Measures (issue 3; issue 34, item 3):

- transitions/s of ``generate("ucb", ...)`` on the DPT bandit (Gaussian,
  5 arms, H = 500) and of ``generate("q_learning", ...)`` on Dark Room 9x9
  (100 episodes of 20 steps), at 1,000 and 10,000 tasks (compiled; best of
  2), against a reference in the same process: the same Q-learning as a
  NumPy loop vectorised over tasks;
- the dataset writer's pipeline: ``write_dataset`` of Q-learning Dark Room
  histories end to end (transitions/s written), against its two halves
  timed alone in the same run: generating the same chunks (the jitted
  source and the copy to the host) and encoding + writing them
  (``write_histories`` of chunks already on the host). The writer encodes
  and writes one chunk in a thread while the next is generated, so the end
  to end time approaches the larger half, not their sum: ``overlap`` is
  (generation + writing) / end to end, 1 for none, up to 2;
- the RSS of ``write_dataset`` (the writer ``agentrl data generate`` calls,
  under the command's malloc setting) writing 40,000 Dark Room histories of
  100 episodes in chunks of 1,000 in a fresh process, read after every
  chunk: memory must stop growing with the number of tasks (the writer
  holds up to three chunks at a time; the target is the RSS's slope over
  chunks 10-40, against a quarter of one chunk's size; ``--no-rss`` leaves
  it out).

``--gpu`` adds 100,000 tasks to the generation sizes and writes 20,000
histories in chunks of 5,000 (the device check's sizes). Writes
``benchmarks/results/data_generation.{json,md}`` (``--quick`` writes into a
temporary folder unless ``agentrl bench --out`` names one).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from common import load_note, target, write_record

from agentrl import envs
from agentrl.data.writer import write_dataset, write_histories
from agentrl.project import RESULTS_ENV
from agentrl.sources.registry import generate, source_histories


def _throughput(source, env, params, num_episodes, ids) -> float:
    steps = num_episodes * env.horizon
    run = lambda k: generate(source, env, params, k, num_episodes, ids)  # noqa: E731
    jax.block_until_ready(run(jax.random.key(0)).action)  # compile
    best = float("inf")
    for seed in (1, 2):
        start = time.perf_counter()
        jax.block_until_ready(run(jax.random.key(seed)).action)
        best = min(best, time.perf_counter() - start)
    return ids.shape[0] * steps / best


def _numpy_q_learning(num_tasks: int, num_episodes: int) -> float:
    """Transitions/s of a NumPy Q-learning loop on Dark Room (reference)."""
    rng = np.random.default_rng(0)
    size, horizon = 9, 20
    goal = rng.integers(0, size, (num_tasks, 2))
    q = np.ones((num_tasks, size * size, 5))
    moves = np.array([[0, -1], [0, 1], [-1, 0], [1, 0], [0, 0]])
    rows = np.arange(num_tasks)
    start = time.perf_counter()
    for ep in range(num_episodes):
        pos = np.full((num_tasks, 2), size // 2)
        eps = max(0.01, 1 - ep / (num_episodes / 2))
        for _ in range(horizon):
            s = pos[:, 1] * size + pos[:, 0]
            greedy = q[rows, s].argmax(1)
            a = np.where(
                rng.random(num_tasks) < eps, rng.integers(0, 5, num_tasks), greedy
            )
            pos = np.clip(pos + moves[a], 0, size - 1)
            r = (pos == goal).all(1).astype(float)
            s2 = pos[:, 1] * size + pos[:, 0]
            target_q = r + 0.9 * q[rows, s2].max(1)
            q[rows, s, a] += 0.8 * (target_q - q[rows, s, a])
    return num_tasks * num_episodes * horizon / (time.perf_counter() - start)


def _write_pipeline(
    tasks: int, episodes: int, chunk: int, bandit: bool = False
) -> dict:
    """End-to-end ``write_dataset`` against generation alone and writing alone.

    ``tasks`` is a multiple of ``chunk``, so the three do the same work.
    ``bandit``: the dpt_bandit gpu preset's data (``dpt_rollin`` on the
    5-arm Gaussian bandit, H = 500, one episode) instead of Q-learning Dark
    Room histories of ``episodes`` episodes.
    """
    if bandit:
        room = envs.make("gaussian_bandit", num_arms=5, horizon=500, noise_std=0.3)
        histories, episodes = source_histories("dpt_rollin", room), 1
    else:
        room = envs.make("darkroom")
        histories = source_histories("q_learning", room)
    steps = episodes * room.horizon
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # compile the chunk's program (and warm TFDS's imports) first
        write_dataset(tmp / "warm", room, histories, chunk, episodes, chunk_size=chunk)
        start = time.perf_counter()
        write_dataset(
            tmp / "ds", room, histories, tasks, episodes, seed=1, chunk_size=chunk
        )
        end_to_end = time.perf_counter() - start
        if bandit:
            ids = jnp.arange(chunk, dtype=jnp.int32)
            params = jax.vmap(room.sample_params)(
                jax.random.split(jax.random.key(0), chunk)
            )
        else:
            ids = jnp.arange(chunk, dtype=jnp.int32) % room.num_tasks
            params = jax.vmap(room.params_for_task)(ids)
        start = time.perf_counter()
        for c in range(-(-tasks // chunk)):
            host = jax.device_get(histories(params, jax.random.key(c), episodes, ids))
        generation = time.perf_counter() - start
        chunks = [host] * -(-tasks // chunk)  # the same host chunk each time
        metadata = {"task_ids": {"train": [0] * chunk * len(chunks)}}
        start = time.perf_counter()
        write_histories(tmp / "host", {"train": chunks}, metadata)
        writing = time.perf_counter() - start
    transitions = tasks * steps  # tasks is a multiple of chunk: same work
    return {
        "data": "dpt_rollin gaussian_bandit H=500" if bandit else "q_learning darkroom",
        "tasks": tasks,
        "episodes": episodes,
        "chunk_size": chunk,
        "end_to_end_s": end_to_end,
        "generation_s": generation,
        "writing_s": writing,
        "transitions_per_s": transitions / end_to_end,
        "generation_transitions_per_s": transitions / generation,
        "writing_transitions_per_s": transitions / writing,
        "overlap": (generation + writing) / end_to_end,
    }


#: the child process of :func:`_rss_run`: ``write_dataset`` (what ``agentrl
#: data generate`` calls) of Q-learning Dark Room histories, under the
#: ``agentrl`` command's malloc setting, its RSS read after every chunk
_RSS_CHILD = """
import json, sys, tempfile
from pathlib import Path
from agentrl.host_memory import configure_malloc
configure_malloc()
import agentrl.envs as envs
from agentrl.data.writer import write_dataset
from agentrl.sources.registry import source_histories
tasks, episodes, chunk = map(int, sys.argv[1:4])
def rss(field="VmRSS:"):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) / 1024
env = envs.make("darkroom")
after = []
with tempfile.TemporaryDirectory() as tmp:
    write_dataset(Path(tmp) / "ds", env, source_histories("q_learning", env),
                  tasks, episodes, 0, env_name="darkroom", chunk_size=chunk,
                  progress=lambda n: after.append(rss()))
    size = sum(p.stat().st_size for p in Path(tmp).rglob("*") if p.is_file())
# VmHWM, this process's own high-water mark: getrusage's ru_maxrss would
# carry over the forking parent's RSS across the exec (the benchmark's)
print(json.dumps({"peak": rss("VmHWM:"), "after": after, "bytes": size}))
"""


def _rss_run(tasks: int, episodes: int, chunk: int) -> dict:
    """One write of ``tasks`` histories in chunks of ``chunk`` in a fresh
    process (:data:`_RSS_CHILD`): its peak RSS (``VmHWM``), its RSS after
    each chunk (MiB; read from ``/proc/self/status``, so Linux only),
    seconds and dataset MiB. (``getrusage``'s ``ru_maxrss`` in the child
    keeps the forking parent's RSS across the exec: the records before
    2026-11-30 read 1,960 MiB "peaks" that were the benchmark's own.)"""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, str(tasks), str(episodes), str(chunk)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {
        "peak_rss_mib": out["peak"],
        "rss_after_chunk_mib": out["after"],
        "seconds": time.perf_counter() - start,
        "dataset_mib": out["bytes"] / 2**20,
    }


def _generation_rows(sizes: list[int], episodes: int, bandit, room) -> list[dict]:
    """Transitions per second of each source at each number of tasks."""
    rows = []
    for n in sizes:
        ids = jnp.arange(n, dtype=jnp.int32)
        keys = jax.random.split(jax.random.key(0), n)
        b_params = jax.vmap(bandit.sample_params)(keys)
        r_params = jax.vmap(room.params_for_task)(ids % room.num_tasks)
        for name, tps in [
            (
                "ucb / gaussian_bandit (DPT)",
                _throughput("ucb", bandit, b_params, 1, ids),
            ),
            (
                "q_learning / darkroom 9x9",
                _throughput("q_learning", room, r_params, episodes, ids),
            ),
        ]:
            row = {"source / env": name, "tasks": n, "transitions/s": tps}
            rows.append(row)
            print(row, flush=True)
    return rows


def _peak_rss(rss_tasks: int, episodes: int, rss_chunk: int) -> dict:
    """RSS of one write of ``4 x rss_tasks`` histories in chunks of
    ``rss_chunk``, read after every chunk in one process.

    The writer holds up to three chunks at a time (one generating, one
    queued, one being encoded and written) and the allocator settles over
    the first chunks, so the RSS grows at first; past ``rss_tasks`` it must
    not grow with the number of tasks. The target is the least-squares
    slope of the RSS over chunks ``n = rss_tasks / rss_chunk`` to ``4 n``,
    in MiB per chunk, against a quarter of one chunk's histories: a writer
    that kept what it wrote would add at least a whole chunk's per chunk,
    while the allocator's one-off steps (0 to 61 MiB, somewhere past chunk
    10, in 2 of 5 runs on 2026-11-30, the level then flat at ~700 MiB) add
    a few MiB per chunk to a 30-chunk slope. The growth past chunk ``n``
    is reported beside it. One process, read after each chunk: two
    processes' RSS differ by tens of MiB on their own.
    """
    n = rss_tasks // rss_chunk
    run = _rss_run(4 * rss_tasks, episodes, rss_chunk)
    after = run["rss_after_chunk_mib"]
    history_bytes = rss_tasks * episodes * 20 * (4 * 4 + 2)  # columns + bools
    return {
        "tasks": rss_tasks,
        "episodes": episodes,
        "chunk_size": rss_chunk,
        "chunks": len(after),
        "run": run,
        "rss_at_chunks_mib": {
            str(c): after[c - 1] for c in sorted({1, 2, 3, n, 2 * n, 3 * n, 4 * n})
        },
        "peak_rss_mib": run["peak_rss_mib"],
        "growth_after_chunk_mib": max(after[n - 1 :]) - after[n - 1],
        "slope_after_chunk_mib": float(
            np.polyfit(np.arange(n, len(after) + 1), after[n - 1 :], 1)[0]
        ),
        "all_histories_mib": history_bytes / 2**20,
        "one_chunk_histories_mib": history_bytes / 2**20 * rss_chunk / rss_tasks,
        "dataset_mib": run["dataset_mib"],
        "seconds": run["seconds"],
    }


#: ``(generation sizes, episodes, RSS tasks, RSS chunk, pipeline (tasks,
#: chunk))`` of each mode
SIZES = {
    "quick": ([100, 300], 10, 1_000, 100, (400, 100)),
    "cpu": ([1_000, 10_000], 100, 10_000, 1_000, (4_000, 1_000)),
    "gpu": ([1_000, 10_000, 100_000], 100, 10_000, 1_000, (20_000, 5_000)),
}


#: ``(tasks, chunk)`` of the dpt_rollin bandit write of each mode
BANDIT_PIPELINE = {
    "quick": (400, 100),
    "cpu": (10_000, 1_000),
    "gpu": (50_000, 5_000),
}


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="agentrl bench data_generation", description=__doc__
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke)")
    parser.add_argument("--gpu", action="store_true", help="the device check's sizes")
    parser.add_argument("--no-rss", action="store_true", help="skip the RSS runs")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    load_at_start = os.getloadavg()[0]
    mode = "quick" if args.quick else "gpu" if args.gpu else "cpu"
    sizes, episodes, rss_tasks, rss_chunk, (pipe_tasks, pipe_chunk) = SIZES[mode]

    bandit = envs.make("gaussian_bandit")
    room = envs.make("darkroom")
    rows = _generation_rows(sizes, episodes, bandit, room)
    results = {"mode": mode, "generation": list(rows), "peak_rss": {}}
    ref = _numpy_q_learning(1_000, 5 if not args.quick else 2)
    q_big = max(r["transitions/s"] for r in rows if r["source / env"].startswith("q_"))
    rows.append(
        {
            "source / env": "numpy Q-learning loop (reference)",
            "tasks": 1000,
            "transitions/s": ref,
        }
    )
    results["numpy_q_learning_reference"] = ref
    results["q_learning_speedup_vs_numpy"] = q_big / ref
    print(f"numpy reference {ref:.3g} transitions/s; agentrl x{q_big / ref:.1f}")
    pipe = results["write_pipeline"] = _write_pipeline(pipe_tasks, episodes, pipe_chunk)
    print(pipe, flush=True)
    rows += _pipeline_rows(pipe)
    # the dpt_bandit gpu preset's data: 2.5x the tasks (500 steps, not 2,000)
    bandit_tasks, bandit_chunk = BANDIT_PIPELINE[mode]
    bpipe = _write_pipeline(bandit_tasks, 1, bandit_chunk, bandit=True)
    results["write_pipeline_dpt_bandit"] = bpipe
    print(bpipe, flush=True)
    rows += _pipeline_rows(bpipe)
    q_last = [
        r
        for r in rows
        if r["source / env"].startswith("q_") and r["tasks"] == sizes[-1]
    ]
    targets = [
        target(
            f"q_learning darkroom generation, transitions/s ({sizes[-1]} tasks)",
            q_last[0]["transitions/s"],
            1_000_000,
        ),
        target(
            "writer overlap: (generation + writing alone) / end to end",
            pipe["overlap"],
            1.2,
        ),
    ]
    notes = _pipeline_note(pipe) + " " + _pipeline_note(bpipe)
    if not args.no_rss and not Path("/proc/self/status").exists():
        notes += " RSS not measured: it is read from /proc (Linux)."
    elif not args.no_rss:
        peak = results["peak_rss"] = _peak_rss(rss_tasks, episodes, rss_chunk)
        print(peak)
        targets.append(_rss_target(peak))
        notes += " " + _rss_note(peak)
    notes += " " + load_note(load_at_start) + "."
    tmp = Path(tempfile.mkdtemp()) if args.quick else None
    out_dir = None if os.environ.get(RESULTS_ENV) else tmp
    print(write_record("data_generation", results, targets, rows, notes, out_dir))


def _pipeline_rows(pipe: dict) -> list[dict]:
    """The writer's three timings as rows of the generation table."""
    name = f"write_dataset {pipe['data']} (chunks of {pipe['chunk_size']:,})"
    return [
        {
            "source / env": f"{name}: end to end",
            "tasks": pipe["tasks"],
            "transitions/s": pipe["transitions_per_s"],
        },
        {
            "source / env": f"{name}: generation alone",
            "tasks": pipe["tasks"],
            "transitions/s": pipe["generation_transitions_per_s"],
        },
        {
            "source / env": f"{name}: encoding + writing alone",
            "tasks": pipe["tasks"],
            "transitions/s": pipe["writing_transitions_per_s"],
        },
    ]


def _pipeline_note(pipe: dict) -> str:
    return (
        f"write_dataset of {pipe['tasks']:,} {pipe['data']} histories x "
        f"{pipe['episodes']} episodes: {pipe['end_to_end_s']:.1f} s end to end, "
        f"against {pipe['generation_s']:.1f} s generating the same chunks alone and "
        f"{pipe['writing_s']:.1f} s encoding + writing them alone (same run): "
        f"overlap {pipe['overlap']:.2f} (1 = none, 2 = perfect)."
    )


def _rss_target(peak: dict) -> dict:
    n = peak["tasks"] // peak["chunk_size"]
    return target(
        f"RSS slope over chunks {n}-{peak['chunks']} (MiB per chunk) <= a "
        "quarter of one chunk of histories",
        peak["slope_after_chunk_mib"],
        peak["one_chunk_histories_mib"] / 4,
        higher_is_better=False,
    )


def _rss_note(peak: dict) -> str:
    by_chunks = ", ".join(f"{c}: {v:.0f}" for c, v in peak["rss_at_chunks_mib"].items())
    n = peak["tasks"] // peak["chunk_size"]
    return (
        f"RSS of write_dataset (agentrl data generate's writer, the command's "
        f"malloc setting) writing {peak['chunks'] * peak['chunk_size']:,} Dark "
        f"Room histories x {peak['episodes']} episodes in chunks of "
        f"{peak['chunk_size']:,}, one process, MiB after chunk: {by_chunks}; "
        f"peak {peak['peak_rss_mib']:.0f} (the writer holds up to three chunks: "
        f"generating, queued, writing); after chunk {n}: slope "
        f"{peak['slope_after_chunk_mib']:.2f} MiB per chunk, growth "
        f"{peak['growth_after_chunk_mib']:.0f} MiB; one chunk of histories "
        f"{peak['one_chunk_histories_mib']:.0f} MiB raw (all {peak['tasks']:,} "
        f"together {peak['all_histories_mib']:.0f} MiB)."
    )


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    main()
