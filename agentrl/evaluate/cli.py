"""``agentrl eval RUN_DIR``: evaluate a trained run in context on held-out tasks.

A thin layer over :func:`agentrl.evaluate.run.evaluate_run`, which reads the
run directory written by :func:`agentrl.train.fit` (config, task split,
latest checkpoint) and writes ``RUN_DIR/eval/results.{json,md,csv}``, plots
and TensorBoard scalars (``RUN_DIR/eval/tb``: ``tensorboard --logdir RUN_DIR``
shows them with the training curves of ``RUN_DIR/tb``), or all of these
into ``--out``. It
shows a progress bar (``--no-progress``: none), warns when the checkpoint is
not the run's last step (a run still training), and ends with a summary:
each method's first-episode and last-episodes return. ``--env-arg
KEY=VALUE`` (repeatable) evaluates under shift
(:mod:`agentrl.evaluate.shift`).

The options are the fields of :class:`Args` (an option is a field: its
annotation types it, the docstring under it is its ``--help``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import warnings
from pathlib import Path
from typing import Annotated, Literal

import tyro

from agentrl.cliargs import (
    KeyValue,
    NonNegativeInt,
    Positional,
    PositiveInt,
    Repeatable,
    check_output_path,
    default_is,
)


@dataclasses.dataclass
class Args:
    """Evaluate a training run in context on its held-out tasks."""

    run_dir: Annotated[Path, Positional, tyro.conf.arg(metavar="RUN_DIR")]
    """the training run directory"""
    episodes: Annotated[
        PositiveInt | None, default_is("the run's eval.num_episodes")
    ] = None
    """episodes per task"""
    tasks: Annotated[PositiveInt | None, default_is("the run's eval.num_tasks")] = None
    """held-out tasks"""
    seed: Annotated[NonNegativeInt | None, default_is("the run's eval.seed")] = None
    """evaluation seed"""
    # str, not Path: tyro reads "" as Path("."), the current directory
    out: Annotated[str | None, default_is("RUN_DIR/eval")] = None
    """results directory"""
    baselines: Annotated[
        str | None,
        default_is("random, oracle, UCB/Thompson on bandits, the data's source"),
    ] = None
    """comma-separated baselines"""
    greedy: bool = False
    """act by argmax instead of the run's eval.acting rule"""
    split: Literal["test", "validation", "train"] = "test"
    """split to evaluate on (choose settings on validation; train: the
    tasks the run's histories were made on, to see memorisation)"""
    control: Literal["zero_rewards", "shuffle_rewards", "empty_context"] | None = None
    """also evaluate the model under this in-context-learning control"""
    step: Annotated[NonNegativeInt | None, default_is("the latest")] = None
    """checkpoint step to evaluate"""
    env_arg: Annotated[tuple[KeyValue, ...], Repeatable] = ()
    """evaluate under shift: a task-family argument changed from training,
    KEY=VALUE (repeatable), e.g. horizon=1000 or means_beta=(0.5,0.5)"""
    progress: bool = True
    """show a progress bar"""
    source_cache: Annotated[str | None, default_is("none: rerun them")] = None
    """folder of the whole-run source baselines (SAC, PPO): a run made there
    with the same tasks, keys, settings, code and machine is read, not rerun"""


def run(args: Args) -> int:
    baselines = (
        None
        if args.baselines is None
        else [b.strip() for b in args.baselines.split(",") if b.strip()]
    )
    out = check_output_path(args.out, "--out")
    source_cache = check_output_path(args.source_cache, "--source-cache")
    from agentrl.evaluate.report import screen_summary
    from agentrl.evaluate.run import evaluate_run

    with warnings.catch_warnings():
        # said at once, before the evaluation's seconds, on one line
        warnings.simplefilter("once")
        warnings.showwarning = _show_warning
        paths = evaluate_run(
            args.run_dir,
            num_episodes=args.episodes,
            num_tasks=args.tasks,
            seed=args.seed,
            out_dir=out,
            baselines=baselines,
            greedy=args.greedy or None,
            tasks=args.split,
            control=args.control,
            step=args.step,
            env_args=dict(args.env_arg),
            progress=args.progress,
            source_cache=source_cache,
        )
    print(screen_summary(json.loads(paths["json"].read_text())))
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"agentrl eval: warning: {message}", file=sys.stderr, flush=True)
