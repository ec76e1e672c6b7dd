"""Find and load experiment presets: ``experiments/<name>.py``.

An experiment module defines ``PRESETS: dict[str, Callable[[], ExperimentConfig]]``
with the keys ``smoke``, ``cpu`` and ``full``. It can be named by path
(``experiments/ad_darkroom.py``) or by name (``ad_darkroom``), looked up in
``./experiments`` and then in the repository's ``experiments/`` folder.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from agentrl import configtools
from agentrl.train.config import ExperimentConfig

REPO_EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
PRESET_NAMES = ("smoke", "cpu", "full")


def find_experiment(name: str) -> Path:
    candidates = [
        Path(name),
        Path("experiments") / f"{name}.py",
        REPO_EXPERIMENTS / f"{name}.py",
    ]
    for path in candidates:
        if path.is_file():
            return path
    known = sorted(p.stem for p in REPO_EXPERIMENTS.glob("*.py") if p.stem[0] != "_")
    raise ValueError(f"unknown experiment {name!r}; known: {', '.join(known)}")


def load_module(name: str) -> ModuleType:
    path = find_experiment(name)
    spec = importlib.util.spec_from_file_location(f"agentrl_exp_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not isinstance(getattr(module, "PRESETS", None), dict):
        raise ValueError(f"{path} defines no PRESETS dict")
    return module


def load_experiment(
    name: str, preset: str = "smoke", overrides: dict[str, str] | None = None
) -> ExperimentConfig:
    """The config of ``preset`` in experiment ``name``, with ``overrides``."""
    module = load_module(name)
    if preset not in module.PRESETS:
        raise ValueError(
            f"preset must be one of {sorted(module.PRESETS)}, got {preset!r}"
        )
    config = module.PRESETS[preset]()
    return configtools.override(config, overrides or {})
