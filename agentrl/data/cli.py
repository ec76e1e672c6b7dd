"""``agentrl data generate|info|verify``: make, inspect and check datasets.

    agentrl data generate --env darkroom --source q_learning --tasks 1000 \
        --episodes 200 --seed 0 --out DIR [--env-arg size=9] \
        [--source-arg learning_rate=0.5] [--split-fraction 0.8] [--chunk-size 1000]
    agentrl data info DIR
    agentrl data verify DIR

``verify`` checks everything a reader relies on: the metadata, every file's
size and SHA-256, and every record's arrays (decodable, finite); it prints
what it checked or exits with code 2 naming the file and what is wrong.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from typing import Any

from agentrl.cliargs import (
    check_output_path,
    nonnegative_int,
    positive_int,
    unit_fraction,
)


def _key_value(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw  # a bare string, e.g. start=corner
    return key.strip(), value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    gen = sub.add_parser("generate", help="run a source on many tasks, write a dataset")
    gen.add_argument("--env", required=True, help="registered environment name")
    gen.add_argument(
        "--env-arg",
        action="append",
        type=_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="environment constructor override (repeatable)",
    )
    gen.add_argument("--source", required=True, help="source algorithm")
    gen.add_argument(
        "--source-arg",
        action="append",
        type=_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="source setting (repeatable)",
    )
    gen.add_argument(
        "--tasks", type=positive_int, required=True, help="number of histories"
    )
    gen.add_argument(
        "--episodes", type=positive_int, required=True, help="episodes per history"
    )
    gen.add_argument("--seed", type=nonnegative_int, default=0)
    gen.add_argument("--out", required=True, help="dataset directory to create")
    gen.add_argument(
        "--split-fraction", type=unit_fraction, default=0.8, help="train share"
    )
    gen.add_argument(
        "--chunk-size", type=positive_int, default=1000, help="tasks per jit call"
    )
    gen.add_argument("--overwrite", action="store_true", help="replace --out")
    info = sub.add_parser("info", help="print a dataset's metadata and sizes")
    info.add_argument("path", help="dataset directory")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.add_argument(
        "--verify", default="size", choices=("full", "size", "none"), help="checks"
    )
    verify = sub.add_parser(
        "verify", help="check metadata, file checksums and every record's values"
    )
    verify.add_argument("path", help="dataset directory")


def _generate(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from agentrl import envs
    from agentrl.data.writer import write_dataset
    from agentrl.sources import source_histories

    out = check_output_path(args.out, "--out")
    if out.exists() and not args.overwrite:
        raise ValueError(f"--out {out} already exists; pass --overwrite to replace it")
    overrides = dict(args.env_arg)
    env = envs.make(args.env, **overrides)
    # checks the source and its settings: fails before the bar appears
    histories = source_histories(args.source, env, **dict(args.source_arg))
    with tqdm(
        total=args.tasks, unit="task", desc=f"{args.source} on {args.env}"
    ) as bar:
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
            progress=bar.update,
        )
    print(f"wrote {out}")
    return 0


def _info(args: argparse.Namespace) -> int:
    from agentrl.data.reader import open_dataset

    summary = open_dataset(args.path, verify=args.verify).summary()
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    for key, value in summary.items():
        if key == "files":
            print("files:")
            for name, size in value.items():
                print(f"  {name}  {size:,} bytes")
        elif isinstance(value, dict):
            print(f"{key}: {json.dumps(value)}")
        elif isinstance(value, int) and not isinstance(value, bool):
            print(f"{key}: {value:,}")
        else:
            print(f"{key}: {value}")
    return 0


def _verify(args: argparse.Namespace) -> int:
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


def run(args: argparse.Namespace) -> int:
    # ValueError (DatasetIntegrityError included) and FileNotFoundError are
    # reported by agentrl.cli as one line, exit code 2.
    commands = {"generate": _generate, "info": _info, "verify": _verify}
    if args.data_command in commands:
        return commands[args.data_command](args)
    print(
        "agentrl data: error: choose a subcommand: generate, info or verify "
        "(see agentrl data --help)",
        file=sys.stderr,
    )
    return 2
