"""Shared plumbing of the benchmarks: timing, load, peaks, result files.

The benchmarks import it by name (``import common as bench``): ``agentrl
bench NAME`` and ``python benchmarks/NAME.py`` both put this folder on
``sys.path``. Every benchmark writes ``<name>.json`` and ``<name>.md`` with
:func:`write_record` (the library's record form, shared with ``agentrl
reproduce``: ``machine``, ``date``, ``agentrl_version``, ``results`` (free
form) and ``targets`` made by :func:`target`) into
:func:`results_dir` (``benchmarks/results`` under the current directory, or
``$AGENTRL_BENCH_RESULTS``, which ``agentrl bench --out DIR`` sets).
"""

from __future__ import annotations

import dataclasses
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from agentrl.agents.driver import run_batched_agent
from agentrl.agents.model_agents import ModelHandle
from agentrl.envs import make as make_env
from agentrl.evaluate.reproduce_record import target, write_record
from agentrl.prng import is_key
from agentrl.project import results_dir
from agentrl.provenance import machine_info
from agentrl.tables import markdown_table
from agentrl.train.experiments import load_experiment
from agentrl.train.loop import build_model

__all__ = [
    "compile_and_pair",
    "fresh_keys",
    "load_note",
    "machine_info",
    "markdown_table",
    "matmul_peak_flops",
    "median_ci",
    "paired_rounds",
    "results_dir",
    "round_order",
    "target",
    "time_agent",
    "time_agents",
    "timeit",
    "write_record",
]


def load_note(start: float) -> str:
    """What the machine was doing: the 1-minute load average at a run's start
    (``start``, read before it) and now, and the core count, stated as
    measured rather than as "quiet" or "shared"."""
    now = os.getloadavg()[0]
    return (
        f"Load average {start:.1f} at the start and {now:.1f} at the end on "
        f"{os.cpu_count()} cores (the run itself keeps them busy)"
    )


def timeit(fn, *args, repeats: int = 3) -> float:
    """Best wall time in seconds of ``fn(*args)`` (already compiled), blocking.

    Each call gets its own PRNG keys (:func:`fresh_keys`): the same work,
    other random numbers, and no key used twice.
    """
    best = float("inf")
    for call in range(repeats):
        call_args = fresh_keys(args, call)
        start = time.perf_counter()
        jax.block_until_ready(fn(*call_args))
        best = min(best, time.perf_counter() - start)
    return best


def darkroom_cpu_model(num_tasks: int, horizon=None, context_episodes=None):
    """``(env, model, params [num_tasks])``: ``ad_darkroom``'s cpu model with
    random weights, on Dark Room with another ``horizon`` and context of
    ``context_episodes`` episodes where given (the MuJoCo experiments'
    400-step context is ``(100, 4)``)."""
    config = load_experiment("ad_darkroom", "cpu")
    env_args = dict(config.data.env_args)
    if horizon is not None:
        env_args["horizon"] = horizon
    algo = config.algo
    if context_episodes is not None:
        algo = dataclasses.replace(algo, context_episodes=context_episodes)
    data = dataclasses.replace(config.data, env_args=tuple(env_args.items()))
    config = dataclasses.replace(config, algo=algo, data=data)
    env = make_env(config.data.env, **env_args)
    model = build_model(config, env)
    keys = jax.random.split(jax.random.key(1), num_tasks)
    return env, model, jax.vmap(env.sample_params)(keys)


def time_agent(make_agent, handle, env, params, num_steps: int, repeats: int):
    """``(compile_s, best seconds, actions [tasks, steps])`` of the batched
    agent ``make_agent(model)`` acting ``num_steps`` steps on the tasks
    ``params`` in one jit, the model's weights (``handle``, a
    :class:`~agentrl.agents.model_agents.ModelHandle`) a traced argument."""

    @jax.jit
    def run(weights, params, key):
        agent = make_agent(ModelHandle(handle.graphdef, weights))
        return run_batched_agent(env, agent, params, key, num_steps)[0].action

    key = jax.random.key(0)
    start = time.perf_counter()
    compiled = run.lower(handle.weights, params, key).compile()
    compile_s = time.perf_counter() - start
    actions = jax.block_until_ready(compiled(handle.weights, params, key))
    best = timeit(compiled, handle.weights, params, key, repeats=repeats)
    return compile_s, best, actions


def time_agents(makers: dict, handle, env, params, num_steps: int, repeats: int):
    """``(rows, actions)``: :func:`time_agent` for each ``{method:
    make_agent}``, a row each (seconds, env steps per second over all
    tasks, compile seconds) and each method's actions ``[tasks, steps]``."""
    num_tasks = jax.tree.leaves(params)[0].shape[0]
    rows, actions = [], []
    for name, make_agent in makers.items():
        compile_s, sec, acts = time_agent(
            make_agent, handle, env, params, num_steps, repeats
        )
        actions.append(acts)
        rows.append(
            {
                "method": name,
                "seconds": sec,
                "env_steps_per_s": num_tasks * num_steps / sec,
                "compile_s": compile_s,
            }
        )
        print(f"{name}: {num_steps} steps x {num_tasks} tasks in {sec:.2f}s")
    return rows, actions


def round_order(names, r: int) -> list:
    """``names`` in round ``r``'s order: as given in even rounds, reversed in
    odd ones, so no candidate always runs right after (or before) another."""
    names = list(names)
    return names if r % 2 == 0 else names[::-1]


def paired_rounds(
    fns: dict, rounds: int, *, warmup: bool = True
) -> dict[str, list[float]]:
    """Seconds of each ``name: (fn, args)`` (compiled) per round, timed in turn.

    Each round times every candidate once, in an order that reverses from
    round to round, so a candidate is not always the one after (or before) a
    given other one. A ratio of two candidates *within* a round compares them
    under the same load, which drifts on a shared machine from one round to
    the next; :func:`median_ci` then summarises the per-round ratios. Every
    call, the warm-up included, gets its own PRNG keys (:func:`fresh_keys`).
    ``warmup=False`` skips the untimed first call (the caller made one).
    Returns ``{name: [seconds per round]}``.
    """
    for fn, args in fns.values() if warmup else ():
        jax.block_until_ready(fn(*fresh_keys(args, 0)))
    names = list(fns)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in round_order(names, r):
            fn, args = fns[name]
            call_args = fresh_keys(args, r + 1)
            start = time.perf_counter()
            jax.block_until_ready(fn(*call_args))
            seconds[name].append(time.perf_counter() - start)
    return seconds


def compile_and_pair(runs: dict, rounds: int) -> tuple[dict, dict, dict]:
    """``(compile_s, outputs, seconds)`` of ``{name: (jitted fn, args)}``.

    Each ``fn`` is compiled for ``args`` (timed: ``compile_s[name]``) and
    called once on ``args`` themselves (``outputs[name]``, the warm-up); then
    :func:`paired_rounds` times them in alternating rounds
    (``seconds[name]``, one per round) on keys of their own.
    """
    compile_s, compiled, outputs = {}, {}, {}
    for name, (fn, args) in runs.items():
        start = time.perf_counter()
        compiled[name] = fn.lower(*args).compile()
        compile_s[name] = time.perf_counter() - start
        outputs[name] = jax.block_until_ready(compiled[name](*args))
    pairs = {name: (compiled[name], runs[name][1]) for name in runs}
    return compile_s, outputs, paired_rounds(pairs, rounds, warmup=False)


#: The stream timing calls draw their keys from: far from the small indices
#: that ``jax.random.split(key, n)[i] == fold_in(key, i)`` hands out, so no
#: timed call's key equals one that a warm-up call split off the same key.
_TIMING_STREAM = 2**31 - 1


def fresh_keys(args, call: int):
    """``args`` (a pytree) with every typed PRNG key ``k`` replaced by
    ``fold_in(fold_in(k, _TIMING_STREAM), call)``, elementwise over key arrays.

    Timing one compiled function again and again on the same key repeats the
    same work, but it is key reuse (``jax_debug_key_reuse`` raises); folding
    in the call's index gives each call keys of its own. ``fold_in`` does
    not consume the given key, so the caller's warm-up may use it.
    """

    def fold(x):
        if not is_key(x):
            return x
        flat = jax.vmap(jax.random.fold_in, (0, None))(x.reshape(-1), _TIMING_STREAM)
        flat = jax.vmap(jax.random.fold_in, (0, None))(flat, call)
        return flat.reshape(x.shape)

    return jax.tree.map(fold, args)


def median_ci(
    values, level: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float, float]:
    """``(median, low, high)``: the median and its percentile-bootstrap CI.

    ``values`` (e.g. per-round time ratios) are resampled with replacement
    ``resamples`` times (a fixed ``seed``: the interval is reproducible from
    the recorded values); ``low``/``high`` are the ``(1 -+ level) / 2``
    quantiles of the resampled medians.
    """
    x = np.asarray(values, np.float64)
    if x.size == 0:
        raise ValueError("median_ci needs at least one value")
    rng = np.random.default_rng(seed)
    medians = np.median(x[rng.integers(0, x.size, (resamples, x.size))], axis=1)
    tail = (1.0 - level) / 2
    low, high = np.quantile(medians, [tail, 1.0 - tail])
    return float(np.median(x)), float(low), float(high)


def matmul_peak_flops(n: int = 2048, dtype=jnp.float32) -> float:
    """Achieved FLOP/s of a large jitted square matmul: the machine's peak here."""
    a = jnp.ones((n, n), dtype)
    f = jax.jit(lambda x: x @ x)
    jax.block_until_ready(f(a))
    return 2 * n**3 / timeit(f, a, repeats=5)
