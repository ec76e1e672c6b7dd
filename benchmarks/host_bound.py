"""The host bound on this CPU: per-update host path against the device path.

Run: ``agentrl bench host_bound [--quick]``

A proxy of the accelerator's host bound that needs no accelerator (issue
34): a tiny learner (1 layer, width 8, one head, d_ff 16), whose update is
nearly free, so its rate is set by what the host does per update.

Part 1 (updates/s). On the smoke data of ``ad_darkroom`` (batch 64 and
batch 1) and ``dpt_darkroom`` (batch 1), the same run times, in paired
rounds (:func:`common.paired_rounds`, order alternating):

- ``host``: the old path, one update per dispatch: the host sampler draws the
  batch in numpy (``ADSampler``/``DPTSampler.host_batch``), it is placed on
  the mesh (``parallel.shard_batch``) and one jitted step
  (``make_train_step``) consumes it;
- ``device K``: the training path now, ``K`` updates per jitted call
  (``make_train_call``), each drawing its batch on the device
  (:mod:`agentrl.train.batches`), at ``K = 10`` (the CPU default until
  2026-11-30) and 100 (the default now).

Reported: updates per second of each and the per-round ratio device/host
(median and 95% bootstrap CI). Target: >= 10x.

Part 2 (host share). At the MODEL and BATCH shapes of the ``smoke`` and
``cpu`` presets of ``ad_darkroom`` and ``dpt_darkroom``: the host time per
update, ``h = t_path - u``, as a share of the update ``u``. ``u`` is the
time per update of one long call (``LONG`` updates: the host's per-call
cost spread over them, i.e. the device's own time), ``t_path`` the time per
update, timed in the same rounds, of: the device path at 10 per call and
at the platform's default (:func:`agentrl.train.config.steps_per_call`);
the calls a run of the preset makes (also cut at its log and checkpoint
steps, log values fetched; checkpoint writes left out); the old host path.
Target: <= 5% for the device path at the default. The page faults per
update of each path are counted too (a CPU call faults in its temporary
buffers afresh: the per-call cost that grows with the model).
The cpu presets' datasets are generated with ``SHARE_TASKS`` histories
(their model, batch and window shapes are the preset's).

Part 3 (time to first update, item 5). ``fit`` of the tiny learner on each
smoke dataset (already written), then a resumed fit: the start-up phases the
runner records in ``run.json`` (``"startup"``: dataset open, decode, device
data, model init, compile, checkpoint restore, first call).

The machine is shared (2 cores, other jobs running): the load average is
recorded; ratios come from the same rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
import types
from pathlib import Path

import jax
import numpy as np

TINY = {
    "model.num_layers": 1,
    "model.d_model": 8,
    "model.num_heads": 1,
    "model.d_ff": 16,
    "model.dropout": 0.0,
}
CASES = (("ad_darkroom", 64), ("ad_darkroom", 1), ("dpt_darkroom", 1))
CALL_SIZES = (10, 100)
LONG = 200
TARGET_RATIO = 10.0
TARGET_SHARE = 0.05
SHARE_TASKS = 64  # histories generated for a non-smoke preset: shapes only
SHARE_PATHS = ("device 10", "device default", "preset cadence", "host")


def setup(experiment: str, preset: str, overrides: dict, data_root: Path):
    """Everything both paths need, on the smoke data of ``experiment``."""
    from agentrl.configtools import default_hparams, override
    from agentrl.envs.registry import make as make_env
    from agentrl.train import parallel
    from agentrl.train.config import complete_config
    from agentrl.train.data import make_sampler, prepare_dataset
    from agentrl.train.experiments import load_experiment
    from agentrl.train.loop import build_model
    from agentrl.train.step import init_train_state, make_train_step

    config = override(load_experiment(experiment, preset), overrides)
    env = make_env(config.data.env, **dict(config.data.env_args))
    dataset = prepare_dataset(config, env, data_root / experiment, progress=False)
    full = complete_config(config, env, dataset)
    mesh = parallel.make_mesh()
    graphdef, state = init_train_state(build_model(full, env), full)
    return {
        "config": full,
        "mesh": mesh,
        "sampler": make_sampler(full, dataset, env),
        "state": parallel.replicate(state, mesh),
        "step": make_train_step(graphdef, full, env),
        "hparams": parallel.replicate(default_hparams(full), mesh),
    }


def host_path(s: dict):
    """``run(state, start, n)``: n updates, one dispatch each (the old loop)."""
    from agentrl.train import parallel

    step = jax.jit(s["step"], donate_argnums=0)
    sampler, mesh, hp = s["sampler"], s["mesh"], s["hparams"]

    def run(state, start, n):
        for i in range(start, start + n):
            batch = parallel.shard_batch(sampler.host_batch(i), mesh)
            state, metrics = step(state, batch, hp)
        return state, metrics

    return run


NO_CUTS = types.SimpleNamespace(log_every=2**62, checkpoint_every=2**62)


def device_path(s: dict, per_call: int, cadence: bool = False):
    """``run(state, start, n)``: n updates in calls of ``per_call``.

    ``cadence``: the calls the training loop makes at the preset's
    settings (also cut at its log and checkpoint steps,
    :func:`~agentrl.train.runner.call_ends`), the logged metrics fetched at
    each log step as the loop does (checkpoint writes left out)."""
    from agentrl.train import parallel
    from agentrl.train.batches import make_batches
    from agentrl.train.runner import call_ends
    from agentrl.train.step import make_train_call

    batches = make_batches(s["sampler"], s["mesh"])
    call = make_train_call(s["step"], batches.draw, parallel.data_sharding(s["mesh"]))
    call = jax.jit(call, donate_argnums=0)
    hp, train = s["hparams"], s["config"].train

    def run(state, start, n):
        lo = start
        for hi in call_ends(start, start + n, per_call, train if cadence else NO_CUTS):
            data = batches.call_data(lo, hi - lo)
            state, metrics = call(state, hp, data, np.int32(lo), np.int32(hi - lo))
            if cadence and hi % train.log_every == 0:
                float(jax.device_get(metrics["loss"]))
            lo = hi
        return state, metrics

    return run


def _rounds(runs: dict, state, n: int, rounds: int):
    """Seconds and page faults per update of each ``name: run`` per round
    (order alternating): ``({name: [s, ...]}, {name: [faults, ...]})``."""
    from common import round_order

    states = {name: jax.tree.map(lambda x: x.copy(), state) for name in runs}
    for name, run in runs.items():  # compile and warm up
        states[name] = jax.block_until_ready(run(states[name], 0, n))[0]
    out: dict[str, list[float]] = {name: [] for name in runs}
    faults: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for r in range(rounds):
        for name in round_order(names, r):
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            begin = time.perf_counter()
            result = runs[name](states[name], (r + 1) * n, n)
            states[name] = jax.block_until_ready(result)[0]
            out[name].append((time.perf_counter() - begin) / n)
            after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            faults[name].append((after - before) / n)
    return out, faults


def measure_rates(data_root: Path, n: int, rounds: int) -> list[dict]:
    """Part 1: updates/s of the host path and the device path, same rounds."""
    from common import median_ci

    rows = []
    for experiment, batch in CASES:
        s = setup(experiment, "smoke", {**TINY, "train.batch_size": batch}, data_root)
        runs = {"host": host_path(s)}
        runs.update({f"device {k}": device_path(s, k) for k in CALL_SIZES})
        seconds = _rounds(runs, s["state"], n, rounds)[0]
        row = {"experiment": experiment, "batch": batch, "updates_per_round": n}
        for name, values in seconds.items():
            row[f"{name} updates/s"] = 1.0 / float(np.median(values))
        for k in CALL_SIZES:
            ratios = np.array(seconds["host"]) / np.array(seconds[f"device {k}"])
            row[f"ratio device {k}"] = median_ci(ratios)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def measure_shares(data_root: Path, n: int, rounds: int, presets) -> list[dict]:
    """Part 2: host time per update as a share of the update."""
    from common import median_ci

    from agentrl.train.config import TrainConfig, steps_per_call

    default = steps_per_call(TrainConfig(), jax.default_backend())
    rows = []
    for experiment in ("ad_darkroom", "dpt_darkroom"):
        for preset in presets:
            fewer = {"data.num_tasks": SHARE_TASKS} if preset != "smoke" else {}
            overrides = {"model.dropout": 0.0, **fewer}
            root = data_root if preset == "smoke" else data_root / preset
            s = setup(experiment, preset, overrides, root)
            runs = {
                "long": device_path(s, LONG),
                "device 10": device_path(s, 10),
                "device default": device_path(s, default),
                "preset cadence": device_path(s, default, cadence=True),
                "host": host_path(s),
            }
            seconds, faults = _rounds(runs, s["state"], n, rounds)
            long = np.array(seconds["long"])
            train = s["config"].train
            row = {
                "experiment": experiment,
                "preset": preset,
                "batch": train.batch_size,
                "update_ms": 1e3 * float(np.median(long)),
                "default_per_call": default,
                "log_every": train.log_every,
                "checkpoint_every": train.checkpoint_every,
            }
            for name in SHARE_PATHS:
                share = (np.array(seconds[name]) - long) / long
                row[f"host share {name}"] = median_ci(share)
            for name in ("long", *SHARE_PATHS):
                row[f"faults per update {name}"] = float(np.median(faults[name]))
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def measure_startup(data_root: Path) -> list[dict]:
    """Part 3: the start-up phases of a fresh and a resumed fit (run.json)."""
    from agentrl.configtools import override
    from agentrl.train.experiments import load_experiment
    from agentrl.train.loop import fit

    rows = []
    for experiment in ("ad_darkroom", "dpt_darkroom"):
        config = load_experiment(experiment, "smoke")
        path = str(data_root / experiment / "dataset")  # written by part 1
        tiny = {**TINY, "data.path": path, "train.checkpoint_every": 2}
        run_dir = data_root / f"run_{experiment}"
        for kind, steps in (("fresh", 2), ("resumed", 4)):
            fit(
                override(config, {**tiny, "train.steps": steps}),
                run_dir,
                progress=False,
            )
            startup = json.loads((run_dir / "run.json").read_text())["startup"]
            rows.append({"experiment": experiment, "start": kind, **startup})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def _targets(rates: list[dict], shares: list[dict]) -> list[dict]:
    from common import target

    out = []
    for r in rates:
        for k in CALL_SIZES:
            name = f"{r['experiment']} batch {r['batch']}: device ({k}/call) / host"
            out.append(target(name, r[f"ratio device {k}"][0], TARGET_RATIO))
    for r in shares:
        name = (
            f"{r['experiment']} {r['preset']}: host share of an update "
            f"(device, default {r['default_per_call']} per call)"
        )
        share = r["host share device default"][0]
        out.append(target(name, share, TARGET_SHARE, False))
    return out


def _table(rates, shares, startup) -> list[dict]:
    fmt = lambda ci: f"{ci[0]:.3g} [{ci[1]:.3g}, {ci[2]:.3g}]"  # noqa: E731
    table = [
        {
            "measure": f"{r['experiment']} b{r['batch']} updates/s",
            "host": f"{r['host updates/s']:.0f}",
            **{f"device {k}": f"{r[f'device {k} updates/s']:.0f}" for k in CALL_SIZES},
            "ratio (device 10)": fmt(r["ratio device 10"]),
            "ratio (device 100)": fmt(r["ratio device 100"]),
        }
        for r in rates
    ]
    table += [
        {
            "measure": f"{r['experiment']} {r['preset']} host share "
            f"(update {r['update_ms']:.2f} ms; log/ckpt every "
            f"{r['log_every']}/{r['checkpoint_every']})",
            **{name: fmt(r[f"host share {name}"]) for name in SHARE_PATHS},
        }
        for r in shares
    ]
    table += [
        {
            "measure": f"{r['experiment']} {r['preset']} page faults per update",
            **{name: f"{r[f'faults per update {name}']:.3g}" for name in SHARE_PATHS},
            "long": f"{r['faults per update long']:.3g}",
        }
        for r in shares
    ]
    table += [
        {
            "measure": f"{r['experiment']} {r['start']} start-up (s)",
            "host": json.dumps({k: v for k, v in r.items() if k.endswith("_s")}),
        }
        for r in startup
    ]
    columns = dict.fromkeys(k for row in table for k in row)  # union, in order
    return [{c: row.get(c, "") for c in columns} for row in table]


def _write(rates, shares, startup, load: float, rounds: int, n: int) -> Path:
    """Write the record of what is measured so far (after every part)."""
    from common import load_note, write_record

    notes = (
        f"{load_note(load)}; a shared machine (other jobs running). Paired "
        f"rounds: {rounds}, {n} updates per round and path in part 1; ratios "
        "and shares are medians of per-round values with 95% bootstrap CIs. "
        "Device path: updates drawn inside the jitted call; host path: "
        "numpy sampling, device_put and one dispatch per update. Part 2: "
        "'device default' is the training loop's calls at the platform's "
        "default length; 'preset cadence' also cut at the preset's log and "
        "checkpoint steps (log values fetched), as a run of it makes them; "
        "'long' (the update's own time) is one call of LONG updates."
    )
    results = {"rates": rates, "shares": shares, "startup": startup, "notes": notes}
    table = _table(rates, shares, startup)
    return write_record("host_bound", results, _targets(rates, shares), table, notes)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args(argv)
    from common import markdown_table

    load = os.getloadavg()[0]
    rounds, n = (3, 100) if args.quick else (5, 200)
    presets = ("smoke",) if args.quick else ("smoke", "cpu")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rates = measure_rates(root, n, rounds)
        _write(rates, [], [], load, rounds, n)
        startup = measure_startup(root)
        _write(rates, [], startup, load, rounds, n)
        # LONG updates a round: the long reference must be one call of LONG
        # (with 20 it was one call of 20, half the per-call cost hidden)
        shares = measure_shares(root, LONG, rounds, presets)
        path = _write(rates, shares, startup, load, rounds, n)
    print(markdown_table(_table(rates, shares, startup)))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
