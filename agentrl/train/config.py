"""Experiment configuration: frozen dataclasses, validated before compiling.

An experiment (``experiments/<name>.py``) defines presets ``smoke``, ``cpu``
and ``full`` returning an :class:`ExperimentConfig`. The model's
observation/action fields are filled from the environment at run time
(:func:`complete_model_config`), so presets name only the architecture.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentrl.models import ModelConfig

ALGOS = ("ad", "ad_eps", "dpt", "dt", "t2mir_ad", "t2mir_dpt")
SCHEDULES = ("cosine", "constant")


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise ValueError(message)


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Which histories to train on (generated into the run if ``path`` is empty).

    ``env_args``/``source_args`` are ``((name, value), ...)`` pairs so the
    config stays hashable. Training tasks come from the env's deterministic
    split (``split_fraction``, ``split_seed``) when its task space is finite;
    ``num_tasks`` histories are drawn from them (cycling through the ids).
    """

    env: str = "darkroom"
    env_args: tuple[tuple[str, Any], ...] = ()
    source: str = "q_learning"
    source_args: tuple[tuple[str, Any], ...] = ()
    num_tasks: int = 64
    num_episodes: int = 100
    split_fraction: float = 0.8
    seed: int = 0
    path: str = ""

    def __post_init__(self):
        _check(
            self.num_tasks >= 1, f"data.num_tasks must be >= 1, got {self.num_tasks}"
        )
        _check(
            self.num_episodes >= 1,
            f"data.num_episodes must be >= 1, got {self.num_episodes}",
        )
        _check(
            0.0 < self.split_fraction < 1.0,
            f"data.split_fraction must be in (0, 1), got {self.split_fraction}",
        )


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Optimisation and bookkeeping.

    ``context_episodes`` (AD) sets the window to that many whole episodes,
    ``episode_stride`` (AD) apart in the history (1: consecutive; k: every
    k-th episode, to distill a learner k times faster than the source);
    ``context_size`` (DPT) is the size of the in-context transition set.
    """

    steps: int = 1000
    batch_size: int = 32
    lr: float = 3e-4
    weight_decay: float = 1e-4
    warmup_steps: int = 100
    schedule: str = "cosine"
    grad_clip: float = 1.0
    seed: int = 0
    context_episodes: int = 4
    episode_stride: int = 1
    context_size: int = 20
    log_every: int = 10
    checkpoint_every: int = 200
    keep_checkpoints: int = 3
    ema_tau: float = 0.005

    def __post_init__(self):
        for name in (
            "steps",
            "batch_size",
            "context_episodes",
            "episode_stride",
            "context_size",
        ):
            v = getattr(self, name)
            _check(isinstance(v, int) and v >= 1, f"train.{name} must be >= 1, got {v}")
        for name in ("log_every", "checkpoint_every", "keep_checkpoints"):
            v = getattr(self, name)
            _check(isinstance(v, int) and v >= 1, f"train.{name} must be >= 1, got {v}")
        _check(self.lr > 0, f"train.lr must be > 0, got {self.lr}")
        _check(
            self.weight_decay >= 0,
            f"train.weight_decay must be >= 0, got {self.weight_decay}",
        )
        _check(
            self.warmup_steps >= 0,
            f"train.warmup_steps must be >= 0, got {self.warmup_steps}",
        )
        _check(self.grad_clip > 0, f"train.grad_clip must be > 0, got {self.grad_clip}")
        _check(
            0 < self.ema_tau <= 1,
            f"train.ema_tau must be in (0, 1], got {self.ema_tau}",
        )
        _check(
            self.schedule in SCHEDULES,
            f"train.schedule must be one of {SCHEDULES}, got {self.schedule!r}",
        )


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Online in-context evaluation on held-out tasks."""

    num_tasks: int = 16
    num_episodes: int = 20
    greedy: bool = False
    seed: int = 1234


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """One experiment: data, model, algorithm, optimisation, evaluation."""

    name: str = "experiment"
    algo: str = "ad"
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    train: TrainConfig = TrainConfig()
    eval: EvalConfig = EvalConfig()

    def __post_init__(self):
        _check(self.algo in ALGOS, f"algo must be one of {ALGOS}, got {self.algo!r}")
        wants_moe = self.algo.startswith("t2mir")
        _check(
            wants_moe == bool(self.model.moe_layers),
            f"model.moe_layers must be {'non-empty' if wants_moe else 'empty'} "
            f"for algo {self.algo!r}, got {self.model.moe_layers!r}",
        )
        is_dpt = self.algo in ("dpt", "t2mir_dpt")
        _check(
            is_dpt == (self.model.token_layout == "transition"),
            f"model.token_layout must be {'transition' if is_dpt else 'step or sar'} "
            f"for algo {self.algo!r}, got {self.model.token_layout!r}",
        )
        _check(
            self.train.episode_stride == 1 or self.algo in ("ad", "ad_eps", "t2mir_ad"),
            "train.episode_stride must be 1 for algo "
            f"{self.algo!r} (strided windows are for AD, AD-eps and T2MIR-AD), "
            f"got {self.train.episode_stride}",
        )
        if self.algo.startswith("t2mir"):
            _check(
                self.train.batch_size % 2 == 0,
                "train.batch_size must be even for T2MIR (pairs of segments), "
                f"got {self.train.batch_size}",
            )


def complete_model_config(config: ModelConfig, env: Any, algo: str) -> ModelConfig:
    """Fill obs/action kinds and sizes from ``env``'s spaces.

    DT conditions on return-to-go by appending it to a one-hot (or vector)
    observation, so its observation is always continuous.
    """
    params = env.default_params
    obs_space, act_space = env.observation_space(params), env.action_space(params)
    discrete_obs = hasattr(obs_space, "n")
    if discrete_obs:
        obs_kind, obs_size = "discrete", int(obs_space.n)
    else:
        obs_kind, obs_size = (
            "continuous",
            int(obs_space.shape[-1] if obs_space.shape else 1),
        )
    if algo == "dt":
        obs_kind, obs_size = "continuous", obs_size + 1
    if hasattr(act_space, "n"):
        action = {
            "action_kind": "discrete",
            "action_size": int(act_space.n),
            "head": "categorical",
        }
    else:
        head = config.head if config.head != "categorical" else "gaussian"
        action = {
            "action_kind": "continuous",
            "action_size": int(act_space.shape[-1]),
            "head": head,
        }
    grid = {}
    if config.obs_encoding == "grid":
        size = getattr(env, "size", None)
        if obs_kind != "discrete" or not isinstance(size, int):
            raise ValueError(
                "model.obs_encoding='grid' needs a grid environment with discrete "
                f"cell observations and a 'size' (Dark Room, Key-to-Door), got {env!r}"
            )
        grid = {"grid_size": size}
    return dataclasses.replace(
        config, obs_kind=obs_kind, obs_size=obs_size, **action, **grid
    )
