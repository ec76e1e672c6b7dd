"""Transformer PPO over trials (ReLIC-style in-context RL), trained online.

The causal transformer of :mod:`agentrl.models` (``model.*``, token layout
``"step"``) is trained by PPO across trials of ``trial_episodes`` episodes
of one task: it acts with its KV cache step by step, the context running
over the trial's episodes, and learns from the whole trial's tokens in one
forward pass; ``update_every = K`` turns on ReLIC's partial updates (a PPO
update every K steps of the trial, the context carried on with the new
weights; ``0``: once per trial), and ``full_update`` its full update (the
trial's last update over all its steps). The trainer is
:class:`agentrl.online.transformer.TransformerPPO`; evaluation acts exactly
like AD (rolling KV cache over its own history, across episodes), since the
model's input and token layout are AD's.

Fields as :class:`agentrl.algos.RL2` (``trial_episodes``, ``num_envs``,
``num_epochs``, ``num_minibatches``, traced PPO coefficients and
``reward_scale``), plus ``update_every`` and ``advantage_scope``: where
GAE's advantages stop. ``"trial"`` (the default): only at the trial's
end, RL²'s objective (exploring in one episode is paid for by the later
ones). ``"episode"``: at every episode's end as well, as ReLIC's PPO
storage computes them (its per-episode ``masks`` in
``relic/trainer/transformer_storage.py`` ``compute_returns``): each step
is credited with its own episode's return, the context still running
across episodes. ``train.steps`` counts trials
(each ``trial_episodes * horizon`` steps in every env, with ``L / K``
updates). The attention window ``model.max_steps`` defaults to the trial's
length (it must cover the trial). Actions: categorical over ``Discrete``
spaces; over ``Box`` spaces a diagonal Gaussian whose mean is the model's
``"mse"`` head (filled in here) and whose state-independent log std starts
at ``init_log_std`` (RL²'s field; see :mod:`agentrl.online.transformer`);
the evaluated policy carries the learned std
(:class:`agentrl.online.transformer.GaussianPolicy`), so ``eval.acting =
"sample"`` draws mean + ``eval.temperature`` x std x N(0, 1) as training
did (at temperature 1) and ``"greedy"`` takes the mean, both clipped to the
box. ReLIC's Sink-KV
attention is ``model.attention_sink = True`` (learned sink key/value per
layer and head, in the actor and the critic), and its positions
``model.positions = "episode"`` (RoPE over the episode's index, a learned
embedding of the step in the episode, the start vector at every episode's
first step; ``model.episode_steps`` is filled with the env's horizon).
A partial update trains its K steps against the fixed cache of the steps
before them, so training memory grows with the cache, not the trial
squared (see :mod:`agentrl.online.transformer`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import agentrl.envs.spaces as spaces
from agentrl.agents.rolling import rolling_cache_agent
from agentrl.algos.base import Algorithm, check, register_algorithm
from agentrl.algos.rl2 import check_finite, check_ppo_trials
from agentrl.checks import is_int, is_number
from agentrl.configtools import traced
from agentrl.envs.base import env_horizon
from agentrl.online.program import transformer_program

#: where transformer PPO's advantages stop (``TransformerPPO.advantage_scope``)
ADVANTAGE_SCOPES = ("trial", "episode")
#: what transformer PPO's learning-rate schedule counts (``lr_clock``)
LR_CLOCKS = ("trial", "env_steps")


@register_algorithm
@dataclasses.dataclass(frozen=True)
class TransformerPPO(Algorithm):
    """A transformer policy trained by PPO over trials (see the module docstring).

    Attributes:
      trial_episodes: episodes per trial (the context is kept across them).
      num_envs: parallel trials per PPO update.
      update_every: ReLIC's partial updates: update the policy every this
        many steps inside a trial, carrying the context (0: once per trial).
      full_update: ReLIC's full update (``full_updates_per_rollout = 1``):
        with partial updates, the trial's last update trains on all its
        steps in one full forward pass instead of on its last chunk (one
        full and ``L / update_every - 1`` partial updates a trial). No
        effect when ``update_every`` is 0 (the one update is the full one).
      normalize_advantages: advantages shifted and scaled to mean 0, std 1
        per minibatch (PureJaxRL's, the default); ReLIC's are not
        (``use_normalized_advantage: False``).
      clip_values: habitat-baselines' clipped value loss, which ReLIC's PPO
        runs (``use_clipped_value_loss``, its default): a step whose value
        has moved by ``clip_eps`` or more from the one its target was
        computed with adds a constant to the value loss, no gradient
        (:func:`agentrl.rl.ppo.clipped_value`). Off by default: the value
        loss is unclipped.
      shuffle_episodes: ReLIC's ``shuffle_old_episodes``: after each partial
        update the trial's complete episodes change places (a random order
        per env) and the trial goes on over them in that order (the cache
        re-encoded, the later updates trained on it). Needs
        ``model.positions="episode"`` (an episode's first token then reads
        no step of another episode). No effect when ``update_every`` is 0.
      num_epochs: PPO epochs per update.
      num_minibatches: minibatches per epoch (optimizer steps).
      summed_minibatches: ReLIC's gradient accumulation
        (``grad_accum_mini_batches``): each step's gradient is the sum of
        the mean-loss gradients of this many equal parts of its minibatch,
        i.e. this many times the minibatch mean's, clipped
        (``train.grad_clip``) and fed to Adam as such. ReLIC's
        ``num_mini_batch`` is ``num_minibatches`` times it. 1 (the
        default): the mean's gradient.
      lr_clock: what the learning rate's schedule counts. ``"trial"`` (the
        default): trials, one rate a trial (``train.schedule`` over
        ``train.steps``, ``train.warmup`` of them). ``"env_steps"``: ReLIC's
        clock, the rate recomputed before every update (partial and full)
        from the env steps of all envs counted so far (ReLIC's counter lags
        an update behind:
        :meth:`agentrl.online.transformer.TransformerPPO.lr_count`): a
        linear warm-up from ``lr_warmup_start`` of the rate over
        ``lr_warmup_env_steps`` env steps, then ``train.schedule`` (its
        cosine to ``train.cosine_end`` of the rate) over the run's env
        steps after it (ReLIC's ``LinearLR`` then ``CosineAnnealingLR``,
        ``T_max`` its ``total_num_steps``); ``train.warmup`` must then be 0.
      lr_warmup_env_steps: ``lr_clock="env_steps"``'s warm-up, in env steps
        (ReLIC's Dark Room ``warmup_total_iters``: 10,000); 0: none. Must
        be 0 with ``lr_clock="trial"``.
      lr_warmup_start: the warm-up's first rate, a fraction of the rate in
        ``(0, 1]`` (ReLIC's ``warmup_start_factor``: 1e-3).
      gamma: discount factor.
      gae_lambda: GAE's lambda.
      advantage_scope: where advantages stop: ``"trial"`` (only at the
        trial's end, RL²'s objective) or ``"episode"`` (at every episode's
        end too, ReLIC's).
      clip_eps: PPO's ratio clipping.
      ent_coef: entropy bonus weight.
      vf_coef: value-loss weight.
      reward_scale: the learner's rewards are multiplied by it (keeps the
        value loss of long trials from swamping the policy gradient).
      init_log_std: initial log standard deviation (continuous actions), in
        units of half the action box's width.
    """

    name = "transformer_ppo"
    description = "ReLIC-style transformer PPO across trials (partial updates)"
    trains_online = True
    token_layouts = ("step",)
    episode_positions = True

    trial_episodes: int = 4
    num_envs: int = 64
    update_every: int = 0
    full_update: bool = False
    normalize_advantages: bool = True
    clip_values: bool = False
    shuffle_episodes: bool = False
    num_epochs: int = 4
    num_minibatches: int = 4
    summed_minibatches: int = 1
    lr_clock: str = "trial"
    lr_warmup_env_steps: int = 0
    lr_warmup_start: float = 1e-3
    gamma: float = traced(0.99)
    gae_lambda: float = traced(0.95)
    clip_eps: float = traced(0.2)
    ent_coef: float = traced(0.01)
    vf_coef: float = traced(0.5)
    reward_scale: float = traced(1.0)
    init_log_std: float = -0.5
    advantage_scope: str = "trial"

    def __post_init__(self):
        check_ppo_trials(self)
        check_finite("algo.init_log_std", self.init_log_std)
        check(
            self.advantage_scope in ADVANTAGE_SCOPES,
            f"algo.advantage_scope must be one of {ADVANTAGE_SCOPES}, got "
            f"{self.advantage_scope!r}",
        )
        flags = ("normalize_advantages", "clip_values", "shuffle_episodes")
        for field in ("full_update", *flags):
            value = getattr(self, field)
            check(
                isinstance(value, bool),
                f"algo.{field} must be true or false, got {value!r}",
            )
        check(
            is_int(self.update_every, 0),
            f"algo.update_every must be an int >= 0 (0: once per trial), got "
            f"{self.update_every!r}",
        )
        check(
            is_int(self.summed_minibatches, 1),
            f"algo.summed_minibatches must be an int >= 1 (1: a minibatch's "
            f"mean gradient), got {self.summed_minibatches!r}",
        )
        self._check_lr_clock()

    def _check_lr_clock(self) -> None:
        """The learning-rate clock's fields (see the class docstring)."""
        check(
            self.lr_clock in LR_CLOCKS,
            f"algo.lr_clock must be one of {LR_CLOCKS}, got {self.lr_clock!r}",
        )
        check(
            is_int(self.lr_warmup_env_steps, 0),
            f"algo.lr_warmup_env_steps must be an int >= 0 (0: no warm-up), got "
            f"{self.lr_warmup_env_steps!r}",
        )
        check(
            self.lr_clock == "env_steps" or self.lr_warmup_env_steps == 0,
            "algo.lr_warmup_env_steps counts env steps: it needs "
            f"algo.lr_clock='env_steps', got lr_clock={self.lr_clock!r} (the "
            "trial clock's warm-up is train.warmup_steps)",
        )
        start = self.lr_warmup_start
        check(
            is_number(start) and 0 < start <= 1,
            f"algo.lr_warmup_start must be a number in (0, 1] (the warm-up's "
            f"first rate, a fraction of train.lr), got {start!r}",
        )

    def check(self, config: Any) -> None:
        super().check(config)
        if self.lr_clock == "env_steps":
            check(
                config.train.warmup == 0,
                "algo.lr_clock='env_steps' warms up over algo.lr_warmup_env_steps: "
                f"train.warmup_steps must be 0, got {config.train.warmup}",
            )
        check(
            not self.shuffle_episodes or config.model.positions == "episode",
            "algo.shuffle_episodes needs model.positions='episode' (with token "
            "positions an episode's first token reads the step before it, of "
            f"another episode once shuffled), got {config.model.positions!r}",
        )

    def complete_model(self, model_config: Any, env: Any) -> Any:
        """Continuous actions: the model's ``"mse"`` head is the Gaussian's
        mean; ``model.positions="episode"``: episodes of the env's horizon."""
        if model_config.positions == "episode":
            horizon = env_horizon(env)
            steps = model_config.episode_steps
            check(
                steps in (None, horizon),
                f"model.episode_steps must be {env.name}'s horizon, {horizon} "
                f"(or unset), got {steps!r}",
            )
            model_config = dataclasses.replace(model_config, episode_steps=horizon)
        if spaces.is_discrete(env.action_space(env.default_params)):
            return model_config
        return dataclasses.replace(model_config, head="mse")

    def context_steps(self, env: Any) -> int:
        return self.trial_episodes * env_horizon(env)

    def make_online_train(self, config: Any, env: Any):
        steps = self.context_steps(env)
        check(
            not getattr(env, "episodes_end_early", False),
            f"transformer PPO's trial is algo.trial_episodes x the horizon "
            f"({steps} steps), but {env.name}'s episodes can end early, so a "
            "trial would hold more episodes than that (and be trained and "
            "scored as other trials); train RL² on this family",
        )
        check(
            self.update_every == 0 or steps % self.update_every == 0,
            f"algo.update_every={self.update_every} must divide the trial's "
            f"{steps} steps (algo.trial_episodes x the env's horizon)",
        )
        return transformer_program(config, env)

    def make_agent(self, model: Any, env: Any, num_steps: int, config: Any) -> Any:
        return rolling_cache_agent(model, env, config)
