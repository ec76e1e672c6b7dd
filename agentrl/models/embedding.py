"""Token embedding of transitions for the "step", "sar" and "transition" layouts.

Inputs are aligned per step: ``obs [B, T, ...]`` (``[B, T]`` int32 for
discrete observations, ``[B, T, obs_size]`` float for vectors), ``action
[B, T]`` int32 or ``[B, T, action_size]``, ``reward [B, T]`` float.

- "step": token ``t`` = emb(obs_t) + emb(a_{t-1}) + emb(r_{t-1}); at the very
  first step (``t = 0``) a learned start vector replaces the last two. With
  ``positions="episode"`` (ReLIC) it replaces them at every episode's first
  step (``t % episode_steps == 0``), and a learned embedding of the step
  within the episode, ``E_pos[t % episode_steps]``, is added to every token.
- "sar": tokens ``obs_t, a_t, r_t`` (plus a learned type vector each),
  interleaved to ``[B, 3T, d]``; the action at ``t`` is read at ``obs_t``.
- "transition" (DPT): a query token emb(query_obs) and context tokens
  emb(s) + emb(a) + emb(r) + emb'(s'), each with a type vector.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from agentrl.models.precision import F32, mixed_linear


class GridCellEmbed(nnx.Module):
    """Factorised embedding of grid-cell ids (``ModelConfig.obs_encoding="grid"``).

    ``id = layer * n**2 + y * n + x`` -> ``E_x[x] + E_y[y] + W (x, y) / n +
    E_layer[layer]``: rows, columns and coordinates are shared between cells,
    so a cell seen rarely (a held-out goal) is still embedded by parts the
    model has trained on.
    """

    def __init__(self, grid_size: int, layers: int, d: int, rngs):
        self.n = grid_size
        self.x = nnx.Embed(grid_size, d, rngs=rngs)
        self.y = nnx.Embed(grid_size, d, rngs=rngs)
        self.coords = mixed_linear(2, d, F32, rngs=rngs)
        self.layer = nnx.Embed(layers, d, rngs=rngs)

    def __call__(self, ids: jax.Array) -> jax.Array:
        """``ids [...]`` int32 -> ``[..., d]``."""
        cells = self.n * self.n
        cell, layer = ids % cells, ids // cells
        x, y = cell % self.n, cell // self.n
        xy = jnp.stack([x, y], axis=-1).astype(jnp.float32) / self.n
        return self.x(x) + self.y(y) + self.coords(xy) + self.layer(layer)


def _encoder(kind: str, size: int, d: int, rngs) -> nnx.Module:
    if kind == "discrete":
        return nnx.Embed(size, d, rngs=rngs)
    return mixed_linear(size, d, F32, rngs=rngs)


def _obs_encoder(config, d: int, rngs) -> nnx.Module:
    if config.obs_encoding == "grid":
        if config.grid_size is None:
            raise ValueError(
                "ModelConfig.grid_size must be set for obs_encoding='grid'"
            )
        return GridCellEmbed(config.grid_size, config.grid_layers, d, rngs)
    return _encoder(config.obs_kind, config.obs_size, d, rngs)


class TokenEmbedding(nnx.Module):
    """Embeds observations, actions and rewards into ``d_model`` tokens."""

    def __init__(self, config, *, rngs):
        c = config
        d = c.d_model
        self.layout = c.token_layout
        self.obs_kind = c.obs_kind
        self.action_kind = c.action_kind
        self.obs = _obs_encoder(c, d, rngs)
        self.action = _encoder(c.action_kind, c.action_size, d, rngs)
        self.reward = mixed_linear(1, d, F32, rngs=rngs)
        small = nnx.initializers.normal(0.02)
        if c.token_layout == "step":
            self.start = nnx.Param(small(rngs.params(), (d,)))
        elif c.token_layout == "sar":
            self.kind = nnx.Param(small(rngs.params(), (3, d)))
        else:
            self.next_obs = _obs_encoder(c, d, rngs)
            self.kind = nnx.Param(small(rngs.params(), (2, d)))
        # steps per episode with ReLIC's episode positions, else 0 (created
        # last, so that a model without them draws the parameters it did)
        self.episode_steps = c.episode_steps if c.positions == "episode" else 0
        if self.episode_steps:
            self.episode_step = nnx.Embed(self.episode_steps, d, rngs=rngs)

    def _obs(self, obs, batch_dims: int, encoder=None):
        encoder = encoder or self.obs
        if self.obs_kind == "discrete":
            return encoder(obs.astype(jnp.int32))
        # a multi-axis Box (XLand's [view, view, 2] grid) enters flattened
        flat = obs.reshape(obs.shape[:batch_dims] + (-1,))
        return encoder(flat.astype(jnp.float32))

    def _act(self, act):
        if self.action_kind == "discrete":
            return self.action(act.astype(jnp.int32))
        return self.action(act)

    def _rew(self, rew):
        return self.reward(rew.astype(jnp.float32)[..., None])

    def _episode_inputs(self, prev, step) -> jax.Array:
        """ReLIC's inputs besides the observation at steps ``step`` (``[T]``,
        with ``prev [B, T, d]``, or a scalar with ``prev [B, d]``): the start
        vector at an episode's first step, plus the step-in-episode embedding."""
        within = step % self.episode_steps
        first = (within == 0)[..., None]
        return jnp.where(first, self.start[...], prev) + self.episode_step(within)

    # -- full sequences --------------------------------------------------------
    def steps(self, obs, action, reward) -> jax.Array:
        """Aligned ``[B, T, ...]`` inputs -> tokens ``[B, T * tokens_per_step, d]``."""
        o = self._obs(obs, 2)
        if self.layout == "step":
            prev = self._act(action[:, :-1]) + self._rew(reward[:, :-1])
            start = jnp.broadcast_to(self.start[...], o[:, :1].shape)
            prev = jnp.concatenate([start, prev], axis=1)
            if self.episode_steps:
                prev = self._episode_inputs(prev, jnp.arange(o.shape[1]))
            return o + prev
        kind = self.kind[...]
        toks = [o + kind[0], self._act(action) + kind[1], self._rew(reward) + kind[2]]
        b, t, d = o.shape
        return jnp.stack(toks, axis=2).reshape(b, 3 * t, d)

    def query(self, query_obs) -> jax.Array:
        """``[B, ...]`` -> query token ``[B, 1, d]`` (transition layout)."""
        return (self._obs(query_obs, 1) + self.kind[...][0])[:, None]

    def transitions(self, obs, action, reward, next_obs) -> jax.Array:
        """Context ``[B, N, ...]`` -> transition tokens ``[B, N, d]``."""
        nxt = self._obs(next_obs, 2, self.next_obs)
        e = self._obs(obs, 2) + self._act(action) + self._rew(reward) + nxt
        return e + self.kind[...][1]

    # -- one decoding step -----------------------------------------------------
    def decode_step(self, obs, prev_action, prev_reward, step: jax.Array):
        """One step's chunk ``[B, C, d]`` (C = 1 "step", 3 "sar": a, r, obs).

        ``obs [B, ...]``, ``prev_action [B, ...]``, ``prev_reward [B]``;
        ``step`` is the int32 step index (previous action ignored at 0).
        """
        o = self._obs(obs, 1)
        a = self._act(prev_action)
        r = self._rew(prev_reward)
        if self.layout == "step":
            if self.episode_steps:
                return (o + self._episode_inputs(a + r, step))[:, None]
            prev = jnp.where(step == 0, self.start[...], a + r)
            return (o + prev)[:, None]
        kind = self.kind[...]
        return jnp.stack([a + kind[1], r + kind[2], o + kind[0]], axis=1)
