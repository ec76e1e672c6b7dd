"""AMAGO (Grigsby et al., ICLR 2024): off-policy in-context RL over whole trials.

One causal transformer (``model.*``, token layout ``"step"``) is the shared
sequence model of an actor and an ensemble of critics for several discount
factors at once, trained off-policy from a replay of whole multi-episode
trials kept on the device; collection (one trial per env with the KV cache
and randomised epsilon-greedy) and ``grad_steps`` updates on replayed trials
are one jitted update, vmappable over seeds like RL². The trainer is
:class:`agentrl.online.amago.AmagoTrainer` (its docstring has the losses);
evaluation acts like AD and transformer PPO (rolling KV cache over its own
history), with the acting discount's policy, which is the model's own head.

Fields (``algo.*``): the trial (``trial_episodes``), collection
(``num_envs`` trials per update, ``explore_steps``), replay (``capacity``
trials, ``batch_size`` trials a gradient step, ``grad_steps`` steps an
update), the heads (``gammas`` besides the acting ``gamma``,
``num_critics``, ``critics_in_target``, ``critic_hidden``), AMAGO's
T-Maze exploration window (``explore_window``) and the traced
coefficients (``tau``, ``online_coeff``, ``offline_coeff``,
``critic_coeff``, ``reward_scale``, ``eps_start``, ``eps_end``). From
``train``: ``steps`` counts updates (each ``num_envs`` trials of
``trial_episodes * horizon`` steps), ``lr``/``weight_decay`` (traced),
``schedule``, ``grad_clip``, ``seed``. Discrete actions only; no hindsight
relabeling (Dark Room and the bandits are not goal-conditioned tasks).
Settings and deviations from the reference: ``docs/references.md``
("AMAGO").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from agentrl.agents.rolling import rolling_cache_agent
from agentrl.algos.ad import check_positive
from agentrl.algos.base import Algorithm, check, register_algorithm
from agentrl.checks import is_int, is_number
from agentrl.configtools import traced
from agentrl.envs.base import env_horizon
from agentrl.online.amago import amago_program


def _is_pair(value: Any, element: Callable[[Any], bool]) -> bool:
    """``value`` is a tuple of two items, each passing ``element``."""
    return isinstance(value, tuple) and len(value) == 2 and all(map(element, value))


def _check_discount(name: str, value: Any) -> None:
    check(
        is_number(value) and 0.0 <= value < 1.0,
        f"algo.{name} must be in [0, 1) (the critics predict (1 - gamma) x the "
        f"return), got {value!r}",
    )


@register_algorithm
@dataclasses.dataclass(frozen=True)
class Amago(Algorithm):
    """AMAGO over trials (see the module docstring).

    Attributes:
      trial_episodes: episodes per trial (the context spans the trial).
      num_envs: trials collected per update (one per env).
      capacity: replay size in trials (a ring: the oldest are overwritten).
      batch_size: trials per gradient step.
      grad_steps: gradient steps per update.
      gammas: the extra discounts the actor and critics learn besides
        ``gamma`` (AMAGO's multi-gamma; ``()`` turns it off).
      gamma: the discount whose policy acts (collection and evaluation).
      num_critics: critics in the ensemble.
      critics_in_target: critics drawn (with replacement) for the TD
        target's min (clipped double Q).
      critic_hidden: units of the critics' two hidden layers.
      explore_steps: steps per env over which epsilon anneals.
      tau: target heads' EMA rate per gradient step.
      online_coeff: weight of the policy-improvement term ``-Q(s, pi)``.
      offline_coeff: weight of the filtered BC term.
      critic_coeff: weight of the critic loss.
      reward_scale: rewards are multiplied by it in the TD targets.
      eps_start: epsilon-greedy ceiling at the start, annealed linearly to
        ``eps_end`` (each trial explores with a uniform fraction of it).
      eps_end: epsilon-greedy ceiling after ``explore_steps``.
      explore_window: AMAGO's T-Maze exploration (``TMazeExploration`` in
        its ``examples/04_tmaze.py``): ``(start, end)``; the steps ``t`` of
        an episode with ``start < t < horizon - end`` explore with
        ``0.5 / horizon`` (not randomised) instead of the schedule, which
        then acts on the episode's first and last steps only. ``None``
        (default): the schedule on every step.
      prob_clip: ``(low, high)``: the policy's probabilities clipped to
        ``[low, high]`` and renormalised in training (collection, the actor
        terms, the targets), as AMAGO's ``Discrete`` (its
        ``nets/policy_dists.py``, default ``(0.001, 0.99)``: no action above
        ~99.7% of 4; the gpu / full presets set it); ``None`` (default, the
        policy of every run made before the field existed, so their saved
        configs read back unchanged): the softmax as it is. Evaluation's
        acting rules read the logits unclipped (greedy is the same either
        way).
    """

    name = "amago"
    description = "AMAGO: off-policy multi-gamma transformer actor-critic over trials"
    trains_online = True
    token_layouts = ("step",)

    trial_episodes: int = 4
    num_envs: int = 16
    capacity: int = 2000
    batch_size: int = 24
    grad_steps: int = 16
    gammas: tuple[float, ...] = (0.1, 0.9, 0.95, 0.97, 0.99, 0.995)
    gamma: float = 0.999
    num_critics: int = 4
    critics_in_target: int = 2
    critic_hidden: int = 256
    explore_steps: int = 1_000_000
    tau: float = traced(0.003)
    online_coeff: float = traced(1.0)
    offline_coeff: float = traced(0.1)
    critic_coeff: float = traced(10.0)
    reward_scale: float = traced(10.0)
    eps_start: float = traced(1.0)
    eps_end: float = traced(0.05)
    explore_window: tuple[int, int] | None = None
    prob_clip: tuple[float, float] | None = None

    def __post_init__(self):
        check_positive(
            "algo",
            trial_episodes=self.trial_episodes,
            num_envs=self.num_envs,
            capacity=self.capacity,
            batch_size=self.batch_size,
            grad_steps=self.grad_steps,
            num_critics=self.num_critics,
            critics_in_target=self.critics_in_target,
            critic_hidden=self.critic_hidden,
            explore_steps=self.explore_steps,
        )
        check(
            self.capacity >= self.num_envs,
            f"algo.capacity={self.capacity} must be >= algo.num_envs="
            f"{self.num_envs} (one update's trials must fit the replay)",
        )
        check(
            isinstance(self.gammas, tuple),
            f"algo.gammas must be a tuple of discounts, got {self.gammas!r}",
        )
        window = self.explore_window
        check(
            window is None or (_is_pair(window, is_int) and min(window) >= 0),
            "algo.explore_window must be None or two integers (start, end) >= 0, "
            f"got {window!r}",
        )
        clip = self.prob_clip
        check(
            clip is None
            or (_is_pair(clip, is_number) and 0.0 <= clip[0] < clip[1] <= 1.0),
            "algo.prob_clip must be None or (low, high) with 0 <= low < high <= 1, "
            f"got {clip!r}",
        )
        for i, g in enumerate(self.gammas):
            _check_discount(f"gammas[{i}]", g)
        _check_discount("gamma", self.gamma)
        for name in ("tau", "eps_start", "eps_end"):
            value = getattr(self, name)
            check(
                is_number(value) and 0.0 <= value <= 1.0,
                f"algo.{name} must be in [0, 1], got {value!r}",
            )
        for name in ("online_coeff", "offline_coeff", "critic_coeff"):
            value = getattr(self, name)
            check(
                is_number(value) and value >= 0,
                f"algo.{name} must be >= 0 and finite, got {value!r}",
            )
        check(
            is_number(self.reward_scale) and self.reward_scale > 0,
            f"algo.reward_scale must be > 0 and finite, got {self.reward_scale!r}",
        )

    def context_steps(self, env: Any) -> int:
        return self.trial_episodes * env_horizon(env)

    def make_online_train(self, config: Any, env: Any):
        return amago_program(config, env)

    def make_agent(self, model: Any, env: Any, num_steps: int, config: Any) -> Any:
        return rolling_cache_agent(model, env, config)
