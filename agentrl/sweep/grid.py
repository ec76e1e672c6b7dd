"""Sweep specifications: which config fields vary, traced or static.

A grid is ``{field: [values]}`` with config field names as the CLI accepts
them (``lr``, ``train.lr``, ``num_layers``, ``model.d_model`` ...). Fields
marked :func:`~agentrl.configtools.traced` on the config (``train.lr``,
``train.weight_decay``, and the algorithm's own, e.g. T2MIR's loss weights)
are swept inside ONE compiled program (vmapped); every other field is
*static* (it changes a shape or the program), so each combination of static
values is its own compiled program, run one after another.

Everything is validated here, before anything compiles: unknown or ambiguous
fields (including another algorithm's fields), one field given twice under
two spellings (``lr`` and ``train.lr``), values of the wrong type and
values the config rejects (``lr <= 0``) raise ``ValueError`` naming the
field and what is allowed; so does a grid over a dataset field
(:data:`DATASET_FIELDS`) for an online learner, which reads no dataset.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import agentrl.configtools as configtools
from agentrl.data.task_plan import plan_tasks
from agentrl.envs.registry import make as make_env

#: Fields that only shape the dataset a distilled learner trains on: an online
#: learner (trained by RL: RL², transformer PPO, AMAGO) ignores them, so sweeping one
#: is refused.
DATASET_FIELDS = (
    "data.source",
    "data.source_args",
    "data.num_tasks",
    "data.num_train_tasks",
    "data.num_episodes",
    "data.path",
)


def traced_paths(config: Any) -> list[str]:
    """The config paths swept in one program (its traced fields)."""
    return list(configtools.traced_values(config))


@dataclasses.dataclass(frozen=True)
class SweepGrid:
    """A validated grid.

    Attributes:
      traced: ``{config path: (float, ...)}`` (e.g. ``{"train.lr": (1e-4, 1e-3)}``).
      static: ``{config path: (value, ...)}`` (e.g. ``{"model.d_model": (16, 32)}``).
    """

    traced: dict[str, tuple[float, ...]]
    static: dict[str, tuple[Any, ...]]

    def traced_settings(self) -> list[dict[str, float]]:
        """Cartesian product of the traced values: ``H`` dicts (``[{}]`` if none)."""
        names = list(self.traced)
        return [
            dict(zip(names, v, strict=True))
            for v in itertools.product(*self.traced.values())
        ]

    def static_settings(self) -> list[dict[str, Any]]:
        """Cartesian product of the static values (``[{}]`` if none)."""
        paths = list(self.static)
        return [
            dict(zip(paths, v, strict=True))
            for v in itertools.product(*self.static.values())
        ]


def parse_grid_args(items: list[str]) -> dict[str, list[str]]:
    """``["lr=1e-4,3e-4", "num_layers=1,2"]`` -> ``{"lr": ["1e-4", "3e-4"], ...}``.

    Raises ``ValueError`` on a malformed item, an empty value or a field given
    twice.
    """
    grid: dict[str, list[str]] = {}
    for item in items:
        if "=" not in item:
            raise ValueError(
                f"--grid expects FIELD=V1,V2,... (e.g. lr=1e-4,3e-4), got {item!r}"
            )
        key, values = item.split("=", 1)
        key = key.strip().lstrip("-").replace("-", "_")
        parts = [v.strip() for v in values.split(",")]
        if not key or not parts or any(not v for v in parts):
            raise ValueError(
                f"--grid expects FIELD=V1,V2,... with non-empty values, got {item!r}"
            )
        if key in grid:
            raise ValueError(f"--grid field {key!r} is given twice")
        grid[key] = parts
    return grid


def make_grid(config: Any, grid: dict[str, Any]) -> SweepGrid:
    """Resolve and validate ``grid`` (values as strings or Python values).

    Every value, and every static combination, is applied to ``config`` with
    :func:`agentrl.configtools.override`, so the config's own checks run now.
    """
    traced: dict[str, tuple[float, ...]] = {}
    static: dict[str, tuple[Any, ...]] = {}
    spelled: dict[str, str] = {}  # config path -> the key that named it
    paths = configtools.field_paths(config)
    online = config.algo.by_training(from_data=False, online=True)
    for key, values in grid.items():
        values = list(values) if isinstance(values, list | tuple) else [values]
        if not values:
            raise ValueError(f"grid field {key!r} has no values")
        _refuse_section(config, key)
        path = configtools.resolve(config, key)
        if path in spelled:
            raise ValueError(
                f"grid fields {spelled[path]!r} and {key!r} (--grid) are the same "
                f"field, {path}: give its values once (--grid {path}=V1,V2,...)"
            )
        spelled[path] = key
        if online and path in DATASET_FIELDS:
            raise ValueError(
                f"grid field {path}: {config.algo.label} is trained online by RL "
                "and reads no dataset, so this field changes nothing; sweep its "
                "algo.*, train.* or data.env_args fields"
            )
        parsed = [configtools.parse_value(path, v, paths[path]) for v in values]
        for v in parsed:
            configtools.override(config, {path: v})  # the config's own checks
        if len(set(map(repr, parsed))) != len(parsed):
            raise ValueError(f"grid field {path} has repeated values {values}")
        if path in traced_paths(config):
            traced[path] = tuple(float(v) for v in parsed)
        else:
            if path in ("train.seed",):
                raise ValueError("sweep seeds with --seeds, not a grid over train.seed")
            static[path] = tuple(parsed)
    spec = SweepGrid(traced, static)
    for setting in spec.static_settings():
        configtools.override(config, setting)  # combinations valid together
    return spec


def _refuse_section(config: Any, key: str) -> None:
    """``ValueError`` where ``key`` names a part of the config (the algorithm
    ``algo``, the section ``model`` ...) rather than one leaf field."""
    node: Any = config
    for name in key.split("."):
        if not dataclasses.is_dataclass(node) or isinstance(node, type):
            return
        if name not in {f.name for f in dataclasses.fields(node)}:
            return
        node = getattr(node, name)
    if not dataclasses.is_dataclass(node) or isinstance(node, type):
        return  # a leaf field
    fields = [p for p in configtools.field_paths(config) if p.startswith(key + ".")]
    examples = ", ".join(fields[:3]) + (" ..." if len(fields) > 3 else "")
    if key in configtools.node_paths(config):
        raise ValueError(
            f"grid field {key!r} (--grid) selects the algorithm ({node.name}), not a "
            "field: a sweep trains one algorithm, so sweep each by itself "
            "(--algo NAME, or its own experiment), or grid its fields "
            f"({examples})"
        )
    raise ValueError(
        f"grid field {key!r} (--grid) is a section of the config, not a field: "
        f"grid one of its fields ({examples})"
    )


def check_train_task_eval(config: Any, evaluate: bool, eval_train_tasks: bool) -> None:
    """``ValueError`` where ``eval_train_tasks`` cannot apply: without
    evaluation, or for an online learner (it trains on fresh tasks of the
    whole family, so it has no set of training tasks)."""
    if not eval_train_tasks:
        return
    if not evaluate:
        raise ValueError("--eval-train-tasks needs the evaluation (drop --no-eval)")
    if config.algo.by_training(from_data=False, online=True):
        raise ValueError(
            f"--eval-train-tasks: {config.algo.label} is trained online by RL on "
            "fresh tasks of the whole family, so it has no training tasks to "
            "score; it applies to learners trained from a dataset"
        )


def check_data_plans(config: Any, spec: SweepGrid) -> None:
    """Plan every static setting's histories before the first one trains
    (:func:`~agentrl.data.task_plan.plan_tasks`, no data made), so that a
    setting the data cannot hold (``data.num_train_tasks`` above the split's
    training tasks) is refused up front, not after the settings before it
    have trained. Settings on ``data.path`` and online learners make no
    histories and are skipped."""
    if config.algo.by_training(from_data=False, online=True):
        return
    envs: dict[Any, Any] = {}  # one build per family (MuJoCo's take seconds)
    for static in spec.static_settings():
        data = apply_static(config, static).data
        if data.path:
            continue
        family = (data.env, repr(data.env_args))
        if family not in envs:
            envs[family] = make_env(data.env, **dict(data.env_args))
        plan_tasks(
            envs[family],
            data.num_tasks,
            data.split_fraction,
            data.seed,
            num_train_tasks=data.num_train_tasks,
        )


def apply_static(config: Any, setting: dict[str, Any]) -> Any:
    """``config`` with one static combination applied."""
    return configtools.override(config, setting)


def setting_label(setting: dict[str, Any]) -> str:
    """``"lr=0.001 num_layers=2"`` (last path component of each field)."""
    if not setting:
        return "default"
    return " ".join(f"{k.split('.')[-1]}={_fmt(v)}" for k, v in setting.items())


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)
