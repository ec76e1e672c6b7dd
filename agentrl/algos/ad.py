"""Algorithm Distillation (Laskin et al., 2023) and AD-ε (noise distillation).

AD trains a causal transformer to predict the source algorithm's next action
across episodes of a learning history: the window holds ``context_episodes``
episodes' worth of consecutive steps of one task, starting at any step
(``window_start="any"``, as the reference code; ``"episode"``: at episode
starts only), ``episode_stride`` k takes every k-th episode, to distill a
learner k times faster than its source, and the loss is the action
likelihood at every step of the window. In
context it acts with a rolling KV cache over its own history, one token per
step, across episode boundaries (``eval_context="window"``: the reference
code's reading, the last window re-encoded every step).

AD-ε is the same model, loss and acting on histories made by an oracle whose
ε-greedy noise is annealed across episodes (the ``noisy_oracle`` source);
only the data differ, so it is a subclass that changes nothing but its name.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from agentrl.agents.rolling import rolling_cache_agent
from agentrl.agents.sorted_episodes import sorted_episodes_agent
from agentrl.agents.window import window_agent
from agentrl.algos.base import Algorithm, check, register_algorithm
from agentrl.algos.losses import action_loss
from agentrl.checks import is_int
from agentrl.data.samplers import EPISODE_WINDOWS, ADSampler
from agentrl.envs.base import env_horizon

#: where a training window may start (``agentrl.data.samplers.WINDOW_STARTS``)
WINDOW_STARTS = ("any", "episode")
#: what the model reads when it acts: its last steps on a rolling KV cache, its
#: last window re-encoded each step (:mod:`agentrl.agents.window`), or its best
#: past episodes sorted by return (:mod:`agentrl.agents.sorted_episodes`)
EVAL_CONTEXTS = ("rolling", "window", "sorted_episodes")


def ad_loss(model: Any, batch: dict[str, jax.Array], *, deterministic: bool = False):
    """Next-action loss over AD windows.

    Args:
      model: a :class:`agentrl.models.DecisionModel` with a step/sar layout.
      batch: ``obs [B, T, ...]``, ``action [B, T, ...]``, ``reward [B, T]``,
        optional ``mask [B, T]`` (False on padding, which is not scored).

    Returns:
      ``(loss, metrics, output)``.
    """
    out = model(
        batch["obs"], batch["action"], batch["reward"], deterministic=deterministic
    )
    loss, metrics = action_loss(
        model.config.head, out, batch["action"], batch.get("mask")
    )
    return loss, metrics, out


def check_positive(owner: str, **values: Any) -> None:
    """Each value must be an int >= 1 (the message names ``owner.field``)."""
    for name, v in values.items():
        check(is_int(v, 1), f"{owner}.{name} must be >= 1, got {v!r}")


def check_episodes_fit(config: Any, prefix: str, episodes: int, stride: int) -> None:
    """A window of ``episodes`` whole episodes, ``stride`` apart, must fit in the
    histories the run generates (``data.num_episodes``; a dataset given by
    ``data.path`` is checked when its sampler is built)."""
    span = (episodes - 1) * stride + 1
    check(
        bool(config.data.path) or span <= config.data.num_episodes,
        f"{prefix}.context_episodes={episodes} (with {prefix}.episode_stride="
        f"{stride}) spans {span} episodes of a history, more than "
        f"data.num_episodes={config.data.num_episodes}",
    )


@register_algorithm
@dataclasses.dataclass(frozen=True)
class AD(Algorithm):
    """Algorithm Distillation.

    Attributes:
      context_episodes: whole episodes per training window; the model's
        attention window (``model.max_steps``, when unset) is this many
        episodes of the environment's horizon.
      episode_stride: the window takes every k-th episode of a history.
      window_start: ``"any"`` (default, as the AD-ε reference code): a
        training window starts at any step of a history, as the rolling
        context at evaluation does (it holds the last
        ``context_episodes * horizon`` steps, which begin mid-episode as
        often as not); ``"episode"``: only at an episode's first step (the
        window is then whole episodes, padded after short ones).
      episode_window: which episodes a window holds: ``"consecutive"``
        (default, AD's), or ``context_episodes`` distinct episodes of the
        history drawn uniformly, in history order (``"subset"``) or by
        ascending return (``"subset_by_return"``: T2MIR-AD's MuJoCo data
        loader, which sorts each task's episodes by return and draws sorted
        episode ids); both need ``window_start="episode"`` and stride 1.
      eval_context: how it acts: ``"rolling"`` (default): a KV cache
        over its last ``context_episodes * horizon`` steps, one token a
        step; ``"window"`` (the AD-ε reference code's): those steps
        re-encoded from scratch every step, each prediction seeing what a
        training window shows (:mod:`agentrl.agents.window`); or
        ``"sorted_episodes"`` (T2MIR-AD's evaluation on MuJoCo): its
        ``context_episodes - 1`` best past episodes by ascending return,
        then the current one (fixed-length episodes, "step" token layout).
    """

    name = "ad"
    description = "Algorithm Distillation: imitate a learner across episodes"

    context_episodes: int = 4
    episode_stride: int = 1
    window_start: str = "any"
    episode_window: str = "consecutive"
    eval_context: str = "rolling"

    def __post_init__(self):
        check_positive(
            "algo",
            context_episodes=self.context_episodes,
            episode_stride=self.episode_stride,
        )
        check(
            self.window_start in WINDOW_STARTS,
            f"algo.window_start must be one of {WINDOW_STARTS}, "
            f"got {self.window_start!r}",
        )
        check(
            self.episode_window in EPISODE_WINDOWS,
            f"algo.episode_window must be one of {EPISODE_WINDOWS}, "
            f"got {self.episode_window!r}",
        )
        check(
            self.eval_context in EVAL_CONTEXTS,
            f"algo.eval_context must be one of {EVAL_CONTEXTS}, "
            f"got {self.eval_context!r}",
        )
        whole = self.window_start == "episode" and self.episode_stride == 1
        check(
            self.episode_window == "consecutive" or whole,
            f"algo.episode_window={self.episode_window!r} needs "
            "algo.window_start='episode' and algo.episode_stride=1 (its "
            f"windows are whole episodes), got {self.window_start!r} and "
            f"{self.episode_stride}",
        )

    def check(self, config: Any, prefix: str = "algo") -> None:
        if prefix == "algo":
            super().check(config)
        check(  # its cache is prefilled, which reads one token per step
            self.eval_context != "sorted_episodes"
            or config.model.token_layout == "step",
            f"{prefix}.eval_context='sorted_episodes' needs model.token_layout="
            f"'step', got {config.model.token_layout!r}",
        )
        check_episodes_fit(config, prefix, self.context_episodes, self.episode_stride)

    def context_steps(self, env: Any) -> int:
        return self.context_episodes * env_horizon(env)

    def make_sampler(self, dataset: Any, train: Any, *, paired: bool = False) -> Any:
        return ADSampler(
            dataset,
            train.batch_size,
            num_episodes=self.context_episodes,
            episode_stride=self.episode_stride,
            window_start=self.window_start,
            episode_window=self.episode_window,
            paired=paired,
            seed=train.seed,
        )

    def loss(self, model, batch, aux, hparams, *, env, deterministic=False):
        return ad_loss(model, batch, deterministic=deterministic)

    def make_agent(self, model: Any, env: Any, num_steps: int, config: Any) -> Any:
        if self.eval_context == "sorted_episodes":
            return sorted_episodes_agent(model, env, config, self.context_episodes)
        if self.eval_context == "window":
            return window_agent(model, env, config)
        return rolling_cache_agent(model, env, config)


@register_algorithm
@dataclasses.dataclass(frozen=True)
class ADEps(AD):
    """AD-ε: AD on noise-curriculum histories (``noisy_oracle`` source)."""

    name = "ad_eps"
    description = "AD-eps: AD on histories of an oracle with annealed noise"
