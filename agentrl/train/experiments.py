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

Experiments ship in the package (:mod:`agentrl.experiments`), so they are
found from any directory of an installed agentrl. An experiment is named by
path (``my_exps/foo.py``) or by name (``ad_darkroom``), looked up in
``./experiments/<name>.py`` (a user's own) and then in the package.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from agentrl import configtools
from agentrl.train.config import ExperimentConfig, TrainConfig

PACKAGE = "agentrl.experiments"
#: the presets every shipped experiment defines
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
    """Names of the experiments shipped in :mod:`agentrl.experiments`."""
    package = importlib.import_module(PACKAGE)
    return sorted(
        m.name for m in pkgutil.iter_modules(package.__path__) if m.name[0] != "_"
    )


def load_module(name: str) -> ModuleType:
    """The experiment module ``name`` (a path, ``./experiments/``, or the package)."""
    for path in (Path(name), Path("experiments") / f"{name}.py"):
        if path.is_file() and path.suffix == ".py":
            spec = importlib.util.spec_from_file_location(
                f"agentrl_exp_{path.stem}", path
            )
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return _checked(module, str(path))
    if name.isidentifier() and name in known_experiments():
        return _checked(importlib.import_module(f"{PACKAGE}.{name}"), name)
    raise ValueError(
        f"unknown experiment {name!r}; known: {', '.join(known_experiments())} "
        "(or a path to an experiment .py file)"
    )


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
