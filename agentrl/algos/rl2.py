"""RL² (Duan et al., 2016; Wang et al., 2016): a recurrent learner trained by RL.

A GRU policy is trained by PPO over multi-episode trials on many tasks: its
input is the observation with the previous action, the previous reward and
a new-episode flag; its hidden state is kept across the episodes of a trial
and reset between trials, and advantages run across episode boundaries, so
what maximises the trial's return is to explore early and exploit what was
found later: the weights learn a learning algorithm, the hidden state runs
it. The trainer (:mod:`agentrl.online.ppo`) is one jitted program; this
module only maps the experiment's config onto it and acts in context.

Fields (``algo.*``): the trial (``trial_episodes``), the PPO loop
(``num_envs`` parallel trials, ``rollout_steps`` per update, ``num_epochs``
x ``num_minibatches``), the core (``hidden`` GRU units, ``embed`` input
units, ``obs_encoding``: ``"onehot"`` or ``"grid"``, a discrete grid
cell as row and column, see :func:`agentrl.rl.cores.grid_features`)
and the traced PPO coefficients (``gamma``, ``gae_lambda``,
``clip_eps``, ``ent_coef``, ``vf_coef``, ``reward_scale``: the learner's
rewards are multiplied by it, to keep the value loss of long trials from
swamping the policy's gradient). From ``train``: ``steps`` is the
number of PPO updates (rollouts), ``lr``/``weight_decay`` (traced),
``schedule``/``warmup``, ``grad_clip`` and ``seed``. ``data`` gives the
environment and the task split (training tasks are the split's train ids for
finite task spaces, so evaluation's held-out goals were never trained on;
fresh ``sample_params`` draws otherwise). ``data.source`` and
``data.num_episodes`` are unused (there is no dataset); ``model`` is unused
(the core is the GRU described by ``hidden``/``embed``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentrl.agents.acting import acting_agent
from agentrl.agents.model_agents import split_model
from agentrl.algos.ad import check_positive
from agentrl.algos.base import Algorithm, check, register_algorithm
from agentrl.checks import is_number
from agentrl.configtools import traced
from agentrl.envs.base import env_horizon
from agentrl.online.agent import RL2Agent
from agentrl.online.program import gru_core, gru_program


def check_finite(name: str, value: Any) -> None:
    """``value`` a finite number, else a ``ValueError`` naming ``name``."""
    check(is_number(value), f"{name} must be a finite number, got {value!r}")


def check_ppo_coefficients(algo: Any) -> None:
    """PPO's traced coefficients of an online learner: ranges, named ``algo.*``."""
    for name in ("gamma", "gae_lambda"):
        value = getattr(algo, name)
        check(
            is_number(value) and 0.0 <= value <= 1.0,
            f"algo.{name} must be in [0, 1], got {value!r}",
        )
    for name in ("clip_eps", "vf_coef", "reward_scale"):
        value = getattr(algo, name)
        check(
            is_number(value) and value > 0,
            f"algo.{name} must be > 0 and finite, got {value!r}",
        )
    check(
        is_number(algo.ent_coef) and algo.ent_coef >= 0,
        f"algo.ent_coef must be >= 0 and finite, got {algo.ent_coef!r}",
    )


def check_ppo_trials(algo: Any, **sizes: int) -> None:
    """The checks every PPO-over-trials learner shares, named ``algo.*``.

    ``trial_episodes``, ``num_envs``, ``num_epochs``, ``num_minibatches`` and
    the learner's own ``sizes`` must be ints >= 1, the minibatches whole env
    streams, and the traced coefficients in range
    (:func:`check_ppo_coefficients`).
    """
    check_positive(
        "algo",
        trial_episodes=algo.trial_episodes,
        num_envs=algo.num_envs,
        num_epochs=algo.num_epochs,
        num_minibatches=algo.num_minibatches,
        **sizes,
    )
    check(
        algo.num_envs % algo.num_minibatches == 0,
        f"algo.num_minibatches={algo.num_minibatches} must divide "
        f"algo.num_envs={algo.num_envs} (minibatches are whole env streams)",
    )
    check_ppo_coefficients(algo)


@register_algorithm
@dataclasses.dataclass(frozen=True)
class RL2(Algorithm):
    """RL² with a GRU core trained by PPO over trials (see the module docstring).

    Attributes:
      trial_episodes: episodes per trial (the hidden state is kept across
        them and reset between trials).
      num_envs: parallel trials per PPO update.
      rollout_steps: environment steps per trial stream per update.
      num_epochs: PPO epochs per update.
      num_minibatches: minibatches per epoch (whole env streams each).
      hidden: GRU units.
      embed: input embedding units.
      init_log_std: initial log standard deviation (continuous actions).
      obs_encoding: "onehot" or "grid" (a grid cell as row and column).
      gamma: discount factor.
      gae_lambda: GAE's lambda; advantages run across the episodes of a
        trial and stop only at its end.
      clip_eps: PPO's ratio clipping.
      ent_coef: entropy bonus weight.
      vf_coef: value-loss weight.
      reward_scale: the learner's rewards are multiplied by it (keeps the
        value loss of long trials from swamping the policy gradient).
    """

    name = "rl2"
    description = "RL²: a GRU policy trained by PPO across multi-episode trials"
    trains_online = True

    trial_episodes: int = 1
    num_envs: int = 64
    rollout_steps: int = 128
    num_epochs: int = 4
    num_minibatches: int = 4
    hidden: int = 128
    embed: int = 64
    init_log_std: float = -0.5
    obs_encoding: str = "onehot"
    gamma: float = traced(0.99)
    gae_lambda: float = traced(0.95)
    clip_eps: float = traced(0.2)
    ent_coef: float = traced(0.01)
    vf_coef: float = traced(0.5)
    reward_scale: float = traced(1.0)

    def __post_init__(self):
        check_ppo_trials(
            self,
            rollout_steps=self.rollout_steps,
            hidden=self.hidden,
            embed=self.embed,
        )
        check(
            self.obs_encoding in ("onehot", "grid"),
            f"algo.obs_encoding must be 'onehot' or 'grid', got {self.obs_encoding!r}",
        )
        check_finite("algo.init_log_std", self.init_log_std)

    def check(self, config: Any) -> None:
        pass  # the decision model's layout and MoE settings are not used

    def grid_size(self, env: Any) -> int | None:
        """The grid side for ``obs_encoding="grid"`` (``None`` for one-hot)."""
        if self.obs_encoding == "onehot":
            return None
        size = getattr(env, "size", None)
        space = env.observation_space(env.default_params)
        check(
            isinstance(size, int) and hasattr(space, "n"),
            "algo.obs_encoding='grid' needs a grid environment with discrete cell "
            f"observations and a 'size' (Dark Room, Key-to-Door), got {env!r}",
        )
        return size

    def context_steps(self, env: Any) -> int:
        return self.trial_episodes * env_horizon(env)

    # ----- training online ---------------------------------------------------
    def make_online_train(self, config: Any, env: Any):
        return gru_program(config, env)

    def build_core(self, env: Any):
        """The :class:`~agentrl.rl.cores.GRUCore` of this config on ``env``."""
        return gru_core(self, env)

    # ----- acting in context ---------------------------------------------------
    def make_agent(self, model: Any, env: Any, num_steps: int, config: Any) -> Any:
        weights = split_model(model).get()
        core = self.build_core(env)
        return acting_agent(
            lambda greedy: RL2Agent(
                weights,
                core,
                env,
                greedy=greedy,
                temperature=config.eval.temperature,
                grid_size=self.grid_size(env),
            ),
            config.eval.acting,
        )
