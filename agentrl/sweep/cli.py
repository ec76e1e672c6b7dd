"""``agentrl sweep EXPERIMENT --seeds N --grid FIELD=V1,V2 [--field value ...]``.

>>> agentrl sweep ad_darkroom --seeds 8 --grid lr=1e-4,3e-4,1e-3
>>> agentrl sweep ad_darkroom --seeds 4 --grid lr=1e-3,3e-4 --grid num_layers=1,2

Traced fields (lr, weight_decay, balance_weight, contrastive_weight,
ema_tau) are trained in one program; any other field gives one program per
value (the static grid). Writes results.md, results.csv, results.json and
results.png into ``--out`` (default ``sweeps/<name>-<preset>``).
"""

from __future__ import annotations

import argparse

from agentrl.cliargs import check_output_path, positive_int

#: Unknown ``--field value`` pairs are config overrides (see configtools).
ACCEPTS_OVERRIDES = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from agentrl.train.cli import add_experiment_arguments

    add_experiment_arguments(parser)
    parser.add_argument(
        "--seeds",
        default="4",
        help="number of seeds N (seeds train.seed .. train.seed + N - 1) or a "
        "comma-separated list of seeds",
    )
    parser.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="FIELD=V1,V2",
        help="config field and its values; repeat for a product grid",
    )
    parser.add_argument("--out", default=None, help="default sweeps/<name>-<preset>")
    parser.add_argument("--no-eval", action="store_true", help="skip evaluation")
    parser.add_argument(
        "--steps-per-call", type=positive_int, default=10, help="steps per jitted chunk"
    )
    parser.add_argument("--no-progress", action="store_true")


def parse_seeds(text: str, base: int = 0) -> list[int]:
    """``"8"`` -> ``[base, ..., base + 7]``; ``"0,3,5"`` -> ``[0, 3, 5]``."""
    text = str(text).strip()
    try:
        if "," in text:
            seeds = [int(s) for s in text.split(",") if s.strip()]
        else:
            n = int(text)
            if n < 1:
                raise ValueError
            seeds = list(range(base, base + n))
    except ValueError:
        raise ValueError(
            f"--seeds must be a count >= 1 or a list like 0,1,2, got {text!r}"
        ) from None
    if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds must be distinct integers >= 0, got {text!r}")
    return seeds


def prepare(args: argparse.Namespace):
    """``(config, seeds, grid)`` from parsed arguments; all checks, no compile."""
    from agentrl import configtools
    from agentrl.sweep.grid import make_grid, parse_grid_args
    from agentrl.train.experiments import load_experiment

    overrides = configtools.parse_cli_overrides(list(args.overrides or []))
    config = load_experiment(args.experiment, args.preset, overrides)
    seeds = parse_seeds(args.seeds, config.train.seed)
    grid = make_grid(config, parse_grid_args(args.grid))
    if args.steps_per_call < 1:
        raise ValueError(f"--steps-per-call must be >= 1, got {args.steps_per_call}")
    check_output_path(args.out, "--out")
    return config, seeds, grid


def run(args: argparse.Namespace) -> int:
    from agentrl.sweep.run import run_sweep
    from agentrl.train import parallel

    parallel.initialize_distributed()
    # a ValueError is reported by agentrl.cli: one line, exit code 2
    config, seeds, grid = prepare(args)
    out = args.out or f"sweeps/{config.name}-{args.preset}"
    outcome = run_sweep(
        config,
        seeds,
        grid,
        out,
        evaluate=not args.no_eval,
        steps_per_call=args.steps_per_call,
        progress=not args.no_progress,
    )
    print(outcome.paths["md"].read_text())
    print("wrote: " + ", ".join(str(p) for p in outcome.paths.values()))
    return 0
