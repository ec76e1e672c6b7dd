"""Find and load experiments: one base config and presets that change a few fields.

An experiment module defines ``PRESETS: dict[str, Callable[[],
ExperimentConfig]]`` with at least ``smoke``, ``cpu`` and ``full``. The
idiom (as big_vision and flax configs do) is a ``BASE`` config and
:func:`make_presets`, each preset a handful of dotted field changes::

    BASE = ExperimentConfig(name="my_exp", algo=AD(), ...)
    PRESETS = make_presets(BASE, smoke={"train.steps": 60}, cpu={}, full={...})

Fields derived from others (the warm-up from ``train.steps``, the model's
window from the algorithm's context) are left unset in presets and derived
once, in :func:`agentrl.train.config.complete_config`, so a changed preset
or command-line override re-derives them.

Experiments are files of the project, not of the package: an experiment is
named by path (``my_exps/foo.py``) or by name (``ad_darkroom``), found as
``experiments/<name>.py`` in the working directory or the nearest directory
above it that has an ``experiments/`` folder (:mod:`agentrl.project`). An
experiment imports the modules beside it by name (``from _dpt import
dpt_base``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

import agentrl.configtools as configtools
import agentrl.project as project
from agentrl.train.config import ExperimentConfig, TrainConfig

#: the folder experiments are looked up in, by name
FOLDER = "experiments"
#: the presets every experiment of the checkout defines
PRESET_NAMES = ("smoke", "cpu", "gpu", "full")


def make_presets(
    base: ExperimentConfig, **changes: dict[str, Any]
) -> dict[str, Callable[[], ExperimentConfig]]:
    """``PRESETS``: preset name -> ``base`` with that preset's field changes.

    Keys are dotted paths or unique field names, as on the command line;
    every change is validated when the preset is loaded.
    """
    return {
        name: functools.partial(configtools.override, base, dict(change))
        for name, change in changes.items()
    }


def known_experiments() -> list[str]:
    """Names of the experiments in the nearest ``experiments/`` folder
    (none outside a project that has one)."""
    return project.module_names(project.find_folder(FOLDER))


def load_module(name: str) -> ModuleType:
    """The experiment module ``name``: a path, or ``experiments/<name>.py``."""
    path = project.locate(name, FOLDER, "experiment")
    return _checked(project.load(path), str(path))


def _checked(module: ModuleType, where: str) -> ModuleType:
    if not isinstance(getattr(module, "PRESETS", None), dict):
        raise ValueError(f"experiment {where} defines no PRESETS dict")
    return module


def load_experiment(
    name: str, preset: str = "smoke", overrides: dict[str, Any] | None = None
) -> ExperimentConfig:
    """The config of ``preset`` in experiment ``name``, with ``overrides``."""
    module = load_module(name)
    if preset not in module.PRESETS:
        raise ValueError(
            f"preset must be one of {sorted(module.PRESETS)}, got {preset!r}"
        )
    config = module.PRESETS[preset]()
    return configtools.override(config, overrides or {})


#: Validation tasks of the ``gpu`` and ``full`` presets on families that fix
#: few tasks drawn from a distribution (Point-Robot, the MuJoCo families:
#: 45 / 5, so 2 validation tasks, too few to resolve a choice): 32 fresh
#: draws (``agentrl.train.rundir.held_out_params``); so do the Point-Robot
#: ``cpu`` presets (since session 48). The HalfCheetah-Vel and Walker ``cpu``
#: presets keep the split's 2, which their records were chosen on
#: (docs/results.md).
DRAWN_VALIDATION = {"eval.validation_tasks": 32}


def steps_fields(steps: int, logs: int = 50, checkpoints: int = 4) -> dict[str, int]:
    """``train.steps`` with about ``logs`` log lines and ``checkpoints`` saves."""
    return {
        "train.steps": steps,
        "train.log_every": max(steps // logs, 1),
        "train.checkpoint_every": max(steps // checkpoints, 1),
    }


def online_train_config(
    *, steps: int, lr: float, schedule: str, log_every: int, checkpoint_every: int
) -> TrainConfig:
    """``train`` of an online (PPO) learner: ``steps`` updates, no weight decay
    and no warm-up, gradients clipped at norm 0.5 (XLand-MiniGrid's RL²)."""
    return TrainConfig(
        steps=steps,
        lr=lr,
        weight_decay=0.0,
        schedule=schedule,
        warmup_steps=0,
        grad_clip=0.5,
        log_every=log_every,
        checkpoint_every=checkpoint_every,
    )
