"""Training steps at every gpu and full preset's shape in bfloat16, against a
bfloat16 matmul peak measured in the same run (``train_throughput --gpu``).

For each experiment trained from a dataset (``experiments/``; the online
learners bring their own programs) and each of its ``full`` and ``gpu``
presets, the real update step (``init_train_state`` + ``make_train_step``)
at the preset's model, batch and window, with ``model.compute_dtype =
"bfloat16"``, on synthetic batches drawn from the environment's own spaces
(:func:`synthetic_batch`). Presets of one shape (:func:`shape_key`: the
algorithm, model, batch, environment and algorithm settings; e.g.
``ad_darkroom``'s ``gpu`` and ``full``, which differ only in steps) are
measured once and listed together; ``dt_darkroom`` shares ``ad_darkroom``'s
model but is another algorithm, so it has a row of its own. Rows go widest
first, so a ``--budget`` that runs out leaves the narrow ones.

RA-DT rows time the model's update only: RA-DT draws its batches inside the
jitted update with a retrieval (:class:`agentrl.algos.radt.RetrievalDeviceSampler`:
a similarity search over the memory and the pieces' gather), which a
synthetic batch leaves out, so its real step costs more than its row.

Two diagnostic rows follow the widest shape with dropout (reported, no
target): the same step with dropout off, and with its dropout masks drawn
from ``"rbg"`` keys instead of threefry (``jax_default_prng_impl``). The
first GPU run reached 0.20 of the peak at width 512; generating dropout
bits with threefry is one known cost of that kind on GPUs, and these rows
say how much of the step it is.

The peak: the best of ten ``n x n @ n x n`` bfloat16 products on random
normal data (n = 8192 on an accelerator, 256 on the CPU, where bfloat16
matmuls are emulated and slow), jitted, after a warm-up. FLOPs per step
are analytic, the step's useful work (:func:`train_throughput.train_flops`:
3 x forward, causal attention over the ``T (T + 1) / 2`` query-key pairs the
mask keeps, nothing masked or recomputed; the work XLA and cuBLAS actually
do is more). XLA's own count (``cost_analysis``) is recorded beside it on
the CPU only: on a GPU it leaves out the matmuls XLA hands to cuBLAS as
custom calls (the first GPU record's was ~70x below the analytic count),
so it is not comparable there and the row says so instead
(``xla_flops_note``).

An earlier record of the same device kind may be passed on
(``train_throughput --gpu --skip-done RECORD``, :func:`earlier_rows`): a
shape it measured is not measured again when its row names the same shape
(:func:`shape_digest`: the model, batch, environment, algorithm settings
and diagnostic) and the same analytic FLOP count (so the count's
definition has not changed since); the row is kept as measured then, with
that run's date in ``measured`` and its fraction of that run's peak. So a
device check whose ``--budget`` cannot cover every shape goes on where the
last one stopped.

``--quick`` (the CPU): the experiments of :data:`QUICK_EXPERIMENTS` only
(both token layouts and a MoE), batch :data:`QUICK_BATCH`, the best of 2
passes of one timed step each; shapes whose analytic step is above
:data:`QUICK_FLOP_CAP` are listed, not run (minutes per step on 2 cores).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import time
from pathlib import Path
from typing import Any

#: the presets measured, by value: the paper's widths first
PRESETS = ("full", "gpu")
QUICK_EXPERIMENTS = ("ad_darkroom", "dpt_bandit", "t2mir_ad_darkroom")
QUICK_BATCH = 2
QUICK_FLOP_CAP = 2e9  # dpt_bandit's width-32 shape runs; width 512 is listed
#: the issue's goal at the full presets' widths (>= 512): 40% of the peak
WIDE_TARGET = 0.4


def bf16_peak_flops(n: int, repeats: int = 10) -> float:
    """Achieved FLOP/s of an ``n``-cubed bfloat16 matmul (random data)."""
    import jax
    import jax.numpy as jnp

    ka, kb = jax.random.split(jax.random.key(0))
    a = jax.random.normal(ka, (n, n), jnp.bfloat16)
    b = jax.random.normal(kb, (n, n), jnp.bfloat16)
    f = jax.jit(lambda x, y: x @ y)
    jax.block_until_ready(f(a, b))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(f(a, b))
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def _sample(space: Any, key: Any, shape: tuple[int, ...]) -> Any:
    """``shape`` independent draws of ``space`` (leading axes ``shape``)."""
    import math

    import jax

    keys = jax.random.split(key, math.prod(shape))
    draws = jax.vmap(space.sample)(keys)
    return jax.tree.map(lambda x: x.reshape(*shape, *x.shape[1:]), draws)


def synthetic_batch(config: Any, env: Any, key: Any) -> dict:
    """A random batch of the algorithm's layout, from ``env``'s spaces.

    ``step``/``sar`` layouts (AD, AD-eps, DT, T2MIR-AD): windows ``[B, T]``;
    ``transition`` (DPT, T2MIR-DPT): a context set ``[B, N]``, a query and
    its label. ``task_id`` pairs rows (T2MIR's contrast needs pairs).
    """
    import jax
    import jax.numpy as jnp

    b = config.train.batch_size
    obs_space, act_space = env.observation_space(None), env.action_space(None)
    k = iter(jax.random.split(key, 8))
    task_id = jnp.repeat(jnp.arange(b // 2 + 1), 2)[:b].astype(jnp.int32)
    if config.model.token_layout == "transition":
        n = config.algo.context_steps(env) - 1
        return {
            "context_obs": _sample(obs_space, next(k), (b, n)),
            "context_action": _sample(act_space, next(k), (b, n)),
            "context_reward": jax.random.uniform(next(k), (b, n)),
            "context_next_obs": _sample(obs_space, next(k), (b, n)),
            "query_obs": _sample(obs_space, next(k), (b,)),
            "label": _sample(act_space, next(k), (b,)),
            "task_id": task_id,
        }
    t = config.algo.context_steps(env)
    return {
        "obs": _sample(obs_space, next(k), (b, t)),
        "action": _sample(act_space, next(k), (b, t)),
        "reward": (jax.random.uniform(next(k), (b, t)) < 0.1).astype(jnp.float32),
        "done": jnp.zeros((b, t), bool),
        "mask": jnp.ones((b, t), bool),
        "task_id": task_id,
    }


def preset_configs(quick: bool) -> list[tuple[str, Any]]:
    """``(experiment/preset, config in bfloat16)`` of every distilled preset."""
    from agentrl.train.experiments import known_experiments, load_module

    out = []
    names = QUICK_EXPERIMENTS if quick else known_experiments()
    for name in names:
        module = load_module(name)
        for preset in PRESETS:
            if preset not in module.PRESETS:
                continue
            config = module.PRESETS[preset]()
            if config.algo.by_training(from_data=False, online=True):
                break  # no supervised step to time
            model = dataclasses.replace(config.model, compute_dtype="bfloat16")
            train = config.train
            if quick:
                train = dataclasses.replace(train, batch_size=QUICK_BATCH)
            config = dataclasses.replace(config, model=model, train=train)
            out.append((f"{name}/{preset}", config))
    return out


def shape_key(config: Any) -> tuple:
    """What the step's cost depends on: the model, the batch, the env's spaces."""
    return (
        config.algo.label,
        config.model,
        config.train.batch_size,
        config.data.env,
        tuple(config.data.env_args),
        config.algo,
    )


def shape_digest(config: Any, diagnostic: str | None) -> str:
    """A short hash of :func:`shape_key` and the diagnostic: which step a
    row timed, across runs and code versions."""
    from agentrl import configtools

    label, model, batch, env, env_args, algo = shape_key(config)
    blob = [label, configtools.to_dict(model), batch, env, env_args]
    blob += [configtools.to_dict(algo), diagnostic]
    text = json.dumps(blob, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def analytic_flops(config: Any) -> float:
    """The step's :func:`train_throughput.train_flops`, from an abstract
    model (shapes only: no arrays, no compile)."""
    from flax import nnx
    from train_throughput import train_flops

    from agentrl.envs import make as make_env
    from agentrl.models.transformer import DecisionModel
    from agentrl.train.config import complete_config

    env = make_env(config.data.env, **dict(config.data.env_args))
    full = complete_config(config, env)
    model = nnx.eval_shape(lambda: DecisionModel(full.model, rngs=nnx.Rngs(0)))
    return train_flops(model, config.train.batch_size, config.algo.context_steps(env))


def earlier_rows(path: str | Path, device_kind: str) -> dict[str, dict]:
    """``{shape digest: row}``: the measured rows of the ``train_throughput_gpu``
    record at ``path`` (``measured``: its date), if it was taken on a
    ``device_kind`` device; empty if there is no such record (said)."""
    path = Path(path)
    if not path.is_file():
        print(f"--skip-done: no record at {path}; every shape is measured")
        return {}
    record = json.loads(path.read_text())
    kind = (record.get("machine") or {}).get("device_kind")
    if kind != device_kind:
        print(f"--skip-done: {path} is of a {kind}, this is a {device_kind}")
        return {}
    rows = record.get("results", {}).get("rows", [])
    done = [r for r in rows if r.get("status") == "ok" and r.get("shape")]
    # a row kept from a run before keeps that run's date
    return {r["shape"]: {"measured": record["date"], **r} for r in done}


def _kept(earlier: dict[str, dict], digest: str, config: Any) -> dict | None:
    """The earlier row of this shape if its FLOP count is today's."""
    row = earlier.get(digest)
    if row is None or row.get("analytic_flops_per_step") != analytic_flops(config):
        return None
    return row


def group_shapes(configs: list[tuple[str, Any]]) -> list[tuple[list[str], Any]]:
    """Configs of one shape merged (their names listed), widest model first."""
    groups: dict[tuple, tuple[list[str], Any]] = {}
    for name, config in configs:
        groups.setdefault(shape_key(config), ([], config))[0].append(name)
    return sorted(groups.values(), key=lambda g: -g[1].model.d_model)


def measure(config: Any, num_steps: int, peak: float, flop_cap: float | None):
    """One row: step time, tokens/s, FLOP/s and its fraction of ``peak``."""
    import jax
    from train_throughput import build_step, time_steps, train_flops

    step, state, hparams, model, env = build_step(config)
    b, t = config.train.batch_size, config.algo.context_steps(env)
    flops = train_flops(model, b, t)
    row = _shape_row(config, model.config, b, t, flops)
    if flop_cap is not None and flops > flop_cap:
        return {**row, "status": f"not run: {flops:.2e} FLOP/step > --quick cap"}
    keys = jax.random.split(jax.random.key(0), num_steps)
    batches = [synthetic_batch(config, env, k) for k in keys]
    start = time.perf_counter()
    compiled = step.lower(state, batches[0], hparams).compile()
    compile_s = time.perf_counter() - start
    xla = _xla_columns(compiled, jax.default_backend())
    _, sec = time_steps(compiled, state, batches, hparams, repeats=2)
    xla_flops = xla["xla_flops_per_step"]
    xla["xla_peak_fraction"] = xla_flops / sec / peak if xla_flops else None
    return {
        **row,
        "status": "ok",
        "step_s": sec,
        "tokens_per_s": b * t * model.config.tokens_per_step / sec,
        "flops_per_s": flops / sec,
        "peak_fraction": flops / sec / peak,
        **xla,
        "compile_s": compile_s,
        "timed_steps": num_steps,
    }


#: why a GPU row has no XLA FLOP count (module docstring)
XLA_GPU_NOTE = (
    "not recorded: XLA's cost_analysis leaves out cuBLAS custom calls (the "
    "matmuls) on a GPU, so it is not comparable with the analytic count"
)


def _xla_columns(compiled: Any, backend: str) -> dict:
    """XLA's FLOP count of ``compiled`` on the CPU; on another backend a note
    saying why there is none (:data:`XLA_GPU_NOTE`)."""
    if backend != "cpu":
        return {"xla_flops_per_step": None, "xla_flops_note": XLA_GPU_NOTE}
    return {"xla_flops_per_step": _xla_flops(compiled)}


def _shape_row(config, model_config, batch: int, window: int, flops: float) -> dict:
    c = model_config
    return {
        "algo": config.algo.label,
        "layers": c.num_layers,
        "d_model": c.d_model,
        "heads": c.num_heads,
        "batch": batch,
        "window_steps": window,
        "tokens_per_step": c.tokens_per_step,
        "compute_dtype": c.compute_dtype,
        "analytic_flops_per_step": flops,
    }


def _xla_flops(compiled: Any) -> float | None:
    try:
        cost = compiled.cost_analysis()
        cost = cost[0] if isinstance(cost, list | tuple) else cost
        return float(cost.get("flops", float("nan")))
    except Exception:  # cost analysis is best effort
        return None


#: the diagnostic rows' names (module docstring)
NO_DROPOUT, RBG = "dropout 0", "dropout masks from rbg keys"


def with_diagnostics(groups: list) -> list[tuple[list[str], Any, str | None]]:
    """``(names, config, diagnostic)``: ``groups`` with the two diagnostic
    rows after the widest shape that has dropout."""
    out = [(names, config, None) for names, config in groups]
    for i, (names, config, _) in enumerate(out):
        if config.model.dropout > 0:
            off = dataclasses.replace(
                config, model=dataclasses.replace(config.model, dropout=0.0)
            )
            out[i + 1 : i + 1] = [(names, off, NO_DROPOUT), (names, config, RBG)]
            break
    return out


@contextlib.contextmanager
def prng_impl(name: str | None):
    """JAX's default PRNG implementation set to ``name`` inside (None: as is)."""
    import jax

    old = jax.config.jax_default_prng_impl
    if name is not None:
        jax.config.update("jax_default_prng_impl", name)
    try:
        yield
    finally:
        jax.config.update("jax_default_prng_impl", old)


def measure_all(
    quick: bool,
    num_steps: int,
    budget: float | None,
    earlier: dict[str, dict] | None = None,
) -> tuple[float, list[dict]]:
    """``(bf16 peak FLOP/s, rows)``: every shape until ``budget`` seconds
    pass, but those ``earlier`` (:func:`earlier_rows`) measured."""
    import jax

    start = time.perf_counter()
    on_cpu = jax.devices()[0].platform == "cpu"
    peak = bf16_peak_flops(256 if on_cpu else 8192)
    print(f"bfloat16 matmul peak: {peak / 1e12:.2f} TFLOP/s", flush=True)
    rows = []
    for names, config, diagnostic in with_diagnostics(
        group_shapes(preset_configs(quick))
    ):
        head = {"presets": ", ".join(names)}
        if diagnostic:
            head = {
                "presets": f"{head['presets']} ({diagnostic})",
                "diagnostic": diagnostic,
            }
        head["shape"] = shape_digest(config, diagnostic)
        kept = _kept(earlier or {}, head["shape"], config)
        if kept is not None:
            rows.append({**kept, **head})
            print(f"{head['presets']}: measured {kept['measured']}, kept", flush=True)
            continue
        if budget is not None and time.perf_counter() - start > budget:
            rows.append(
                {
                    **head,
                    "algo": config.algo.label,
                    "d_model": config.model.d_model,
                    "status": "not run: budget",
                }
            )
            continue
        try:
            with prng_impl("rbg" if diagnostic == RBG else None):
                row = measure(
                    config, num_steps, peak, QUICK_FLOP_CAP if quick else None
                )
        except Exception as err:  # e.g. out of device memory: say so, go on
            row = {"algo": config.algo.label, "status": f"error: {err!r}"[:300]}
        rows.append({**head, **row})
        print(
            {
                k: rows[-1].get(k)
                for k in ("presets", "status", "step_s", "peak_fraction")
            },
            flush=True,
        )
    return peak, rows


def targets(rows: list[dict]) -> list[dict]:
    """The issue's goal at widths >= 512; the others reported (target 0)."""
    from common import target

    out = []
    for r in rows:
        if r.get("status") != "ok" or r.get("diagnostic"):
            continue
        wide = r["d_model"] >= 512
        out.append(
            target(
                f"{r['presets']}: bf16 FLOP/s fraction of the bf16 matmul peak"
                + ("" if wide else " (reported)"),
                r["peak_fraction"],
                WIDE_TARGET if wide else 0.0,
            )
        )
    return out
