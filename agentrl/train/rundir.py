"""Run directories: what :func:`agentrl.train.fit` writes and how to read it.

::

    run_dir/config.json      the full ExperimentConfig (derived fields filled)
    run_dir/run.json         env, task split, dataset reference, versions,
                             the code of each training segment
    run_dir/dataset/         the learning histories (unless data.path is set)
    run_dir/checkpoints/     orbax checkpoints (last K)
    run_dir/metrics.jsonl    and run_dir/tb/ (TensorBoard)

:func:`load_run` is the one public way to open a trained run (notebooks,
``agentrl eval``, benchmarks): it restores the model's parameters only (no
optimizer state is built or read) and returns them with the config, the
environment and the held-out tasks of the run's split.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import agentrl.configtools as configtools
from agentrl.agents.driver import ModelPolicy
from agentrl.checks import is_int
from agentrl.data.files import METADATA_FILE
from agentrl.data.reader import open_dataset
from agentrl.data.task_plan import training_tasks
from agentrl.envs.base import can_draw_tasks, validation_beyond_split
from agentrl.envs.registry import make as make_env
from agentrl.plugins import import_run_plugins, required_plugins
from agentrl.provenance import json_digest
from agentrl.tables import write_text
from agentrl.train.checkpoint import Checkpointer, complete_steps
from agentrl.train.config import ExperimentConfig
from agentrl.train.segments import SEGMENTS, kept_segments
from agentrl.version import __version__

# Fields that change only how a trained model acts when evaluated (the
# evaluation settings, an AD learner's acting context): a run trained with
# other values is the same run, so ``agentrl reproduce`` reuses it.
EVALUATION_ONLY = ("eval.", "algo.eval_context", "algo.base.eval_context")

# What a resumed run may change: how long it trains (not below its latest
# checkpoint's step: resumable_config refuses that), how it logs and
# checkpoints, how many updates a call runs (never changes the results),
# where its dataset lives, how it is evaluated, and how the model
# computes the same function (MoE dispatch, attention kernel and block,
# rematerialisation: tested equal in outputs and gradients), so a run saved
# before a default implementation changed still resumes.
RESUME_MAY_CHANGE = (
    "train.steps",
    "train.log_every",
    "train.checkpoint_every",
    "train.keep_checkpoints",
    "train.steps_per_call",
    "data.path",
    *EVALUATION_ONLY,
    "model.moe_dispatch",
    "model.attention",
    "model.remat",
)


def _named_in(field: str, names: tuple[str, ...]) -> bool:
    """``field`` is one of ``names`` (a name ending in "." is a section)."""
    return any(field.startswith(p) if p.endswith(".") else field == p for p in names)


def _may_change_on_resume(field: str) -> bool:
    return _named_in(field, RESUME_MAY_CHANGE)


def evaluation_only(field: str) -> bool:
    """Whether ``field`` (``"eval.acting"``) changes only how a trained model
    is evaluated, never what it learns (:data:`EVALUATION_ONLY`)."""
    return _named_in(field, EVALUATION_ONLY)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(
            f"{path} must hold a JSON object, got {type(data).__name__} (damaged?)"
        )
    return data


def load_config(run_dir: str | Path) -> ExperimentConfig:
    """The ``ExperimentConfig`` a run was trained with (its ``config.json``).

    A damaged or edited file raises ``ValueError`` naming it and the field.
    """
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: not a training run directory")
    import_run_plugins(run_dir)  # modules that registered its env, algorithm, ...
    try:
        return configtools.from_dict(ExperimentConfig, _read_json(path))
    except (TypeError, AttributeError, KeyError, ValueError) as err:
        text = str(err)
        if text.startswith(str(path)):
            raise
        raise ValueError(f"{path}: not a valid agentrl config: {text}") from None


def read_split(run_dir: str | Path, env: Any) -> dict | None:
    """The task split recorded in ``run.json`` (``None`` if absent), checked.

    Its test (and validation, where recorded) ids must be task ids of ``env``
    (for a finite task space). A split with no validation ids is returned as
    recorded; asking :func:`held_out_params` for its validation tasks is an
    error.
    """
    path = Path(run_dir) / "run.json"
    if not path.is_file():
        return None
    split = _read_json(path).get("split")
    if split is None:
        return None
    num = getattr(env, "num_tasks", None)

    def valid(ids: Any) -> bool:
        return isinstance(ids, list) and all(
            is_int(i, 0) and i < (num if num is not None else 2**31) for i in ids
        )

    ok = isinstance(split, dict) and valid(split.get("test"))
    ok = ok and ("validation" not in split or valid(split["validation"]))
    if not ok:
        allowed = f"in [0, {num})" if num is not None else ">= 0"
        raise ValueError(
            f"{path}: 'split' must be {{'test': [task id, ...], 'validation': "
            f"[task id, ...], ...}} with ids {allowed}, got {split!r:.200} (damaged?)"
        )
    return split


def resumable_config(run_dir: Path, config: ExperimentConfig) -> ExperimentConfig:
    """``config`` to resume ``run_dir`` with, refusing one that trains
    differently.

    Resuming restores the checkpoint's weights and reuses the run's dataset,
    so any other change (model, data, learning rate, seed, ...) would be
    silently ignored or mixed in. More steps are allowed, fewer than the
    latest checkpoint's step are not (the model has trained them: a shorter
    run is a new run); the run keeps the learning-rate schedule it started
    with (``train.schedule_steps`` set to its first length where
    ``train.steps`` grows, and kept when a run so extended is resumed
    again), as a fresh run of that length would not. The run's config is its
    ``config.json`` or, where that file is gone, the config its latest
    checkpoint recorded.
    """
    recorded = _recorded_config(Path(run_dir))
    if recorded is None:
        return config
    saved, whence = recorded
    train = config.train
    # the schedule the run started with: its recorded length (a run already
    # extended, resumed again with the same steps) or, as the steps grow, its
    # first length
    grown = saved.get("train.steps") != train.steps
    kept = saved.get("train.schedule_steps") or (
        saved["train.steps"] if grown else None
    )
    if train.schedule_steps is None and kept is not None:
        train = dataclasses.replace(train, schedule_steps=kept)
        config = dataclasses.replace(config, train=train)
    now = configtools.flat_fields(config)
    changed = [
        f"{k}: {saved[k]!r} -> {now[k]!r}"
        for k in sorted(saved.keys() & now.keys())
        if _effective(saved, k) != _effective(now, k) and not _may_change_on_resume(k)
    ]
    if changed:
        raise ValueError(
            f"run_dir {run_dir} holds a run of another config ({'; '.join(changed)}"
            f"{whence}); a resumed run may only change "
            f"{', '.join(RESUME_MAY_CHANGE)}. Train into a new run_dir instead."
        )
    _check_steps_not_below_checkpoint(Path(run_dir), train.steps)
    return config


def _recorded_config(run_dir: Path) -> tuple[dict[str, Any], str] | None:
    """``(flat config, where it was read when not config.json)`` of the run
    in ``run_dir``: its ``config.json``, else the config its latest complete
    checkpoint recorded; ``None`` without either (nothing to resume)."""
    saved_file = run_dir / "config.json"
    if saved_file.is_file():
        return configtools.flat_fields(_read_json(saved_file)), ""
    latest = latest_checkpoint_meta(run_dir / "checkpoints")
    if latest is None or not isinstance(latest[1].get("config"), dict):
        return None
    step, meta = latest
    whence = (
        f"; config.json is missing: compared with the config checkpoint {step} recorded"
    )
    return configtools.flat_fields(meta["config"]), whence


def latest_checkpoint_meta(directory: Path) -> tuple[int, dict[str, Any]] | None:
    """``(step, metadata)`` of the latest complete checkpoint in ``directory``
    (its JSON part: step, config ...); ``None`` if there is none or its
    metadata file is missing (the restore then says what is wrong)."""
    steps = complete_steps(Path(directory))
    meta = Path(directory) / str(steps[-1]) / "meta" / "metadata" if steps else None
    if meta is None or not meta.is_file():
        return None
    return steps[-1], _read_json(meta)


def _check_steps_not_below_checkpoint(run_dir: Path, steps: int) -> None:
    """Refuse resuming ``run_dir`` for fewer ``train.steps`` than its latest
    checkpoint has trained (``ValueError``): it would run no update and
    record a config of fewer steps than the model has."""
    done = complete_steps(run_dir / "checkpoints")
    if done and steps < done[-1]:
        raise ValueError(
            f"train.steps {steps} is below the step of run_dir {run_dir}'s "
            f"latest checkpoint, {done[-1]}: a resumed run may train more steps, "
            f"not fewer (train.steps >= {done[-1]}); train into a new run_dir "
            "for a shorter run, or evaluate an earlier checkpoint (agentrl "
            "eval --step)"
        )


def _effective(flat: dict[str, Any], field: str) -> Any:
    """``flat[field]``; an unset schedule length is the run's steps."""
    if field == "train.schedule_steps" and flat[field] is None:
        return flat.get("train.steps")
    return flat[field]


def write_run_record(
    run_dir: Path, config: Any, split: dict | None, **training_data: Any
) -> None:
    """``config.json`` and ``run.json`` of a run, learning from data or online.

    ``run.json`` records the versions, the environment, the task ``split``,
    ``training_data`` (what the run learns from: the dataset's path and
    source, or ``None`` for both and ``trained_online``) and the devices;
    the training segments an earlier ``run.json`` recorded are kept
    (:mod:`agentrl.train.segments`).
    """
    # Atomic (temporary file, then rename): a kill or a full disk never
    # leaves a truncated config.json that would stop the run resuming.
    write_text(
        run_dir / "config.json", json.dumps(configtools.to_dict(config), indent=2)
    )
    info = {
        "agentrl_version": __version__,
        "jax_version": jax.__version__,
        "env": config.data.env,
        "env_args": dict(config.data.env_args),
        "split": split,
        "plugins": required_plugins(config),
        **training_data,
        "num_devices": jax.device_count(),
        "num_processes": jax.process_count(),
        SEGMENTS: kept_segments(run_dir / "run.json"),
    }
    write_text(run_dir / "run.json", json.dumps(info, indent=2))


def write_run_files(run_dir: Path, config: ExperimentConfig, dataset: Any) -> None:
    """``config.json`` and ``run.json`` (env, split, dataset, versions)."""
    write_run_record(
        run_dir,
        config,
        dataset.metadata.get("split"),
        dataset=str(dataset.path),
        dataset_source=dataset.metadata.get("source"),
        dataset_digest=dataset_digest(dataset.metadata),
    )


def dataset_digest(metadata: dict[str, Any]) -> str | None:
    """The identity of a dataset's histories: a digest of its files' names
    and SHA-256s (``agentrl.json``'s ``files``), wherever it lives."""
    files = metadata.get("files")
    if not files:
        return None
    sums = sorted([name, info.get("sha256")] for name, info in files.items())
    return json_digest({"files": sums})[:24]


def check_same_dataset(run_dir: Path, dataset: Any) -> None:
    """Refuse resuming ``run_dir`` on other histories than it trained on
    (``data.path`` may move, not change; ``ValueError``). Runs written
    before the digest was recorded are not checked."""
    info_file = Path(run_dir) / "run.json"
    if not info_file.is_file():
        return
    recorded = _read_json(info_file).get("dataset_digest")
    now = dataset_digest(dataset.metadata)
    if recorded is not None and now is not None and recorded != now:
        raise ValueError(
            f"{dataset.path} holds other histories than run_dir {run_dir} "
            f"trained on (dataset digest {now}, the run's {recorded}); resume "
            "it on its own dataset, or train into a new run_dir"
        )


#: ``fold_in`` salts of the evaluation-only task keys of continuous task
#: spaces: validation and test tasks are independent draws.
_SPLIT_SALT = {"test": 0xE7A1, "validation": 0x7A1D, "train": 0x7EA1}
#: validation tasks drawn beyond a finite split use their own key
_DRAWN_SALT = 0xD4A3


def held_out_params(
    env: Any,
    split: dict | None,
    num_tasks: int | None,
    seed: int,
    which: str = "test",
    draw: bool = False,
    trained: list[int] | None = None,
):
    """``(params [task, ...], ids | None)`` of the held-out ``which`` tasks.

    ``which`` is ``"test"`` (the reported number) or ``"validation"``
    (protocol choices), or ``"train"``: the tasks the run trained on,
    ``trained`` (ids, :meth:`Run.trained_task_ids`), a memorisation
    diagnostic (does the learner do better on the tasks it was trained on
    than on held-out ones?), for a finite task space here (a continuous
    one's training tasks are its dataset's draws, rebuilt from the dataset:
    :meth:`Run.held_out`). Not the
    split's training ids: histories cycle over only the first
    ``data.num_tasks`` (or ``data.num_train_tasks``) of them, so most could
    be tasks the run never saw. For a finite task space (Dark Room goals)
    the split's (or ``trained``) ids, all of them or, when it holds more
    than ``num_tasks``, a uniform
    draw of ``num_tasks`` (seeded by ``seed`` and ``which``; returned
    sorted); for a continuous one (bandit means) fresh tasks from an
    evaluation-only key, independent between validation and test. A split
    recorded without validation ids has no validation tasks: asking for
    them raises ``ValueError``.

    ``draw``: validation tasks only; when ``num_tasks`` is more than the
    split's validation ids, ``num_tasks`` fresh tasks from the family's task
    distribution (``draw_params``, :func:`~agentrl.envs.base.can_draw_tasks`:
    Point-Robot's goals, the MuJoCo families' velocities and bodies; ids
    ``None``) instead of the few the split holds. The test tasks stay the
    split's. A family with nothing to draw (Dark Room's 81 goals) raises
    ``ValueError``.

    Why a draw and not the first ids: a split's lists are sorted and a
    family's ids are structured (Key-to-Door's id is key cell major), so
    the first 16 of 648 held-out pairs would all have the key in the first
    three cells.
    """
    if which not in _SPLIT_SALT:
        raise ValueError(
            f"tasks must be 'validation', 'test' or 'train', got {which!r}"
        )
    if which == "train" and (env.num_tasks is None or split is None):
        raise ValueError(
            "training tasks by id need a family with a finite task space and "
            "a recorded split (Dark Room goals, Key-to-Door pairs); a "
            "continuous family's are its dataset's draws (Run.held_out "
            "rebuilds them from the run's dataset)"
        )
    if which == "train" and trained is None:
        raise ValueError(
            "training tasks are the ids the run trained on: pass trained "
            "(Run.held_out reads them from the run's dataset), not the "
            "split's training ids, most of which a small run never saw"
        )
    if env.num_tasks is not None and split is not None:
        train = which == "train"
        ids = [int(i) for i in (trained if train else split.get(which, []))]
        beyond = draw and which == "validation" and (num_tasks or 0) > len(ids)
        if beyond and (ids or can_draw_tasks(env)):  # no ids, no draws: below
            return _drawn_tasks(env, ids, num_tasks, seed), None
        if num_tasks is not None and len(ids) > num_tasks:
            ids = sorted(ids[i] for i in _seeded_pick(len(ids), num_tasks, seed, which))
        if not ids:
            raise ValueError(
                f"the recorded task split has no {which} tasks (a train/test "
                "split without validation ids, or too few held-out tasks): "
                "regenerate the dataset to choose protocol settings on "
                "validation tasks"
            )
        return jax.vmap(env.params_for_task)(jnp.asarray(ids, jnp.int32)), ids
    keys = jax.random.split(
        jax.random.fold_in(jax.random.key(seed), _SPLIT_SALT[which]),
        num_tasks or 200,
    )
    return jax.vmap(env.sample_params)(keys), None


def _seeded_pick(total: int, count: int, seed: int, which: str) -> np.ndarray:
    """``[count]`` sorted indices of ``total`` items drawn without
    replacement, seeded by ``seed`` and the split ``which`` (one draw for a
    finite family's ids and a continuous family's trained tasks)."""
    rng = np.random.default_rng([seed, _SPLIT_SALT[which]])
    return np.sort(rng.choice(total, count, replace=False))


def eval_task_count(
    ev: Any, which: str, num_tasks: int | None = None
) -> tuple[int, bool]:
    """``(count, draw)``: how many ``which`` tasks an evaluation under config
    ``ev`` (``eval.*``) asks for, and whether validation tasks beyond the
    split's are drawn (:func:`held_out_params`' ``draw``). ``num_tasks``
    (``agentrl eval --tasks``) if given; else, for validation tasks,
    ``eval.validation_tasks`` where set; else ``eval.num_tasks``."""
    asked = num_tasks
    if which == "validation" and asked is None:
        asked = ev.validation_tasks
    count = ev.num_tasks if asked is None else asked
    return count, which == "validation" and asked is not None


def eval_tasks(env: Any, split: dict | None, ev: Any, which: str = "test"):
    """``(params [task, ...], ids | None)``: the ``which`` tasks of ``split``
    that ``agentrl eval --split WHICH`` evaluates a run with evaluation
    config ``ev`` on (:func:`eval_task_count` of them, seeded by
    ``eval.seed``; see :func:`held_out_params`)."""
    count, draw = eval_task_count(ev, which)
    return held_out_params(env, split, count, ev.seed, which, draw)


def _drawn_tasks(env: Any, ids: list[int], num_tasks: int, seed: int) -> Any:
    """``num_tasks`` fresh validation tasks from ``env.draw_params``."""
    if not can_draw_tasks(env):
        raise validation_beyond_split(
            env,
            f"eval.validation_tasks or --tasks {num_tasks}",
            len(ids),
            "the recorded split",
        )
    salt = _SPLIT_SALT["validation"] ^ _DRAWN_SALT
    keys = jax.random.split(jax.random.fold_in(jax.random.key(seed), salt), num_tasks)
    return jax.vmap(env.draw_params)(keys)


def _run_dataset(run_dir: Path, config: ExperimentConfig) -> Any:
    """The dataset a run learnt from (its own ``dataset/``, ``data.path``
    or the path ``run.json`` records), opened without checksums."""
    info = run_dir / "run.json"
    recorded = _read_json(info).get("dataset") if info.is_file() else None
    places = [str(p) for p in (run_dir / "dataset", config.data.path, recorded) if p]
    for path in places:
        if (Path(path) / METADATA_FILE).is_file():
            return open_dataset(path, verify="none")
    raise ValueError(
        f"{run_dir}: no dataset to read the tasks the run trained on from (no "
        f"{METADATA_FILE} in {', '.join(places)}); its training tasks are "
        "its histories' tasks: restore its dataset or point data.path at it"
    )


@dataclasses.dataclass
class Run:
    """A trained run, opened by :func:`load_run`.

    Attributes:
      run_dir: the directory.
      config: its completed ``ExperimentConfig`` (``config.algo`` acts it).
      model: the decision model with the checkpoint's parameters.
      env: the environment it was trained on.
      split: the task split recorded with its data (``None`` if absent).
      step: the checkpoint's training step.
    """

    run_dir: Path
    config: ExperimentConfig
    model: Any
    env: Any
    split: dict | None
    step: int

    def __repr__(self) -> str:
        """One line: where, which checkpoint, what was trained on what (the
        config and the model's parameters are in ``run.config``/``run.model``)."""
        m = self.config.model
        shape = f"{m.num_layers} layers x d_model {m.d_model}"
        split = self.split or {}
        held_out = {k: len(split.get(k) or ()) for k in ("validation", "test")}
        tasks = ", ".join(f"{n} {k}" for k, n in held_out.items() if n)
        return (
            f"Run({str(self.run_dir)!r}, step={self.step}, "
            f"algo={self.config.algo.label!r}, env={self.config.data.env!r}, "
            f"model={shape}" + (f", held-out tasks: {tasks}" if tasks else "") + ")"
        )

    def held_out(
        self,
        num_tasks: int | None = None,
        seed: int | None = None,
        which: str = "test",
        draw: bool = False,
        env: Any = None,
    ):
        """``(params [task, ...], ids | None)``: held-out ``which`` tasks.

        ``which``: ``"test"`` (as ``eval`` uses), ``"validation"`` or
        ``"train"`` (a draw of :meth:`trained_task_ids`; on a continuous
        family, of :meth:`trained_draws`); ``draw``: as
        :func:`held_out_params`; ``env``: the family to build them on (a
        shift that keeps the task ids), default the run's.
        """
        ev = self.config.eval
        env = self.env if env is None else env
        count, seed = num_tasks or ev.num_tasks, ev.seed if seed is None else seed
        if which == "train" and env.num_tasks is None:
            return self.trained_draws(env, count, seed), None
        train = which == "train"  # a finite family's training tasks are ids
        return held_out_params(
            env,
            self.split,
            count,
            seed,
            which,
            draw,
            self.trained_task_ids() if train else None,
        )

    def trained_draws(self, env: Any, count: int, seed: int) -> Any:
        """``params [task, ...]``: a continuous family's training tasks, the
        distinct tasks of the run's histories (rebuilt from its dataset,
        :func:`~agentrl.data.task_plan.training_tasks`), a seeded draw of
        ``count`` where there are more (in the histories' order).
        ``ValueError`` for an online learner, whose training draws fresh
        tasks all along, or where the dataset is missing."""
        if self.config.algo.by_training(from_data=False, online=True):
            raise ValueError(
                f"{self.config.algo.label} learns online on {env.name}, whose "
                "tasks are drawn afresh all along training: no set of training "
                "tasks to evaluate on (use the test or validation split)"
            )
        dataset = _run_dataset(self.run_dir, self.config)
        params, ids = training_tasks(env, dataset.metadata)
        if len(ids) > count:
            pick = _seeded_pick(len(ids), count, seed, "train")
            params = jax.tree.map(lambda x: x[pick], params)
        return params

    def trained_task_ids(self) -> list[int]:
        """The distinct task ids the run trained on, sorted.

        An online learner draws from all the split's training ids; one
        learning from data trained on its histories' tasks (its dataset's
        ``task_ids``: :func:`~agentrl.data.task_plan.training_tasks`), only
        some of the split's where ``data.num_tasks`` is below their number
        or ``data.num_train_tasks`` is set. ``ValueError`` where the dataset
        is missing or is not this run's.
        """
        split = [int(i) for i in (self.split or {}).get("train", [])]
        online = self.config.algo.by_training(from_data=False, online=True)
        if online:
            return sorted(split)
        dataset = _run_dataset(self.run_dir, self.config)
        ids = sorted(int(i) for i in training_tasks(self.env, dataset.metadata)[1])
        if split and not set(ids) <= set(split):  # a split without train ids: no check
            raise ValueError(
                f"{dataset.path}: its histories' tasks are not all training "
                "tasks of the run's split (run.json): not this run's dataset?"
            )
        return ids

    def policy(self, config: ExperimentConfig | None = None, env: Any = None):
        """The model with its algorithm's acting rule (``config.eval`` settings).

        A :class:`~agentrl.agents.driver.ModelPolicy` for
        :func:`agentrl.evaluate.evaluate_methods` or ``run_policy``; pass a
        ``config`` with other ``eval`` settings (greedy, temperature) to act
        differently, an ``env`` to act on another family (a shift).
        """
        config = config or self.config
        env = self.env if env is None else env
        return ModelPolicy(
            self.model,
            lambda handle, n: config.algo.make_agent(handle, env, n, config),
        )


def load_run(run_dir: str | Path, step: int | None = None) -> Run:
    """Open a training run directory: model parameters, config, env, split.

    Only the model's parameters (and its RNG counters) are read from the
    checkpoint (``step``, default the latest); the optimizer state is
    neither built nor restored.
    """
    run_dir = Path(run_dir)
    config = load_config(run_dir)
    env = make_env(config.data.env, **dict(config.data.env_args))
    split = read_split(run_dir, env)
    ckpt = Checkpointer(
        run_dir / "checkpoints", config.train.checkpoint_every, create=False
    )

    def read(like: Any, partial: bool):
        # a distilled learner's state is named {"params", "rest", "opt",
        # "aux"}: it reads only the model's two parts, onto their devices
        if partial:
            return ckpt.restore_part(like, step)
        return ckpt.restore(like, step)

    try:
        policy, meta = config.algo.load_policy(config, env, read)
    finally:
        ckpt.close()
    _check_same_model(run_dir, config, meta)
    return Run(
        run_dir=run_dir,
        config=config,
        model=policy,
        env=env,
        split=split,
        step=int(meta["step"]),
    )


def _check_same_model(run_dir: Path, config: ExperimentConfig, meta: dict) -> None:
    """The checkpoint's recorded model config must be the run's own."""
    saved = meta["config"]["model"]
    now = json.loads(json.dumps(configtools.to_dict(config)["model"]))
    changed = sorted(k for k in saved.keys() & now.keys() if saved[k] != now[k])
    if changed:
        diff = "; ".join(f"model.{k}: {saved[k]!r} vs {now[k]!r}" for k in changed)
        raise ValueError(
            f"{run_dir}: the checkpoint was saved by another model than its "
            f"config.json describes ({diff}): checkpoints mixed up between runs?"
        )


def load_model(run_dir: str | Path, step: int | None = None):
    """``(model, config)`` of a run's checkpoint (see :func:`load_run`)."""
    run = load_run(run_dir, step)
    return run.model, run.config
