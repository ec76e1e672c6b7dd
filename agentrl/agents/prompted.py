"""Meta-DT's agent: a prompted, return-conditioned policy acting episode by episode.

The model is :class:`agentrl.models.world_model.MetaDTModel` (a decision
transformer and a context-aware world model); the learner is
:mod:`agentrl.algos.meta_dt`, whose training builds its inputs with the same
functions (:func:`~agentrl.models.world_model.prompt_tokens`,
:func:`~agentrl.models.world_model.episode_tokens`), so the agent acts on
exactly the tokens the policy trains on.

Step ``t`` of an episode: the world model encodes the episode's last ``h``
transitions into ``z_t``; the policy reads the episode's prompt, then the
episode so far (one full pass over ``k + H`` tokens: causal, so the empty
later slots are never seen), conditioned on ``rtg_t = target - rewards so
far``, and scores step ``t``'s action. At an episode's end the best episode
so far (by return) is kept and the next episode's prompt is its segment of
largest world-model error; the first episode on a task has the empty prompt.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agentrl.agents.model_agents import ScoredAgent, action_scores
from agentrl.envs.base import env_horizon
from agentrl.models.world_model import (
    Tokens,
    features,
    gather_steps,
    join,
    prediction_errors,
    prompt_tokens,
    token_obs,
    world_pass,
)


def space_count(space: Any) -> int | None:
    """Number of values of a discrete space (``None``: a vector space)."""
    return int(space.n) if hasattr(space, "n") else None


class MetaDTState(NamedTuple):
    """The agent's buffers, one row per task (``H`` = horizon, ``k`` = prompt).

    The current episode: ``obs [B, H, F]`` features (step ``t`` holds the
    observation to act on), raw ``action [B, H, ...]``, ``reward``, ``rtg``
    ``[B, H]``, ``z [B, H, Z]``; ``t [B]`` its step and ``ret [B]`` its
    return so far. The best finished episode: ``best_obs``, ``best_action``,
    ``best_reward``, ``best_len [B]``, ``best_ret [B]`` (``-inf``: none yet).
    ``prompt``: the current episode's prompt tokens ``[B, k, ...]``.
    """

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    rtg: jax.Array
    z: jax.Array
    t: jax.Array
    ret: jax.Array
    best_obs: jax.Array
    best_action: jax.Array
    best_reward: jax.Array
    best_len: jax.Array
    best_ret: jax.Array
    prompt: Tokens


def _write(buf: jax.Array, t: jax.Array, value: jax.Array) -> jax.Array:
    """``buf [B, H, ...]`` with row b's entry ``t[b]`` set to ``value[b]``
    (nothing written where ``t >= H``)."""
    hit = jnp.arange(buf.shape[1])[None, :] == t[:, None]
    hit = hit.reshape(hit.shape + (1,) * (buf.ndim - 2))
    return jnp.where(hit, value[:, None].astype(buf.dtype), buf)


class MetaDTAgent(ScoredAgent):
    """Meta-DT acting online, batched over tasks (see the module docstring).

    Settings are the learner's: ``target_return`` and ``rtg_scale`` (as
    DT's), ``prompt_length`` k, ``context_horizon`` h, ``state_loss_weight``
    (its weight in the prediction error that picks the prompt), ``grid_size``
    (cell coordinates in the observation features, or ``None``).
    """

    def __init__(
        self,
        model: Any,
        env: Any,
        *,
        target_return: float,
        rtg_scale: float,
        prompt_length: int,
        context_horizon: int,
        state_loss_weight: float = 0.0,
        grid_size: int | None = None,
        greedy: bool = False,
        temperature: float = 1.0,
    ):
        super().__init__(model, env, greedy, temperature)
        self.horizon = env_horizon(env)
        self.num_obs = space_count(env.observation_space(env.default_params))
        self.num_actions = space_count(self.space)
        self.target = float(target_return)
        self.scale = float(rtg_scale)
        self.prompt_length = int(prompt_length)
        self.context_horizon = int(context_horizon)
        self.state_weight = float(state_loss_weight)
        self.grid_size = grid_size

    def _obs_f(self, obs: jax.Array) -> jax.Array:
        return features(obs, self.num_obs, 1, self.grid_size)

    def _act_f(self, action: jax.Array) -> jax.Array:
        return features(action, self.num_actions, 2)

    def init(self, key: jax.Array, params: Any) -> MetaDTState:
        b, h = key.shape[0], self.horizon
        model = self.model.get()
        obs_dim = model.world.encoder.obs.in_features
        context_dim = model.world.encoder.out.out_features
        action = jnp.zeros((b, h, *self.space.shape), self.space.dtype)
        empty = jnp.zeros((b, h), jnp.float32)
        zeros_b = jnp.zeros((b,), jnp.int32)
        state = MetaDTState(
            obs=jnp.zeros((b, h, obs_dim), jnp.float32),
            action=action,
            reward=empty,
            rtg=empty,
            z=jnp.zeros((b, h, context_dim), jnp.float32),
            t=zeros_b,
            ret=jnp.zeros((b,), jnp.float32),
            best_obs=jnp.zeros((b, h, obs_dim), jnp.float32),
            best_action=action,
            best_reward=empty,
            best_len=zeros_b,
            best_ret=jnp.full((b,), -jnp.inf, jnp.float32),
            prompt=None,
        )
        return state._replace(prompt=self._prompt(model, state))

    def _prompt(self, model: Any, state: MetaDTState) -> Tokens:
        """The prompt from the best finished episode (empty while there is none)."""
        length = state.best_len
        valid = jnp.arange(self.horizon)[None, :] < length[:, None]
        wp = world_pass(
            model.world,
            state.best_obs,
            self._act_f(state.best_action),
            state.best_reward,
            valid,
        )
        return prompt_tokens(
            wp,
            state.best_action,
            length,
            length > 0,
            prediction_errors(wp, self.state_weight),
            prompt_length=self.prompt_length,
            context_horizon=self.context_horizon,
            scale=self.scale,
        )

    def _enter(self, model, state: MetaDTState, obs, rtg) -> MetaDTState:
        """Write step ``t``'s observation, return-to-go and ``z_t`` (the
        encoder on the episode's ``h`` transitions before ``t``, zero-padded
        in front, as :func:`~agentrl.models.world_model.history_windows`)."""
        h = model.world.context_horizon
        idx = state.t[:, None] - h + jnp.arange(h)[None, :]  # [B, h]
        keep = idx >= 0

        def before(x):
            x = gather_steps(x, jnp.maximum(idx, 0))
            return jnp.where(keep.reshape(keep.shape + (1,) * (x.ndim - 2)), x, 0)

        z_t = model.world.encoder(
            before(state.obs),
            before(self._act_f(state.action)),
            before(state.reward),
        )
        return state._replace(
            obs=_write(state.obs, state.t, self._obs_f(obs)),
            rtg=_write(state.rtg, state.t, rtg),
            z=_write(state.z, state.t, z_t),
        )

    def start(self, state: MetaDTState, obs: Any) -> MetaDTState:
        model = self.model.get()
        rtg = jnp.full(state.t.shape, self.target, jnp.float32)
        return self._enter(model, state, obs, rtg)

    def scores(self, state: MetaDTState, obs, env_state, params) -> jax.Array:
        """Step ``t``'s action scores (one policy pass): logits ``[B, A]``, or
        mean and log std ``[B, 2, *action_shape]``
        (:func:`~agentrl.agents.model_agents.action_scores`)."""
        model = self.model.get()
        valid = jnp.arange(self.horizon)[None, :] <= state.t[:, None]
        rtg = jnp.where(valid, state.rtg, 0.0)
        tokens = Tokens(
            token_obs(state.obs, rtg, state.z, 0.0, self.scale) * valid[..., None],
            state.action,
            state.reward,
        )
        out = model.policy(*join(state.prompt, tokens), deterministic=True)
        at = (self.prompt_length + state.t)[:, None]
        return gather_steps(action_scores(out, self.space), at)[:, 0]

    def update(self, state: MetaDTState, step: Any) -> MetaDTState:
        model = self.model.get()
        shape = state.t.shape
        action = jnp.asarray(step.action, self.space.dtype).reshape(
            shape + self.space.shape
        )
        reward = jnp.asarray(step.reward, jnp.float32).reshape(shape)
        done = jnp.asarray(step.done).reshape(shape)
        state = state._replace(
            action=_write(state.action, state.t, action),
            reward=_write(state.reward, state.t, reward),
            ret=state.ret + reward,
        )
        state = self._finish(model, state, done)
        rtg_now = gather_steps(
            state.rtg, jnp.minimum(state.t, self.horizon - 1)[:, None]
        )
        rtg = jnp.where(done, self.target, rtg_now[:, 0] - reward)
        nxt = state._replace(t=state.t + 1)
        fresh = self._reset(state)
        state = jax.tree.map(lambda a, b: _pick(done, a, b), fresh, nxt)
        return self._enter(model, state, step.reset_obs, rtg)

    def _finish(self, model, state: MetaDTState, done: jax.Array) -> MetaDTState:
        """At an episode's end: keep it if it is the best, re-select the prompt."""
        better = done & (state.ret > state.best_ret)
        best = state._replace(
            best_obs=_pick(better, state.obs, state.best_obs),
            best_action=_pick(better, state.action, state.best_action),
            best_reward=_pick(better, state.reward, state.best_reward),
            best_len=jnp.where(better, state.t + 1, state.best_len),
            best_ret=jnp.where(better, state.ret, state.best_ret),
        )
        prompt = self._prompt(model, best)
        return best._replace(
            prompt=jax.tree.map(lambda a, b: _pick(done, a, b), prompt, state.prompt)
        )

    @staticmethod
    def _reset(state: MetaDTState) -> MetaDTState:
        """The current-episode buffers emptied (the best episode and prompt kept)."""
        zero = jnp.zeros_like
        return state._replace(
            obs=zero(state.obs),
            action=zero(state.action),
            reward=zero(state.reward),
            rtg=zero(state.rtg),
            z=zero(state.z),
            t=zero(state.t),
            ret=zero(state.ret),
        )


def _pick(rows: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
    """``a`` on rows where ``rows [B]`` is True, else ``b``."""
    return jnp.where(rows.reshape(rows.shape + (1,) * (a.ndim - 1)), a, b)
