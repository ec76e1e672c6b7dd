"""``agentrl train EXPERIMENT [--preset smoke|cpu|full] [--field value ...]``."""

from __future__ import annotations

import argparse

from agentrl.cliargs import check_output_path, positive_int

#: Unknown ``--field value`` pairs are config overrides (see configtools).
ACCEPTS_OVERRIDES = True


def add_experiment_arguments(parser: argparse.ArgumentParser) -> None:
    """``experiment`` and ``--preset`` (shared by ``train`` and ``sweep``)."""
    parser.add_argument("experiment", help="experiments/<name>.py or its name")
    parser.add_argument(
        "--preset",
        default="smoke",
        help="smoke, cpu, full, or another preset the experiment defines",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_experiment_arguments(parser)
    parser.add_argument("--run-dir", default=None, help="default runs/<name>-<preset>")
    parser.add_argument("--no-resume", action="store_true")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--stop-at-step",
        type=positive_int,
        default=None,
        help="stop (checkpointed, resumable) after this step",
    )


def run(args: argparse.Namespace) -> int:
    from agentrl import configtools
    from agentrl.train import parallel
    from agentrl.train.experiments import load_experiment
    from agentrl.train.loop import fit

    parallel.initialize_distributed()
    overrides = configtools.parse_cli_overrides(args.overrides)
    config = load_experiment(args.experiment, args.preset, overrides)
    run_dir = args.run_dir or f"runs/{config.name}-{args.preset}"
    check_output_path(run_dir, "--run-dir")
    out = fit(
        config,
        run_dir,
        resume=not args.no_resume,
        progress=not args.no_progress,
        stop_at_step=args.stop_at_step,
    )
    print(f"run directory: {out}")
    return 0
