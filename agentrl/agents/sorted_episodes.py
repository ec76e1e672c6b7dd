"""T2MIR-AD's acting on MuJoCo: a context of whole past episodes sorted by return.

T2MIR's evaluation (NJU-RL/T2MIR, ``T2MIR-AD/algorithms/evaluation.py``,
``evaluate_latest`` with ``sorted_by_return=True``) keeps whole episodes,
not a rolling window of steps: after each episode it appends the episode to
its buffer, drops the first (lowest-return) one if the buffer is over its
length, and sorts the kept episodes by ascending return; the model then
acts in the next episode on ``[kept episodes, lowest return first] ++
[the current episode so far]``. Its training windows are the same shape
(``episode_window="subset_by_return"``: distinct episodes of a history by
ascending return), so the model learns to play an episode better than the
ones before it and, at evaluation, reads the best episodes it has played.

Here the agent keeps ``context_episodes - 1`` episodes, so the context
(kept episodes plus the current one) is at most the ``context_episodes``
episodes the model was trained on; T2MIR keeps ``context_episodes`` plus
the current one (its per-episode timestep embeddings allow the longer
context; agentrl's rotary positions inside a ``max_steps`` window would not
have seen those distances).

T2MIR runs one full forward pass over the context every step. The scores
are the same with a KV cache (a causal model's output at a position reads
only the positions before it): at each episode's end the kept episodes,
newly sorted, are prefilled into the cache once
(:meth:`~agentrl.models.transformer.DecisionModel.prefill`, the causal
prefix's work), and each step of the episode then decodes one token. So a
step costs one token's pass over at most ``context_episodes * horizon``
cached steps, not a pass over all of them. Needs the "step" token layout
(``AD.check`` says so before anything compiles).

Episodes must all last the horizon (the MuJoCo families never terminate):
the buffer holds ``horizon`` steps an episode, as T2MIR's. The batched
state's shared counters (kept episodes, step in the episode) are scalars,
as a KV cache's position is, so the prefill at an episode's end is a
``lax.cond`` on a scalar: it (and the buffer's push and sort) runs once an
episode, not every step.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agentrl.agents.acting import acting_agent
from agentrl.agents.agent import Step
from agentrl.agents.model_agents import (
    ScoredAgent,
    action_scores,
    out_shape,
    split_model,
)
from agentrl.envs.base import env_horizon


class SortedEpisodesState(NamedTuple):
    """``kept_*``: the kept episodes ``[B, K, H, ...]`` by ascending return
    (``kept_return [B, K]``), the first ``kept`` slots real; ``obs``,
    ``action``, ``reward``: the current episode ``[B, H, ...]`` up to step
    ``t``; ``cache``: the KV cache of the kept episodes and the current one
    up to step ``t``; ``scores``: the next action's (:func:`action_scores`)."""

    kept_obs: jax.Array
    kept_action: jax.Array
    kept_reward: jax.Array
    kept_return: jax.Array
    kept: jax.Array
    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    t: jax.Array
    cache: Any
    scores: jax.Array


class SortedEpisodesAgent(ScoredAgent):
    """A model acting on its best past episodes, sorted by return (module doc).

    ``start`` must run before the first ``act`` (the driver calls it).
    """

    def __init__(
        self,
        model: Any,
        env: Any,
        context_episodes: int,
        greedy: bool = False,
        temperature: float = 1.0,
    ):
        super().__init__(model, env, greedy, temperature)
        self.horizon = env_horizon(env)
        self.keep = int(context_episodes) - 1
        self.obs_space = env.observation_space(None)

    def init(self, key: jax.Array, params: Any) -> SortedEpisodesState:
        b, k, h = key.shape[0], max(self.keep, 1), self.horizon
        obs, act = self.obs_space, self.space
        return SortedEpisodesState(
            kept_obs=jnp.zeros((b, k, h, *obs.shape), obs.dtype),
            kept_action=jnp.zeros((b, k, h, *act.shape), act.dtype),
            kept_reward=jnp.zeros((b, k, h), jnp.float32),
            kept_return=jnp.zeros((b, k), jnp.float32),
            kept=jnp.zeros((), jnp.int32),
            obs=jnp.zeros((b, h, *obs.shape), obs.dtype),
            action=jnp.zeros((b, h, *act.shape), act.dtype),
            reward=jnp.zeros((b, h), jnp.float32),
            t=jnp.zeros((), jnp.int32),
            cache=self.model.get().init_cache(b, (self.keep + 1) * h),
            scores=jnp.zeros((b, *out_shape(act)), jnp.float32),
        )

    def start(self, state: SortedEpisodesState, obs: Any) -> SortedEpisodesState:
        """Score the first observation ``obs [B, ...]`` (the first token)."""
        state = state._replace(obs=state.obs.at[:, 0].set(obs))
        zero_action, zero_reward = state.action[:, 0], state.reward[:, 0]
        return self._decode(state, obs, zero_action, zero_reward)

    def scores(self, state: SortedEpisodesState, obs, env_state, params):
        return state.scores

    def update(self, state: SortedEpisodesState, step: Step) -> SortedEpisodesState:
        action = jnp.asarray(step.action, self.space.dtype)
        action = action.reshape(state.action.shape[:1] + state.action.shape[2:])
        reward = jnp.asarray(step.reward, jnp.float32).reshape(-1)
        state = state._replace(
            action=state.action.at[:, state.t].set(action),
            reward=state.reward.at[:, state.t].set(reward),
        )
        ended = state.t + 1 >= self.horizon
        # the buffer's push and the prefill run once an episode (a scalar cond)
        state = jax.lax.cond(ended, self._end_episode, lambda s: s, state)
        t = jnp.where(ended, 0, state.t + 1)
        clear = lambda x: jnp.where(ended, jnp.zeros_like(x), x)  # noqa: E731
        # the token before the next step's: this step's, or at an episode's
        # start the last step of the last kept episode (after the sort)
        last = jnp.maximum(state.kept - 1, 0)
        prev_action = jnp.where(ended, state.kept_action[:, last, -1], action)
        prev_reward = jnp.where(ended, state.kept_reward[:, last, -1], reward)
        state = state._replace(
            obs=clear(state.obs).at[:, t].set(step.reset_obs),
            action=clear(state.action),
            reward=clear(state.reward),
            t=t,
        )
        return self._decode(state, step.reset_obs, prev_action, prev_reward)

    def _end_episode(self, state: SortedEpisodesState) -> SortedEpisodesState:
        """The finished episode pushed into the kept ones and the cache
        prefilled with them."""
        if self.keep:
            state = self._push(state)
        return state._replace(cache=self._prefill(state))

    def _push(self, state: SortedEpisodesState) -> SortedEpisodesState:
        """The finished current episode appended to the kept ones, the first
        (lowest-return) one dropped when they are full, then all sorted by
        ascending return, ties in the order kept (the newest last): T2MIR's
        buffer, with a stable sort where T2MIR's ``torch.argsort`` is not."""
        full = state.kept >= self.keep
        slot = jnp.minimum(state.kept, self.keep - 1)
        kept = jnp.minimum(state.kept + 1, self.keep)

        def append(buf, episode):
            buf = jnp.where(full, jnp.roll(buf, -1, axis=1), buf)
            return buf.at[:, slot].set(episode)

        returns = append(state.kept_return, state.reward.sum(1))
        real = jnp.arange(self.keep) < kept
        order = jnp.argsort(jnp.where(real, returns, jnp.inf), axis=1, stable=True)

        def place(buf, episode):
            buf = append(buf, episode)
            idx = order.reshape(order.shape + (1,) * (buf.ndim - 2))
            return jnp.take_along_axis(buf, idx, 1)

        return state._replace(
            kept_obs=place(state.kept_obs, state.obs),
            kept_action=place(state.kept_action, state.action),
            kept_reward=place(state.kept_reward, state.reward),
            kept_return=jnp.take_along_axis(returns, order, 1),
            kept=kept,
        )

    def _prefill(self, state: SortedEpisodesState) -> Any:
        """The cache of the kept episodes alone (``kept * H`` steps), the
        current episode's slots empty, written into ``state.cache``'s buffers."""
        model = self.model.get()
        if not self.keep:  # nothing kept: an empty cache
            empty = jnp.full_like(state.cache.slot_pos, -1)
            return state.cache._replace(
                slot_pos=empty, next_pos=jnp.zeros_like(state.t)
            )

        def flat(kept):  # [B, K, H, ...] -> [B, K * H, ...]
            return kept.reshape((kept.shape[0], -1) + kept.shape[3:])

        _, cache = model.prefill(
            flat(state.kept_obs),
            flat(state.kept_action),
            flat(state.kept_reward),
            state.kept * self.horizon,
            piece=self.horizon,
            cache=state.cache,
        )
        return cache

    def _decode(self, state: SortedEpisodesState, obs, prev_action, prev_reward):
        """``state`` with ``obs [B, ...]`` (after ``prev_*``) decoded into its
        cache and the next action's scores."""
        out, cache = self.model.get().decode(state.cache, obs, prev_action, prev_reward)
        return state._replace(cache=cache, scores=action_scores(out, self.space))


def sorted_episodes_agent(model: Any, env: Any, config: Any, episodes: int) -> Any:
    """The batched agent of a model acting on its ``episodes - 1`` best past
    episodes plus the current one, by ``config.eval.acting`` at
    ``config.eval.temperature``."""
    model = split_model(model)
    return acting_agent(
        lambda greedy: SortedEpisodesAgent(
            model, env, episodes, greedy=greedy, temperature=config.eval.temperature
        ),
        config.eval.acting,
    )
