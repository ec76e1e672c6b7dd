"""The networks' pieces of PPO, as pure functions of weight pytrees.

Weights are nested dicts of arrays, so a learner's state can be vmapped
over tasks or seeds and checkpointed leaf by leaf.

- :func:`dense` / :func:`mlp`: orthogonally initialised layers, tanh MLPs;
- :func:`obs_features`: one observation as a flat float32 vector (one-hot
  ``Discrete``, flattened ``Box``, ``Dict`` spaces concatenated);
- :class:`ActionHead`: categorical over ``Discrete`` actions, diagonal
  Gaussian over ``Box`` ones in units of half the box width (the env gets
  the clipped, rescaled sample; the log-probability is the unclipped one's);
  :func:`categorical_logp_entropy` is its categorical part;
- :class:`Policy`: separate two-layer tanh MLPs for actor and critic (the
  PPO source's network).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

import agentrl.envs.spaces as spaces


def dense(key: jax.Array, n_in: int, n_out: int, scale: float) -> dict:
    """A dense layer ``{"w": [n_in, n_out], "b": [n_out]}``, orthogonal init."""
    w = jax.nn.initializers.orthogonal(scale)(key, (n_in, n_out), jnp.float32)
    return {"w": w, "b": jnp.zeros(n_out, jnp.float32)}


def mlp(layers: list[dict], x: jax.Array) -> jax.Array:
    """``x [..., n_in]`` through :func:`dense` ``layers``, tanh between them."""
    for layer in layers[:-1]:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
    return x @ layers[-1]["w"] + layers[-1]["b"]


def log_prob(log_probs: jax.Array, action: jax.Array) -> jax.Array:
    """``log_probs [..., A]`` at the int ``action [...]``: ``[...]``."""
    return jnp.take_along_axis(log_probs, action[..., None], -1)[..., 0]


def categorical_logp_entropy(logits: jax.Array, action: jax.Array):
    """``(log pi(action), entropy)`` of a categorical, each ``[...]``, for
    ``logits [..., A]`` and int ``action [...]``."""
    log_probs = jax.nn.log_softmax(logits)
    logp = log_prob(log_probs, action)
    return logp, -jnp.sum(jnp.exp(log_probs) * log_probs, -1)


class ActionHead:
    """Categorical (``Discrete``) or diagonal Gaussian (``Box``) policy head.

    ``out`` is the actor's output width. Raw samples are what the learner
    scores (int32 indices, or unclipped Gaussian samples ``[*shape]``);
    :meth:`to_env` maps them to the env's action.
    """

    def __init__(self, action_space: Any):
        self.space = action_space
        self.discrete = spaces.is_discrete(action_space)
        if self.discrete:
            self.out = int(action_space.n)
            self.shape: tuple[int, ...] = ()
        else:
            self.shape = tuple(action_space.shape)
            self.out = max(1, math.prod(self.shape))
            low = jnp.broadcast_to(
                jnp.asarray(action_space.low, jnp.float32), self.shape
            )
            high = jnp.broadcast_to(
                jnp.asarray(action_space.high, jnp.float32), self.shape
            )
            self.center, self.half = (high + low) / 2, (high - low) / 2

    def action_features(self, action: jax.Array) -> jax.Array:
        """Flat features of an env action (one-hot, or scaled to [-1, 1])."""
        if self.discrete:
            return jax.nn.one_hot(
                jnp.asarray(action, jnp.int32), self.out, dtype=jnp.float32
            )
        a = (jnp.asarray(action, jnp.float32) - self.center) / self.half
        return a.reshape(-1)

    def _log_std(self, log_std):
        return jnp.clip(log_std, -5.0, 2.0)

    def env_log_std(self, log_std: jax.Array) -> jax.Array:
        """The Gaussian's log std ``[A]`` in the env's units: the one
        :meth:`sample` draws with (clipped to ``[-5, 2]``) plus ``log`` of
        half the box width (:meth:`to_env`'s scale), so that ``center + half
        * mean`` and this std give, clipped to the box, the distribution of
        :meth:`to_env` of :meth:`sample`."""
        return self._log_std(log_std) + jnp.log(self.half.reshape(-1))

    def logp_entropy(self, out, log_std, raw):
        """``(log pi(raw), entropy)``, each ``[...]`` for ``out [..., A]``."""
        if self.discrete:
            return categorical_logp_entropy(out, raw)
        ls = self._log_std(log_std)
        flat = raw.reshape(*raw.shape[: raw.ndim - len(self.shape)], -1)
        z = (flat - out) / jnp.exp(ls)
        logp = jnp.sum(-0.5 * z**2 - ls - 0.5 * jnp.log(2 * jnp.pi), -1)
        entropy = jnp.sum(ls + 0.5 * (1.0 + jnp.log(2 * jnp.pi))) * jnp.ones_like(logp)
        return logp, entropy

    def sample(self, key, out, log_std, greedy=False, temperature=1.0):
        """A raw action ``[...]`` / ``[..., *shape]`` from ``out [..., A]``:
        the argmax / mean when ``greedy``, else a draw at ``temperature``
        (logits divided by it; the Gaussian's std multiplied by it)."""
        if self.discrete:
            if greedy:
                return jnp.argmax(out, -1).astype(jnp.int32)
            return jax.random.categorical(key, out / temperature).astype(jnp.int32)
        if greedy:
            return out.reshape(*out.shape[:-1], *self.shape)
        std = jnp.exp(self._log_std(log_std))
        raw = out + temperature * std * jax.random.normal(key, out.shape)
        return raw.reshape(*out.shape[:-1], *self.shape)

    def to_env(self, raw: jax.Array) -> jax.Array:
        if self.discrete:
            return raw
        return self.center + self.half * jnp.clip(raw, -1.0, 1.0)


class Policy:
    """Separate two-layer tanh MLPs for actor and critic (orthogonal init).

    ``features(obs) -> [dim]``; ``sample(w, x, key) -> (raw, logp, value)``;
    ``evaluate(w, x [batch, dim], raw [batch, ...]) -> (logp, entropy, value)``
    each ``[batch]``; ``to_env(raw)`` maps a raw sample to the env's action;
    ``greedy_action(w, x)`` is the deterministic policy's env action.
    """

    def __init__(self, obs_space: Any, action_space: Any):
        self.obs_space = obs_space
        self.head = ActionHead(action_space)
        self.discrete, self.out = self.head.discrete, self.head.out
        self.dim = self.features(example(obs_space)).shape[0]

    def features(self, obs: Any) -> jax.Array:
        return obs_features(self.obs_space, obs)

    def init(self, key: jax.Array, hidden: int, init_log_std: float) -> dict:
        ka, kc = jax.random.split(key)
        ka, kc = jax.random.split(ka, 3), jax.random.split(kc, 3)
        root2 = math.sqrt(2.0)
        weights = {
            "actor": [
                dense(ka[0], self.dim, hidden, root2),
                dense(ka[1], hidden, hidden, root2),
                dense(ka[2], hidden, self.out, 0.01),
            ],
            "critic": [
                dense(kc[0], self.dim, hidden, root2),
                dense(kc[1], hidden, hidden, root2),
                dense(kc[2], hidden, 1, 1.0),
            ],
        }
        if not self.discrete:
            weights["log_std"] = jnp.full(self.out, init_log_std, jnp.float32)
        return weights

    def value(self, weights: dict, x: jax.Array) -> jax.Array:
        return mlp(weights["critic"], x)[..., 0]

    def sample(self, weights: dict, x: jax.Array, key: jax.Array):
        out = mlp(weights["actor"], x)
        log_std = weights.get("log_std")
        raw = self.head.sample(key, out, log_std)
        logp, _ = self.head.logp_entropy(out, log_std, raw)
        return raw, logp, self.value(weights, x)

    def greedy_action(self, weights: dict, x: jax.Array) -> jax.Array:
        """The env's action ``[batch, ...]`` of the deterministic policy (the
        argmax, or the Gaussian's mean clipped and rescaled) at ``x [batch, dim]``."""
        out = mlp(weights["actor"], x)
        raw = self.head.sample(None, out, weights.get("log_std"), greedy=True)
        return self.to_env(raw)

    def evaluate(self, weights: dict, x: jax.Array, raw: jax.Array):
        out = mlp(weights["actor"], x)
        logp, entropy = self.head.logp_entropy(out, weights.get("log_std"), raw)
        return logp, entropy, self.value(weights, x)

    def to_env(self, raw: jax.Array) -> jax.Array:
        return self.head.to_env(raw)


def obs_features(space: Any, obs: Any) -> jax.Array:
    """Flat float32 features of one observation (``Dict`` spaces concatenated)."""
    if hasattr(space, "spaces"):
        return jnp.concatenate(
            [obs_features(sub, obs[name]) for name, sub in space.spaces.items()]
        )
    if spaces.is_discrete(space):
        return jax.nn.one_hot(jnp.asarray(obs, jnp.int32), space.n, dtype=jnp.float32)
    return jnp.asarray(obs, jnp.float32).reshape(-1)


def example(space: Any) -> Any:
    """A zero observation of ``space``."""
    if hasattr(space, "spaces"):
        return {k: example(v) for k, v in space.spaces.items()}
    return jnp.zeros(space.shape, space.dtype)
