"""``agentrl sweep EXPERIMENT --seeds N --grid FIELD=V1,V2 [--field value ...]``.

>>> agentrl sweep ad_darkroom --seeds 8 --grid lr=1e-4,3e-4,1e-3
>>> agentrl sweep ad_darkroom --seeds 4 --grid lr=1e-3,3e-4 --grid num_layers=1,2
>>> agentrl sweep rl2_bandit --preset cpu --seeds 5 --grid ent_coef=0,0.01

Traced fields are trained in one program: lr and weight_decay; T2MIR's
balance_weight, contrastive_weight, ema_tau; Meta-DT's world_loss_weight,
state_loss_weight; RL²'s and transformer PPO's gamma, gae_lambda,
clip_eps, ent_coef, vf_coef, reward_scale; AMAGO's tau, online_coeff,
offline_coeff, critic_coeff, reward_scale, eps_start, eps_end (its gamma
and gammas are static). Any other field gives one program per value (the
static grid). An online learner (rl2, transformer_ppo, amago) needs no
dataset: its seeds x traced settings are one vmapped training program.
Every model is scored on the split's validation tasks, where settings are
chosen (``--split test``: its test tasks, for a reported number), as
``agentrl eval --split`` picks them. Writes results.md, results.csv,
results.json and results.png into ``--out`` (default
``sweeps/<name>-<preset>``). ``--eval-train-tasks`` also scores the models
on their training tasks (and, over a grid of data.num_train_tasks, plots
transition.png: memorisation against generalisation).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Literal

from agentrl.cliargs import PositiveInt, Repeatable, check_output_path, default_is
from agentrl.configtools import ConfigError
from agentrl.train.cli import ExperimentArgs


@dataclasses.dataclass
class Args(ExperimentArgs):
    """Train an experiment over seeds and a grid of settings, vectorized.

    Every other --FIELD VALUE sets a config field of the experiment
    (agentrl sweep EXPERIMENT --help lists them).
    """

    seeds: str = "4"
    """number of seeds N (seeds train.seed .. train.seed + N - 1) or a
    comma-separated list of seeds"""
    grid: Annotated[tuple[str, ...], Repeatable] = ()
    """FIELD=V1,V2: a config field and its values (repeat the flag for a
    product grid)"""
    out: Annotated[str | None, default_is("sweeps/<name>-<preset>")] = None
    """results directory"""
    eval: bool = True
    """evaluate every trained model in context"""
    split: Literal["validation", "test"] = "validation"
    """held-out tasks the models are scored on: validation (choose settings
    on these) or test (a reported number)"""
    steps_per_call: PositiveInt = 10
    """training steps per jitted chunk"""
    progress: bool = True
    """show a progress bar"""
    resume: bool = True
    """reuse the finished settings and member checkpoints already in --out
    (--no-resume trains and evaluates everything again)"""
    eval_train_tasks: bool = False
    """also score every model on the distinct tasks of its training
    histories (learners trained from a dataset); with a grid over
    data.num_train_tasks, transition.png plots both scores against it"""


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
        raise ConfigError(
            f"--seeds must be a count >= 1 or a list like 0,1,2, got {text!r}"
        ) from None
    bad = any(not 0 <= s < 2**32 for s in seeds)
    if not seeds or bad or len(set(seeds)) != len(seeds):
        raise ConfigError(
            f"--seeds must be distinct integers in [0, 2**32), got {text!r}"
        )
    return seeds


def parse(argv: list[str]) -> Args:
    """:class:`Args` with ``config`` (the experiment's, fields applied)."""
    from agentrl.train.cli import parse_experiment_args

    args, config = parse_experiment_args(Args, argv, "agentrl sweep")
    args.config = config
    return args


def prepare(args: Args):
    """``(config, seeds, grid)`` from parsed arguments; all checks, no compile."""
    from agentrl.sweep.grid import (
        check_data_plans,
        check_train_task_eval,
        make_grid,
        parse_grid_args,
    )

    config = args.config
    seeds = parse_seeds(args.seeds, config.train.seed)
    grid = make_grid(config, parse_grid_args(list(args.grid)))
    check_output_path(args.out, "--out")
    try:
        check_train_task_eval(config, args.eval, args.eval_train_tasks)
        check_data_plans(config, grid)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return config, seeds, grid


def run(args: Args) -> int:
    import agentrl.train.parallel as parallel
    from agentrl.sweep.run import run_sweep

    parallel.initialize_distributed()
    config, seeds, grid = prepare(args)
    out = args.out or f"sweeps/{config.name}-{args.preset}"
    outcome = run_sweep(
        config,
        seeds,
        grid,
        out,
        evaluate=args.eval,
        steps_per_call=args.steps_per_call,
        progress=args.progress,
        resume=args.resume,
        eval_train_tasks=args.eval_train_tasks,
        tasks=args.split,
    )
    print(outcome.paths["md"].read_text())
    print("wrote: " + ", ".join(str(p) for p in outcome.paths.values()))
    return 0
