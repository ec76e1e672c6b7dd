"""``agentrl train EXPERIMENT [--preset P] [options] [--FIELD VALUE ...]``.

The options are :class:`Args`; the ``--FIELD VALUE`` pairs set fields of
the experiment's config (``--train.lr 1e-3``, ``--algo dt``,
``--model.moe_layers 0 1``), typed and documented by the config dataclasses
(:mod:`agentrl.configcli`). ``agentrl train EXPERIMENT --help`` lists every
field with its type, the preset's value and its documentation.

It ends with the final loss and the run directory; a run that continues
from a checkpoint says ``resumed at step N`` first. Ctrl-C or SIGTERM stops
it at the next update boundary with a complete checkpoint (exit code 130 or
143) and prints the command that resumes it.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Annotated, Literal

import tyro

from agentrl.cliargs import Positional, PositiveInt, check_output_path, default_is
from agentrl.train.stop import Stopped


@dataclasses.dataclass
class ExperimentArgs:
    """The experiment and its preset (shared by ``train`` and ``sweep``)."""

    experiment: Annotated[
        str | None, Positional, tyro.conf.arg(metavar="EXPERIMENT")
    ] = None
    """an experiment's name (ad_darkroom ...) or the path of its .py file"""
    preset: str = "smoke"
    """smoke, cpu, full, or another preset the experiment defines"""


@dataclasses.dataclass
class Args(ExperimentArgs):
    """Train an in-context learner from an experiment's preset.

    Every other --FIELD VALUE sets a config field of the experiment
    (agentrl train EXPERIMENT --help lists them).
    """

    run_dir: Annotated[str | None, default_is("runs/<name>-<preset>")] = None
    """the run directory"""
    resume: bool = True
    """continue from the latest checkpoint in the run directory (--no-resume:
    train afresh, refused where the directory holds a run)"""
    progress: bool = True
    """show a progress bar"""
    stop_at_step: PositiveInt | None = None
    """stop (checkpointed, resumable) after this step"""
    tracker: Literal["none", "wandb"] = "none"
    """also send the run's metrics to an experiment tracker (wandb needs the
    tracking extra; WANDB_MODE=offline keeps it local; see agentrl.tracking)"""


def parse_experiment_args(cls, argv: list[str], prog: str):
    """``(args, config)``: ``cls``'s options, and the experiment's config with
    the remaining ``--FIELD VALUE`` tokens applied (``config`` is ``None``
    without an experiment). ``--help`` prints the options and, given an
    experiment, every config field; then exits."""
    import agentrl.cliargs as cliargs
    import agentrl.configcli as configcli
    from agentrl.configtools import ConfigError
    from agentrl.train.experiments import known_experiments, load_experiment

    wants_help = any(a in ("-h", "--help") for a in argv)
    rest_argv = [a for a in argv if a not in ("-h", "--help")]
    args, extra = cliargs.parse(cls, rest_argv, prog, unknown=True)
    if args.experiment is None:
        if wants_help:
            print(cliargs.help_text(cls, prog), end="")
            print(f"\nexperiments: {', '.join(known_experiments())}")
            raise SystemExit(0)
        known = known_experiments()
        raise ConfigError(
            "choose an experiment: "
            + (", ".join(known) if known else "none found in an experiments/ folder")
            + " (or the path of an experiment .py file)"
        )
    config = load_experiment(args.experiment, args.preset)
    if wants_help:
        config = configcli.parse(config, extra, prog=prog)  # help shows them too
        resolved, derived = resolved_for_help(config)
        print(cliargs.help_text(cls, prog), end="")
        print(
            configcli.help_text(
                resolved,
                f"{prog} {args.experiment} --preset {args.preset}",
                description=f"Config fields of {args.experiment} (defaults: "
                f"its {args.preset!r} preset, with the fields derived from its "
                "environment and algorithm as the run resolves them).",
                derived=derived,
            ),
            end="",
        )
        raise SystemExit(0)
    return args, configcli.parse(config, extra, prog=prog)


#: set from the environment's spaces whatever the config says
#: (:func:`agentrl.models.config.complete_model_config`)
FROM_THE_ENV = frozenset(
    {"model.obs_kind", "model.obs_size", "model.action_kind", "model.action_size"}
)


def resolved_for_help(config):
    """``(config with its derived fields filled, their dotted paths)``: what
    ``--help`` shows (the model's sizes from the environment, its window
    from the algorithm); ``config`` as it is if its environment cannot be
    built here (an optional extra not installed)."""
    from agentrl.configtools import field_paths
    from agentrl.envs.registry import make as make_env
    from agentrl.train.config import complete_config

    try:
        env = make_env(config.data.env, **dict(config.data.env_args))
        full = complete_config(config, env)
    except (ImportError, ValueError):
        return config, frozenset()
    before, after = field_paths(config), field_paths(full)
    changed = {p for p, v in after.items() if before.get(p) != v}
    return full, frozenset(changed | (FROM_THE_ENV & after.keys()))


def parse(argv: list[str]):
    """:class:`Args` with ``config`` attached (see :func:`parse_experiment_args`)."""
    args, config = parse_experiment_args(Args, argv, "agentrl train")
    args.config = config
    return args


def run(args: Args) -> int:
    import agentrl.train.parallel as parallel
    from agentrl.train.loop import fit

    parallel.initialize_distributed()
    config = args.config
    check_output_path(args.run_dir, "--run-dir")  # "" too, before the default
    run_dir = args.run_dir or f"runs/{config.name}-{args.preset}"
    check_output_path(run_dir, "--run-dir")
    if args.tracker != "none":
        import agentrl.tracking as tracking

        tracking.check_available(args.tracker)
        os.environ[tracking.TRACKER_ENV] = args.tracker
    try:
        out = fit(
            config,
            run_dir,
            resume=args.resume,
            progress=args.progress,
            stop_at_step=args.stop_at_step,
        )
    except Stopped as stop:  # agentrl.cli prints it with the command to resume
        stop.drop = ("--no-resume",)
        if args.run_dir is None:  # the default is relative: name it whole
            stop.add = ("--run-dir", str(Path(run_dir).resolve()))
        if stop.at_once:
            stop.detail = last_checkpoint(Path(run_dir) / "checkpoints")
        raise
    final = final_loss(out)
    if final:
        print(final)
    print(f"run directory: {out}")
    return 0


def final_loss(run_dir: Path) -> str | None:
    """``final loss L at step N`` from the run's last logged loss (``None``:
    none logged, e.g. on a process that does not write the logs)."""
    from agentrl.train.logger import read_metrics

    if not (run_dir / "metrics.jsonl").is_file():
        return None
    losses = [r for r in read_metrics(run_dir) if "loss" in r]
    if not losses:
        return None
    return f"final loss {losses[-1]['loss']:.4g} at step {losses[-1]['step']}"


def last_checkpoint(checkpoints: Path) -> str:
    """Which checkpoint a run stopped at once resumes from, in words."""
    from agentrl.train.checkpoint import complete_steps

    steps = complete_steps(checkpoints)
    if not steps:
        return "no checkpoint was written"
    return f"it resumes from the last complete checkpoint, step {steps[-1]}"
