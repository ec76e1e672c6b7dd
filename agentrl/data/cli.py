"""``agentrl data generate|info|verify``: make, inspect and check datasets.

    agentrl data generate --env darkroom --source q_learning --tasks 1000 \
        --episodes 200 --seed 0 --out DIR [--env-arg size=9] \
        [--source-arg learning_rate=0.5] [--split-fraction 0.8] [--chunk-size 1000]
    agentrl data info DIR
    agentrl data verify DIR

``verify`` checks everything a reader relies on: the metadata, every file's
size and SHA-256, and every record's arrays (decodable, finite); it prints
what it checked or exits with code 2 naming the file and what is wrong.

Ctrl-C or SIGTERM stops ``generate`` after the chunk being generated: its
temporary build is removed, ``--out`` is left as it was (a dataset is
written whole or not at all), and it exits with 130 or 143, printing the
command that starts it again.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path
from typing import Annotated, Literal

import tyro

import agentrl.train.learned  # noqa: F401 (registers the learned_learner source)
from agentrl.checks import is_int
from agentrl.cliargs import (
    KeyValue,
    NonNegativeInt,
    Positional,
    PositiveInt,
    Repeatable,
    UnitFraction,
    check_output_path,
)
from agentrl.configtools import ConfigError
from agentrl.train.stop import StopFlag, Stopped, signal_name, stop_signals


@dataclasses.dataclass
class Generate:
    """Run a source algorithm on many tasks and write a dataset."""

    env: str
    """registered environment name (agentrl envs lists them) or gymnax:<id>"""
    source: str
    """source algorithm (q_learning, ucb, ppo, ...)"""
    tasks: PositiveInt
    """number of histories (one task each)"""
    episodes: PositiveInt
    """episodes per history"""
    out: str
    """dataset directory to create"""
    env_arg: Annotated[tuple[KeyValue, ...], Repeatable] = ()
    """an environment constructor argument (repeat the flag for more)"""
    source_arg: Annotated[tuple[KeyValue, ...], Repeatable] = ()
    """a source setting (repeat the flag for more)"""
    seed: NonNegativeInt = 0
    """random seed of the tasks and the source"""
    split_fraction: UnitFraction = 0.8
    """share of the tasks in the train split"""
    chunk_size: PositiveInt = 1000
    """tasks per jit call (bounds memory)"""
    num_train_tasks: PositiveInt | None = None
    """the training histories cycle over this many distinct tasks (default:
    all of the split's; a continuous family: each history its own task)"""
    overwrite: bool = False
    """replace --out if it exists"""


@dataclasses.dataclass
class Info:
    """Print a dataset's metadata and sizes."""

    path: Annotated[str, Positional]
    """dataset directory"""
    json: bool = False
    """print JSON"""
    verify: Literal["full", "size", "none"] = "size"
    """checks on open: file sizes, full checksums, or none"""
    learning: bool = False
    """also read every training record and print how the episode returns
    move along the histories (mean per tenth, rise, rank correlation)"""


@dataclasses.dataclass
class Verify:
    """Check metadata, file checksums and every record's values."""

    path: Annotated[str, Positional]
    """dataset directory"""


#: the subcommands: ``agentrl data generate|info|verify``
Args = (
    Annotated[Generate, tyro.conf.subcommand("generate")]
    | Annotated[Info, tyro.conf.subcommand("info")]
    | Annotated[Verify, tyro.conf.subcommand("verify")]
)
SUBCOMMANDS = ("generate", "info", "verify")


def parse(argv: list[str]) -> Generate | Info | Verify:
    """The subcommand's arguments (an unknown subcommand is named as such)."""
    import agentrl.cliargs as cliargs

    if argv and not argv[0].startswith("-") and argv[0] not in SUBCOMMANDS:
        raise ConfigError(
            f"invalid choice: {argv[0]!r} (choose a subcommand: "
            f"{', '.join(SUBCOMMANDS)})"
        )
    return cliargs.parse(Args, argv, "agentrl data")


def _generate(args) -> int:
    from tqdm import tqdm

    import agentrl.envs as envs
    from agentrl.data.writer import write_dataset
    from agentrl.sources.registry import source_histories

    out = check_output_path(args.out, "--out")
    if out.exists() and not args.overwrite:
        raise ConfigError(f"--out {out} already exists; pass --overwrite to replace it")
    overrides = dict(args.env_arg)
    env = envs.make(args.env, **overrides)
    # checks the source and its settings: fails before the bar appears
    histories = source_histories(args.source, env, **dict(args.source_arg))
    bar = tqdm(total=args.tasks, unit="task", desc=f"{args.source} on {args.env}")
    with stop_signals() as stop, bar:
        out = write_dataset(
            args.out,
            env,
            histories,
            args.tasks,
            args.episodes,
            args.seed,
            env_name=args.env,
            env_overrides=overrides,
            split_fraction=args.split_fraction,
            chunk_size=args.chunk_size,
            overwrite=args.overwrite,
            num_train_tasks=args.num_train_tasks,
            progress=_progress(bar, stop, out),
        )
    print(f"wrote {out}")
    # a run generates its own data unless it is given this one
    env_args = " ".join(shlex.quote(f"{k}={v}") for k, v in overrides.items())
    same_env = f" --data.env_args {env_args}" if env_args else ""
    print(
        f"train on it: agentrl train EXPERIMENT --data.path {out}{same_env} (an "
        f"experiment on {args.env}; its config.json then records these histories)"
    )
    return 0


def _progress(bar, stop: StopFlag, out: Path):
    """The writer's ``progress(n)`` after each chunk: advance ``bar``, and
    raise :class:`Stopped` once a stop signal came (the writer then removes
    its temporary build; ``out`` is left as it was)."""
    kept = (
        f"the existing dataset {out} is unchanged"
        if out.exists()
        else f"nothing was written to {out}"
    )

    def progress(n: int) -> None:
        bar.update(n)
        if stop.signum is not None:
            name = signal_name(stop.signum)
            raise Stopped(
                stop.signum,
                f"stopped by {name} after {bar.n} of {bar.total} tasks; {kept}",
                rerun="start again with",
            )

    return progress


def _info(args) -> int:
    from agentrl.data.reader import open_dataset

    dataset = open_dataset(args.path, verify=args.verify)
    summary = dataset.summary()
    if args.learning:
        from agentrl.data.learning import learning_summary

        try:
            summary["learning"] = learning_summary(dataset)
        except ValueError as err:
            raise ConfigError(f"--learning: {err}") from None
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    for key, value in summary.items():
        if key == "files":
            print("files:")
            for name, size in value.items():
                print(f"  {name}  {size:,} bytes")
        elif key == "learning":
            print(_learning_lines(value))
        elif isinstance(value, dict):
            print(f"{key}: {json.dumps(value)}")
        elif is_int(value):
            print(f"{key}: {value:,}")
        else:
            print(f"{key}: {value}")
    return 0


def _learning_lines(learning: dict) -> str:
    """``--learning``'s summary (:func:`agentrl.data.learning.learning_summary`)
    as lines."""
    curve = ", ".join(f"{v:.4g}" for v in learning["curve"])
    return (
        f"learning ({learning['histories']:,} {learning['split']} histories, "
        f"{learning['episodes']:,}+ whole episodes each):\n"
        f"  mean return in {learning['bins']} parts of the history, in order: {curve}\n"
        f"  rise (last part - first): {learning['rise']:.4g}; histories rising: "
        f"{learning['rising']:.0%}; rank correlation of return with episode: "
        f"{learning['rank_correlation']:.2f}"
    )


def _verify(args) -> int:
    from agentrl.data.reader import open_dataset

    dataset = open_dataset(args.path, verify="full")
    dataset.env  # noqa: B018  (the recorded environment can be rebuilt)
    counts = dataset.check_values()
    files = len(dataset.metadata["files"])
    records = ", ".join(f"{n:,} {split}" for split, n in counts.items())
    print(
        f"{dataset.path}: ok (metadata, {files} files' sizes and SHA-256, "
        f"{records} records decoded with finite values)"
    )
    return 0


def run(args: Generate | Info | Verify) -> int:
    # DatasetIntegrityError and FileNotFoundError are reported by agentrl.cli
    # as one line, exit code 2.
    commands = {Generate: _generate, Info: _info, Verify: _verify}
    return commands[type(args)](args)
