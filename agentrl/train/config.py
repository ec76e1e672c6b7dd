"""Experiment configuration: frozen dataclasses, validated before compiling.

An experiment (``experiments/<name>.py``) defines presets ``smoke``,
``cpu`` and ``full`` returning an :class:`ExperimentConfig`. The algorithm is
an object (:mod:`agentrl.algos`) whose fields are its own hyperparameters
(``algo.context_episodes``, ``algo.context_size``, T2MIR's weights ...).

Derived fields are derived in one place, :func:`complete_config`: the
model's observation/action fields from the environment, its attention window
(``model.max_steps``, when unset) from the algorithm's context, and the
algorithm's data-dependent fields (DT's target return). The warm-up is
derived from ``train.steps`` by :attr:`TrainConfig.warmup` unless set, so
``--train.steps 6000`` also moves it (in a fresh run: a resumed one keeps
its schedule, ``train.schedule_steps``).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import agentrl.algos as algos
from agentrl.agents.acting import ACTING_RULES
from agentrl.algos.base import Algorithm
from agentrl.checks import is_int, is_number
from agentrl.configtools import traced
from agentrl.models.config import ModelConfig, complete_model_config

SCHEDULES = ("cosine", "constant")


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise ValueError(message)


def _check_pairs(name: str, pairs: Any) -> None:
    """``((key, value), ...)`` with distinct string keys."""
    ok = isinstance(pairs, tuple) and all(
        isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) and p[0]
        for p in pairs
    )
    _check(
        ok,
        f'{name} must be (name, value) pairs, e.g. [["size", 9]] on the command '
        f"line, got {pairs!r}",
    )
    keys = [k for k, _ in pairs]
    _check(len(set(keys)) == len(keys), f"{name} sets a key twice: {keys}")


#: Experiment names become directory names (``runs/<name>-<preset>``).
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Which histories to train on (generated into the run if ``path`` is empty).

    ``env_args``/``source_args`` are ``((name, value), ...)`` pairs so the
    config stays hashable. Training tasks come from the env's deterministic
    split (``split_fraction``, ``split_seed``) when its task space is finite;
    ``num_tasks`` histories are drawn from them (cycling through the ids).

    Attributes:
      env: registered task family (``agentrl envs`` lists them).
      env_args: the family's constructor arguments, e.g. ``size=9``.
      source: source algorithm that generates the learning histories.
      source_args: the source's settings, e.g. ``learning_rate=0.5``.
      num_tasks: histories to generate (one task each).
      num_train_tasks: distinct training tasks the histories cycle over
        (the first of the split's training tasks; on a continuous family,
        such as bandits, that many drawn tasks shared by the training
        histories), for studies of memorisation against generalisation
        (``experiments/gpicl_bandit.py``); ``None``: all of them (a
        continuous family: every history its own task).
      num_episodes: episodes per history.
      split_fraction: share of a finite task space in the train split.
      seed: seed of the data generation (tasks and source).
      path: an existing dataset directory to train on instead of generating
        (``agentrl data generate --out PATH``); the run's ``config.json``
        then records the dataset's own source, seed, tasks and episodes.
      held_out: where the validation and test rulesets of an XLand-100B-schema
        file (``path`` an ``.hdf5``, or a dataset imported from one) come
        from: ``"file"``, split off the file's rulesets (``split_fraction``);
        ``"table"``, the XLand AD baseline's: every ruleset of the file
        trains, held-out ones are drawn from the env's table outside it
        (:mod:`agentrl.data.xland100b`).
    """

    env: str = "darkroom"
    env_args: tuple[tuple[str, Any], ...] = ()
    source: str = "q_learning"
    source_args: tuple[tuple[str, Any], ...] = ()
    num_tasks: int = 64
    num_train_tasks: int | None = None
    num_episodes: int = 100
    split_fraction: float = 0.8
    seed: int = 0
    path: str = ""
    held_out: str = "file"

    def __post_init__(self):
        for name in ("env", "source"):
            value = getattr(self, name)
            _check(
                isinstance(value, str) and value.strip() != "",
                f"data.{name} must be a registered name, got {value!r}",
            )
        _check(
            isinstance(self.path, str), f"data.path must be a str, got {self.path!r}"
        )
        _check_pairs("data.env_args", self.env_args)
        _check_pairs("data.source_args", self.source_args)
        _check(
            is_int(self.num_tasks, 1),
            f"data.num_tasks must be an integer >= 1, got {self.num_tasks!r}",
        )
        _check(
            self.num_train_tasks is None or is_int(self.num_train_tasks, 1),
            "data.num_train_tasks must be an integer >= 1 or None (all the "
            f"split's training tasks), got {self.num_train_tasks!r}",
        )
        _check(
            self.num_train_tasks is None or self.num_train_tasks <= self.num_tasks,
            f"data.num_train_tasks ({self.num_train_tasks}) must be <= "
            f"data.num_tasks ({self.num_tasks}): each distinct training task "
            "needs a history",
        )
        _check(
            is_int(self.num_episodes, 1),
            f"data.num_episodes must be an integer >= 1, got {self.num_episodes!r}",
        )
        _check(
            is_number(self.split_fraction) and 0.0 < self.split_fraction < 1.0,
            f"data.split_fraction must be in (0, 1), got {self.split_fraction!r}",
        )
        _check(
            is_int(self.seed, 0),
            f"data.seed must be an integer >= 0, got {self.seed!r}",
        )
        _check(
            self.held_out in ("file", "table"),
            "data.held_out must be 'file' (held-out rulesets split off the "
            "file's) or 'table' (drawn from the env's table outside the file), "
            f"got {self.held_out!r}",
        )
        _check(
            self.held_out == "file" or self.path != "",
            "data.held_out='table' applies to an XLand-100B-schema file "
            "(data.path FILE.hdf5) or a dataset imported from one; data.path "
            "is empty (agentrl generates the data and splits the env's tasks)",
        )


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Optimisation and bookkeeping (the algorithm's own fields are ``algo.*``).

    ``lr`` and ``weight_decay`` are traced (a sweep over them is one
    program); ``adam_b2`` is static (a new value compiles a new program).
    ``warmup_steps`` unset: ``warmup_fraction`` of the steps, at
    most ``max_warmup_steps`` (see :attr:`warmup`).

    Attributes:
      steps: optimizer steps.
      batch_size: training windows per step (global, over all devices).
      lr: peak learning rate (AdamW).
      weight_decay: AdamW weight decay.
      adam_b2: Adam's second-moment decay rate, in (0, 1) (0.999, optax's
        and PyTorch's default; the AD-ε and XLand AD references' 0.99).
        The online learners' Adam takes it too.
      warmup_steps: linear warm-up steps; unset: derived from
        ``schedule_steps``.
      warmup_fraction: warm-up as a fraction of ``schedule_steps`` when
        unset.
      max_warmup_steps: cap of the derived warm-up.
      schedule: learning-rate schedule after warm-up, cosine or constant.
      cosine_end: where the cosine ends, a fraction of the peak rate (0.1;
        the references' cosines end at 0).
      schedule_steps: the steps the warm-up and cosine are laid over;
        unset: ``steps``. A run resumed for more steps keeps the length it
        started with (written here), so its rate goes on from where it
        was and stays at the schedule's end beyond it, not a new cosine.
      grad_clip: global gradient-norm clip; ``None``: no clipping (the DPT
        reference's).
      seed: seed of the model initialisation and batch sampling.
      log_every: steps between metrics.jsonl / TensorBoard records.
      checkpoint_every: steps between checkpoints.
      keep_checkpoints: checkpoints kept (older ones are deleted).
      steps_per_call: most updates per jitted call (one dispatch, one
        transfer of metrics); unset: per device (:func:`steps_per_call`).
        A call also ends at every ``log_every`` and ``checkpoint_every``
        step and at ``steps``, so logs and checkpoints land exactly where
        they are due whatever it is; it never changes the results.
    """

    steps: int = 1000
    batch_size: int = 32
    lr: float = traced(3e-4)
    weight_decay: float = traced(1e-4)
    adam_b2: float = 0.999
    warmup_steps: int | None = None
    warmup_fraction: float = 0.1
    max_warmup_steps: int = 500
    schedule: str = "cosine"
    cosine_end: float = 0.1
    schedule_steps: int | None = None
    grad_clip: float | None = 1.0
    seed: int = 0
    log_every: int = 10
    checkpoint_every: int = 200
    keep_checkpoints: int = 3
    steps_per_call: int | None = None

    def __post_init__(self):
        for name in (
            "steps",
            "batch_size",
            "log_every",
            "checkpoint_every",
            "keep_checkpoints",
        ):
            v = getattr(self, name)
            _check(
                is_int(v, 1),
                f"train.{name} must be >= 1, got {v}",
            )
        _check(
            is_number(self.lr) and self.lr > 0,
            f"train.lr must be > 0 and finite, got {self.lr!r}",
        )
        _check(
            is_number(self.weight_decay) and self.weight_decay >= 0,
            f"train.weight_decay must be >= 0 and finite, got {self.weight_decay!r}",
        )
        _check(
            is_number(self.adam_b2) and 0.0 < self.adam_b2 < 1.0,
            "train.adam_b2 must be in (0, 1) (Adam's second-moment decay: "
            f"0.999 by default, 0.99 in the AD-ε reference), got {self.adam_b2!r}",
        )
        _check(
            self.warmup_steps is None or is_int(self.warmup_steps, 0),
            f"train.warmup_steps must be >= 0 or None, got {self.warmup_steps!r}",
        )
        _check(
            self.warmup_steps is None or self.warmup_steps <= self.steps,
            f"train.warmup_steps must be <= train.steps={self.steps} (the "
            f"learning rate would never leave its warm-up), got {self.warmup_steps}",
        )
        _check(
            is_number(self.warmup_fraction) and 0.0 <= self.warmup_fraction <= 1.0,
            f"train.warmup_fraction must be in [0, 1], got {self.warmup_fraction!r}",
        )
        _check(
            is_int(self.max_warmup_steps, 0),
            f"train.max_warmup_steps must be >= 0, got {self.max_warmup_steps!r}",
        )
        _check(
            self.grad_clip is None
            or (is_number(self.grad_clip) and self.grad_clip > 0),
            "train.grad_clip must be > 0 and finite, or None (no clipping), got "
            f"{self.grad_clip!r}",
        )
        _check(
            is_number(self.cosine_end) and 0.0 <= self.cosine_end <= 1.0,
            f"train.cosine_end must be in [0, 1], got {self.cosine_end!r}",
        )
        _check(
            is_int(self.seed, 0),
            f"train.seed must be an integer >= 0, got {self.seed!r}",
        )
        _check(
            self.steps_per_call is None or is_int(self.steps_per_call, 1),
            "train.steps_per_call must be an integer >= 1 or None (per device), "
            f"got {self.steps_per_call!r}",
        )
        _check(
            self.schedule_steps is None or is_int(self.schedule_steps, 1),
            "train.schedule_steps must be an integer >= 1 or None (train.steps), "
            f"got {self.schedule_steps!r}",
        )
        _check(
            self.schedule in SCHEDULES,
            f"train.schedule must be one of {SCHEDULES}, got {self.schedule!r}",
        )

    @property
    def schedule_length(self) -> int:
        """The steps the learning-rate schedule spans: ``schedule_steps``,
        else ``steps``."""
        return self.steps if self.schedule_steps is None else self.schedule_steps

    @property
    def warmup(self) -> int:
        """Warm-up steps: ``warmup_steps``, else derived from the schedule's
        length."""
        if self.warmup_steps is not None:
            return self.warmup_steps
        length = self.schedule_length
        return min(self.max_warmup_steps, int(self.warmup_fraction * length))


#: updates per call when ``train.steps_per_call`` is unset, by JAX platform
DEFAULT_STEPS_PER_CALL = {"cpu": 100, "gpu": 100, "tpu": 100}


def steps_per_call(train: TrainConfig, platform: str) -> int:
    """Updates per jitted call: ``train.steps_per_call``, else by platform.

    How the default is chosen: a call costs a fixed ``c`` beyond its
    updates (dispatch of the state's leaves, the loop's entry, one transfer
    of metrics), so ``K`` updates of ``u`` each spend ``c / (K u)``
    outside the updates. ``K`` is a round number that keeps this near 1-2%
    on the presets a platform runs while a call still ends within seconds
    (the bar moves, Ctrl-C answers). On a 2-core CPU
    (``benchmarks/host_bound.py``, 2026-11-30, with the ``agentrl``
    command's malloc setting, :mod:`agentrl.host_memory`): ``c`` ~2.5 ms
    against ``u`` ~1.5-2.5 ms at the smoke presets' shapes, so 10 per call
    spent ~10% there and 100 spends ~1-2%; at the cpu presets' (``u``
    ~40 ms) both are small. Without that setting a call at the cpu presets'
    shapes also faults its temporaries in afresh (~15,600 page faults, ~25
    ms a call), which 100 per call spreads too. On a GPU ``u`` is about a
    millisecond at the gpu presets and ``c`` a few (dispatch of a few
    hundred leaves): 100, not yet measured there (issue 34's device check).
    Calls are cut at log and checkpoint steps whatever ``K`` is. Unknown
    platforms get the GPU value.
    """
    if train.steps_per_call is not None:
        return train.steps_per_call
    return DEFAULT_STEPS_PER_CALL.get(platform, DEFAULT_STEPS_PER_CALL["gpu"])


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Online in-context evaluation on held-out tasks.

    ``acting`` is the acting rule (:mod:`agentrl.agents.acting`):
    ``"sample"`` at ``temperature``, ``"greedy"`` (argmax; over ``Box``
    actions the mean), or ``"sample_then_greedy"`` (sample until a task's
    first positive reward, then greedy), over discrete and ``Box`` actions.

    Attributes:
      num_tasks: held-out tasks evaluated.
      validation_tasks: validation tasks the protocol's choices are made
        on (acting rule, checkpoint); ``None``: ``num_tasks``. More than the
        test's count where the family has them: 16 pairs could not tell
        acting rules apart whose test results differed by 0.2 (RA-DT on
        Key-to-Door, docs/results.md).
      num_episodes: episodes per task, acted in one context.
      acting: the acting rule: sample, greedy or sample_then_greedy.
      temperature: sampling temperature of the sampling rules.
      seed: seed of the evaluation tasks and actions.
    """

    num_tasks: int = 16
    validation_tasks: int | None = None
    num_episodes: int = 20
    acting: str = "sample"
    temperature: float = 1.0
    seed: int = 1234

    def __post_init__(self):
        for name in ("num_tasks", "num_episodes"):
            v = getattr(self, name)
            _check(
                is_int(v, 1),
                f"eval.{name} must be >= 1, got {v}",
            )
        _check(
            self.validation_tasks is None or is_int(self.validation_tasks, 1),
            "eval.validation_tasks must be an integer >= 1 or None, got "
            f"{self.validation_tasks!r}",
        )
        _check(
            is_number(self.temperature) and self.temperature > 0,
            f"eval.temperature must be > 0 and finite, got {self.temperature!r}",
        )
        _check(
            self.acting in ACTING_RULES,
            f"eval.acting must be one of {ACTING_RULES}, got {self.acting!r}",
        )
        _check(
            is_int(self.seed, 0),
            f"eval.seed must be an integer >= 0, got {self.seed!r}",
        )


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """One experiment: data, algorithm, model, optimisation, evaluation.

    Attributes:
      name: the experiment's name (it names the run directory).
      algo: the in-context learner and its hyperparameters; ``--algo NAME``
        swaps in another one (keeping the values set for shared fields).
      data: which learning histories to train on.
      model: the transformer's shape.
      train: optimisation and bookkeeping.
      eval: in-context evaluation on held-out tasks.
    """

    name: str = "experiment"
    algo: Algorithm = algos.AD()
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    train: TrainConfig = TrainConfig()
    eval: EvalConfig = EvalConfig()

    def __post_init__(self):
        _check(
            isinstance(self.name, str)
            and NAME_PATTERN.fullmatch(self.name) is not None,
            "name must be letters, digits, '_', '.' or '-' (it names the run "
            f"directory), starting with a letter or digit, got {self.name!r}",
        )
        for part, cls in (
            ("data", DataConfig),
            ("model", ModelConfig),
            ("train", TrainConfig),
            ("eval", EvalConfig),
        ):
            _check(
                isinstance(getattr(self, part), cls),
                f"{part} must be a {cls.__name__}, got {getattr(self, part)!r}",
            )
        _check(
            isinstance(self.algo, Algorithm),
            f"algo must be an algorithm (one of {tuple(algos.names())}), "
            f"got {self.algo!r}",
        )
        self.algo.check(self)


def _as_tuple(value: Any) -> Any:
    return tuple(_as_tuple(v) for v in value) if isinstance(value, list) else value


def data_used(data: DataConfig, dataset: Any) -> DataConfig:
    """``data`` as the dataset at ``data.path`` was made (its ``agentrl.json``).

    A run trained on a given dataset records that dataset's source, settings,
    seed, numbers of tasks and episodes and split fraction, not the preset's
    (which generated nothing). ``data`` unchanged without ``data.path``.
    """
    if not data.path or dataset is None:
        return data
    m = dataset.metadata
    settings = m["source"]["settings"]
    fraction = (m.get("split") or {}).get("train_fraction", data.split_fraction)
    return dataclasses.replace(
        data,
        source=m["source"]["name"],
        source_args=tuple((k, _as_tuple(v)) for k, v in sorted(settings.items())),
        num_tasks=int(m["num_tasks"]),
        num_train_tasks=m.get("num_train_tasks"),
        num_episodes=int(m["num_episodes"]),
        seed=int(m["seed"]),
        split_fraction=float(fraction),
    )


def complete_config(
    config: ExperimentConfig, env: Any, dataset: Any | None = None
) -> ExperimentConfig:
    """``config`` with every derived field filled (see the module docstring).

    ``dataset``: the run's training data, for data-derived algorithm fields
    (DT's target return) and, for a dataset given by ``data.path``, the
    data fields it was made with (:func:`data_used`); ``None`` leaves those
    unset.
    """
    algo = config.algo.resolve(env, dataset)
    model = complete_model_config(config.model, env, algo)
    data = data_used(config.data, dataset)
    return dataclasses.replace(config, algo=algo, model=model, data=data)
