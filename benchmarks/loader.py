"""Loader throughput: AD and DPT training batches per second from disk.

    agentrl bench loader [--quick] [--rounds 5] [--seconds 2]

Writes a Dark Room Q-learning dataset (1,000 tasks x 100 episodes) and a DPT
bandit dataset (1,000 tasks, H = 500) to a temporary directory, then times
``ADSampler`` (4-episode windows, batch 64, as AD-ε on Dark Room) and
``DPTSampler`` (context 500, batch 64) with records cached in memory, read
through ``tfds.data_source`` per batch (no cache), and through the prefetching
``grain`` iterator. The reference in the same process is the consumption
rate: a jitted training step (forward, backward, Adam) of a small AD model
(``agentrl.models.DecisionModel``: 4 layers, d_model 64, 4 heads) on the same
batch shape. Target (issue 3): the loader at least 5x faster than that step.

The loaders and the train step are timed in alternating rounds
(:func:`paired_rates`): each round times every one of them for about
``--seconds`` (the train step at least 3 steps), in an order that reverses
from round to round, so a loader and the step it is compared with run under
the same load. Each loader's ratio to the step is the median of its
per-round ratios, with a bootstrap 95% CI (``median_ci``); a target is met
only when its whole CI clears 5x (``with_ci``). If the train step cannot be
built or run, the error propagates: no rate is assumed in its place.

Writes ``benchmarks/results/loader.{json,md}`` (``--quick``: a temporary
directory, unless ``agentrl bench --out DIR`` names one).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import common as bench

from agentrl import envs
from agentrl.cliargs import positive_int
from agentrl.data import ADSampler, DPTSampler, open_dataset, write_dataset
from agentrl.evaluate.targets import with_ci
from agentrl.project import RESULTS_ENV

BATCH = 64
CONTEXT_EPISODES = 4
TRAIN = "small AD model train step (consumer)"
GRAIN = "ad from disk, grain iterator (2 threads)"
GOAL = 5.0


def paired_rates(
    fns: dict, rounds: int, seconds: float, min_calls: int = 3
) -> dict[str, list[float]]:
    """Calls per second of each ``name: fn(step)`` per round, timed in turn.

    Every ``fn`` is called once untimed (the warm-up: compiles, fills
    buffers); then each round calls every ``fn`` for about ``seconds`` (and
    at least ``min_calls`` times), in an order that reverses from round to
    round, as :func:`common.paired_rounds` does for compiled functions. Each
    ``fn`` gets the step indices ``0, 1, 2, ...`` over the warm-up and all
    rounds (a loader a new batch each call). Returns ``{name: [calls per
    second, one per round]}``.
    """
    names = list(fns)
    steps = dict.fromkeys(names, 0)
    for name in names:
        fns[name](steps[name])
        steps[name] += 1
    rates: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in bench.round_order(names, r):
            fn, n = fns[name], 0
            start = time.perf_counter()
            while n < min_calls or time.perf_counter() - start < seconds:
                fn(steps[name])
                steps[name] += 1
                n += 1
            rates[name].append(n / (time.perf_counter() - start))
    return rates


def train_step(batch: dict):
    """``fn(step)``: one jitted, blocking train step (forward, backward, Adam)
    of a small AD model on ``batch`` (the same batch every call)."""
    import jax
    import optax
    from flax import nnx

    from agentrl.models import DecisionModel, ModelConfig

    t = batch["obs"].shape[1]
    cfg = ModelConfig(
        obs_size=81,
        action_size=5,
        num_layers=4,
        num_heads=4,
        d_model=64,
        d_ff=256,
        max_steps=t,
    )
    model = DecisionModel(cfg, rngs=nnx.Rngs(0))
    opt = nnx.Optimizer(model, optax.adam(3e-4), wrt=nnx.Param)

    @nnx.jit
    def step(model, opt, obs, action, reward):
        def loss_fn(model):
            logits = model(obs, action, reward).action
            return optax.softmax_cross_entropy_with_integer_labels(
                logits, action
            ).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        opt.update(model, grads)
        return loss

    args = [jax.numpy.asarray(batch[k]) for k in ("obs", "action", "reward")]
    return lambda _: jax.block_until_ready(step(model, opt, *args))


def _datasets(tmp: Path, tasks: int, episodes: int):
    """Dark Room (Q-learning) and bandit (DPT roll-in) datasets written to ``tmp``."""
    room = envs.make("darkroom")
    bandit = envs.make("gaussian_bandit")
    from agentrl.sources import source_histories

    q, dpt = (
        source_histories("q_learning", room),
        source_histories("dpt_rollin", bandit),
    )
    write_dataset(tmp / "room", room, q, tasks, episodes, 0)
    write_dataset(tmp / "bandit", bandit, dpt, tasks, 1, 0)
    return open_dataset(tmp / "room"), open_dataset(tmp / "bandit")


def candidates(room_ds, bandit_ds) -> dict:
    """``{name: fn(step)}``: the train step (built first: an error there
    stops the run before any loader is timed) and the five loaders."""
    ad = ADSampler(room_ds, BATCH, num_episodes=CONTEXT_EPISODES)
    fns = {TRAIN: train_step(ad.batch(0))}
    ad_disk = ADSampler(room_ds, BATCH, num_episodes=CONTEXT_EPISODES, cache_bytes=0)
    dpt = DPTSampler(bandit_ds, BATCH, context_size=500)
    dpt_disk = DPTSampler(bandit_ds, BATCH, context_size=500, cache_bytes=0)
    grain = ad_disk.iterator(num_threads=2)
    fns["ad cached"] = ad.batch
    fns["ad from disk (tfds.data_source)"] = ad_disk.batch
    fns[GRAIN] = lambda _: next(grain)
    fns["dpt cached"] = dpt.batch
    fns["dpt from disk (tfds.data_source)"] = dpt_disk.batch
    return fns


def summarise(rates: dict[str, list[float]]) -> dict:
    """Per loader: its median batches/s and its ratio to the train step,
    the median of the per-round ratios with a bootstrap 95% CI."""
    train = rates[TRAIN]
    out = {}
    for name, per_round in rates.items():
        ratios = [r / t for r, t in zip(per_round, train, strict=True)]
        median, low, high = bench.median_ci(ratios)
        out[name] = {
            "batches_per_s_per_round": per_round,
            "batches_per_s_median": statistics.median(per_round),
            "x_train_step_per_round": ratios,
            "x_train_step_median": median,
            "x_train_step_ci95": [low, high],
        }
    return out


def _rows(summary: dict) -> list[dict]:
    return [
        {
            "loader": name,
            "batches/s (median)": s["batches_per_s_median"],
            "windows/s (median)": s["batches_per_s_median"] * BATCH,
            "x train step (median)": s["x_train_step_median"],
            "95% CI": "[{:.3g}, {:.3g}]".format(*s["x_train_step_ci95"]),
        }
        for name, s in summary.items()
    ]


def targets_of(summary: dict) -> list[dict]:
    """The two targets, each judged on its whole CI (``with_ci``)."""
    return [
        with_ci(
            "AD loader, default (cached) / train step (x)",
            summary["ad cached"]["x_train_step_median"],
            *summary["ad cached"]["x_train_step_ci95"],
            GOAL,
        ),
        with_ci(
            "AD loader from disk, grain / train step (x)",
            summary[GRAIN]["x_train_step_median"],
            *summary[GRAIN]["x_train_step_ci95"],
            GOAL,
        ),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="agentrl bench loader", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke)")
    parser.add_argument(
        "--rounds", type=positive_int, default=None, help="default 5 (quick: 3)"
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="per candidate and round (default 2; quick: 0.5)",
    )
    args = parser.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 5)
    seconds = args.seconds if args.seconds is not None else (0.5 if args.quick else 2.0)
    tasks = 100 if args.quick else 1_000
    episodes = 20 if args.quick else 100
    load = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp())
    room_ds, bandit_ds = _datasets(tmp, tasks, episodes)
    rates = paired_rates(candidates(room_ds, bandit_ds), rounds, seconds)
    summary = summarise(rates)
    rows = _rows(summary)
    for row in rows:
        print(row, flush=True)
    train_note = "measured: agentrl.models.DecisionModel train step"
    results = {
        "batch_size": BATCH,
        "ad_window_steps": CONTEXT_EPISODES * 20,
        "dpt_context": 500,
        "dataset": {"tasks": tasks, "episodes": episodes},
        "rounds": rounds,
        "seconds_per_candidate_per_round": seconds,
        "loaders": summary,
        "train_steps_per_s_per_round": rates[TRAIN],
        "train_note": train_note,
    }
    notes = (
        f"{train_note}. The train step and the five loaders timed in {rounds} "
        f"alternating rounds (order reversed each round), about {seconds:g} s "
        "each per round (the train step at least 3 steps); x train step = "
        "the loader's batches/s over the train step's in the same round, "
        "median over rounds [bootstrap 95% CI]; a target is met only when its "
        f"whole CI is above {GOAL:g}x. {bench.load_note(load)}."
    )
    quick_dir = args.quick and not os.environ.get(RESULTS_ENV)
    out_dir = tmp / "results" if quick_dir else None
    targets = targets_of(summary)
    print(bench.write_record("loader", results, targets, rows, notes, out_dir))


if __name__ == "__main__":
    main()
