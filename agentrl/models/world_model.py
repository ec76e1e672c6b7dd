"""Meta-DT's model: the context-aware world model, the policy beside it, its inputs.

The world model (Wang et al., NeurIPS 2024; NJU-RL/Meta-DT ``context/model.py``)
has three parts:

- a **context encoder** ``E``: the ``h`` transitions ``(s, a, r)`` before step
  ``t`` in the same episode (zeros where the episode has fewer) -> the task
  representation ``z_t`` (each input through a ReLU linear map to
  ``context_dim``, a GRU over the ``h`` steps, a linear read-out);
- a **reward decoder** ``R(s_t, a_t, s_{t+1}, z_t) -> r_t`` (states and action
  through ReLU linear maps, the state map shared by ``s`` and ``s'``, then a
  two-hidden-layer ReLU MLP);
- a **next-state decoder** ``T(s_t, a_t, z_t) -> s_{t+1}`` (same shape).

Inputs are feature vectors (:func:`features`): a one-hot cell for a discrete
observation or action, the raw vector otherwise. :class:`MetaDTModel` holds
the decision transformer (``policy``) and the world model (``world``) as one
module, so the shared update step trains both and one checkpoint holds both.

Below the modules: the world model's loss and per-step prediction errors,
the complementary prompt's selection (the segment of largest summed error,
:func:`select_prompt_start`), and the policy's tokens (:func:`prompt_tokens`,
:func:`episode_tokens`), shared by training (:mod:`agentrl.algos.meta_dt`)
and acting so the two build the same inputs.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from agentrl.models.config import ModelConfig
from agentrl.models.transformer import DecisionModel


def history_windows(x: jax.Array, valid: jax.Array, horizon: int) -> jax.Array:
    """The ``horizon`` steps before each step of an episode, zero-padded in front.

    Args:
      x: ``[B, H, ...]`` one episode per row (step ``j`` at index ``j``).
      valid: ``[B, H]`` bool, False on padding after the episode's end.
      horizon: ``h``, the steps of history.

    Returns:
      ``[B, H, h, ...]``: entry ``[b, t, i]`` is ``x[b, t - h + i]`` where
      ``t - h + i >= 0`` (and valid), zeros elsewhere; step ``t`` itself and
      later steps are never included.
    """
    steps = x.shape[1]
    idx = jnp.arange(steps)[:, None] - horizon + jnp.arange(horizon)[None, :]
    inside = idx >= 0  # [H, h]
    gathered = x[:, jnp.clip(idx, 0, steps - 1)]  # [B, H, h, ...]
    keep = inside[None] & valid[:, jnp.clip(idx, 0, steps - 1)]
    keep = keep.reshape(keep.shape + (1,) * (x.ndim - 2))
    return jnp.where(keep, gathered, jnp.zeros_like(gathered))


class ContextEncoder(nnx.Module):
    """``(s, a, r)`` of the last ``h`` steps -> task representation ``z``."""

    def __init__(
        self, obs_dim: int, act_dim: int, context_dim: int, hidden: int, *, rngs
    ):
        self.obs = nnx.Linear(obs_dim, context_dim, rngs=rngs)
        self.act = nnx.Linear(act_dim, context_dim, rngs=rngs)
        self.rew = nnx.Linear(1, context_dim, rngs=rngs)
        self.gru = nnx.GRUCell(3 * context_dim, hidden, rngs=rngs)
        self.out = nnx.Linear(hidden, context_dim, rngs=rngs)

    def __call__(self, obs: jax.Array, act: jax.Array, rew: jax.Array) -> jax.Array:
        """``obs [..., h, F]``, ``act [..., h, A]``, ``rew [..., h]`` -> ``z``."""
        x = jnp.concatenate(
            [
                jax.nn.relu(self.obs(obs)),
                jax.nn.relu(self.act(act)),
                jax.nn.relu(self.rew(rew[..., None])),
            ],
            axis=-1,
        )
        carry = jnp.zeros(x.shape[:-2] + (self.gru.hidden_features,), x.dtype)
        for i in range(x.shape[-2]):  # h is small and static
            carry, _ = self.gru(carry, x[..., i, :])
        return self.out(carry)


class _MLP(nnx.Module):
    """Two ReLU hidden layers and a linear read-out."""

    def __init__(self, d_in: int, hidden: int, d_out: int, *, rngs):
        self.fc1 = nnx.Linear(d_in, hidden, rngs=rngs)
        self.fc2 = nnx.Linear(hidden, hidden, rngs=rngs)
        self.fc3 = nnx.Linear(hidden, d_out, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.fc3(jax.nn.relu(self.fc2(jax.nn.relu(self.fc1(x)))))


class WorldModel(nnx.Module):
    """Context encoder, reward decoder and next-state decoder (module docstring)."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        context_dim: int = 16,
        hidden: int = 128,
        context_horizon: int = 4,
        *,
        rngs: nnx.Rngs,
    ):
        self.context_horizon = context_horizon
        self.encoder = ContextEncoder(obs_dim, act_dim, context_dim, hidden, rngs=rngs)
        self.reward_obs = nnx.Linear(obs_dim, context_dim, rngs=rngs)
        self.reward_act = nnx.Linear(act_dim, context_dim, rngs=rngs)
        self.reward = _MLP(4 * context_dim, hidden, 1, rngs=rngs)
        self.state_obs = nnx.Linear(obs_dim, context_dim, rngs=rngs)
        self.state_act = nnx.Linear(act_dim, context_dim, rngs=rngs)
        self.next_state = _MLP(3 * context_dim, hidden, obs_dim, rngs=rngs)

    def contexts(
        self, obs: jax.Array, act: jax.Array, rew: jax.Array, valid: jax.Array
    ) -> jax.Array:
        """``z_t`` of every step of episodes ``[B, H, ...]`` -> ``[B, H, Z]``."""
        h = self.context_horizon
        return self.encoder(
            history_windows(obs, valid, h),
            history_windows(act, valid, h),
            history_windows(rew, valid, h),
        )

    def predict(
        self, obs: jax.Array, act: jax.Array, next_obs: jax.Array, z: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        """``(reward [...], next_obs [..., F])`` predicted from ``[..., F|A|Z]``."""
        hs = jax.nn.relu(self.reward_obs(obs))
        hn = jax.nn.relu(self.reward_obs(next_obs))
        ha = jax.nn.relu(self.reward_act(act))
        reward = self.reward(jnp.concatenate([hs, ha, hn, z], axis=-1))[..., 0]
        ts = jax.nn.relu(self.state_obs(obs))
        ta = jax.nn.relu(self.state_act(act))
        state = self.next_state(jnp.concatenate([ts, ta, z], axis=-1))
        return reward, state


class MetaDTModel(nnx.Module):
    """Meta-DT's trained module: the decision transformer and the world model.

    ``config`` is the policy's (completed) :class:`ModelConfig`, so code that
    reads ``model.config`` (the action head, the window) sees the policy's.
    """

    def __init__(
        self,
        config: ModelConfig,
        *,
        obs_dim: int,
        act_dim: int,
        context_dim: int,
        hidden: int,
        context_horizon: int,
        rngs: nnx.Rngs,
    ):
        self.config = config
        self.policy = DecisionModel(config, rngs=rngs)
        self.world = WorldModel(
            obs_dim, act_dim, context_dim, hidden, context_horizon, rngs=rngs
        )

    def __call__(self, *args: Any, **kwargs: Any):
        """The policy's full pass (``DecisionModel.__call__``)."""
        return self.policy(*args, **kwargs)


# ----- the loss, the per-step errors and the prompt they select -----------------
class WorldPass(NamedTuple):
    """The world model on episodes ``[B, H]``: inputs, ``z`` and predictions."""

    obs: jax.Array  # [B, H, F] features
    act: jax.Array  # [B, H, A] features
    reward: jax.Array  # [B, H]
    next_obs: jax.Array  # [B, H, F] (zeros at the last step)
    mask: jax.Array  # [B, H] steps with a known successor in the episode
    z: jax.Array  # [B, H, Z]
    pred_reward: jax.Array  # [B, H]
    pred_next: jax.Array  # [B, H, F]


def world_pass(world, obs_f, act_f, reward, valid) -> WorldPass:
    """Run ``world`` over whole episodes (features ``[B, H, ...]``)."""
    reward = jnp.where(valid, reward.astype(jnp.float32), 0.0)
    z = world.contexts(obs_f, act_f, reward, valid)
    next_obs = jnp.concatenate([obs_f[:, 1:], jnp.zeros_like(obs_f[:, :1])], axis=1)
    has_next = jnp.concatenate([valid[:, 1:], jnp.zeros_like(valid[:, :1])], axis=1)
    pred_r, pred_s = world.predict(obs_f, act_f, next_obs, z)
    mask = valid & has_next
    return WorldPass(obs_f, act_f, reward, next_obs, mask, z, pred_r, pred_s)


def _masked_mean(x: jax.Array, mask: jax.Array) -> jax.Array:
    mask = mask.astype(x.dtype)
    return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def world_model_loss(
    pred_reward, reward, pred_next, next_obs, mask, state_weight
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """``mean (r̂ - r)^2 + state_weight * mean_dims (ŝ' - s')^2`` over ``mask``.

    Shapes: rewards ``[B, H]``, states ``[B, H, F]``, ``mask [B, H]``. The
    state term averages over the F features, as the reference's ``mse_loss``.
    """
    reward_mse = _masked_mean((pred_reward - reward) ** 2, mask)
    state_mse = _masked_mean(jnp.mean((pred_next - next_obs) ** 2, axis=-1), mask)
    loss = reward_mse + state_weight * state_mse
    return loss, {"reward_mse": reward_mse, "state_mse": state_mse}


def prediction_errors(wp: WorldPass, state_weight) -> jax.Array:
    """``[B, H]`` per-step error ``|r̂ - r| + state_weight * mean|ŝ' - s'|``
    (0 where the step has no successor in the episode)."""
    err = jnp.abs(wp.pred_reward - wp.reward)
    err = err + state_weight * jnp.mean(jnp.abs(wp.pred_next - wp.next_obs), axis=-1)
    return jnp.where(wp.mask, err, 0.0)


def select_prompt_start(
    errors: jax.Array, length: jax.Array, prompt_length: int, context_horizon: int
) -> jax.Array:
    """``[B]`` start of the ``prompt_length``-step segment with the largest
    summed error (the first such start on ties).

    Starts run over ``[min(context_horizon, length - k), length - k]`` (the
    reference skips the first ``h`` steps, whose ``z`` sees a short history);
    an episode shorter than ``k`` starts at 0.

    Args:
      errors: ``[B, H]`` per-step errors (0 on padding).
      length: ``[B]`` steps in each row's episode.
    """
    k = prompt_length
    horizon = errors.shape[1]
    csum = jnp.concatenate(
        [jnp.zeros_like(errors[:, :1]), jnp.cumsum(errors, axis=1)], axis=1
    )
    starts = jnp.arange(horizon)
    ends = jnp.minimum(starts + k, horizon)
    sums = csum[:, ends] - csum[:, starts]  # [B, H]
    last = jnp.maximum(length - k, 0)[:, None]
    first = jnp.minimum(context_horizon, last)
    allowed = (starts[None, :] >= first) & (starts[None, :] <= last)
    return jnp.argmax(jnp.where(allowed, sums, -jnp.inf), axis=1).astype(jnp.int32)


# ----- the policy's inputs: features, prompt and episode tokens -----------------
def features(
    x: jax.Array, count: int | None, batch_dims: int, grid_size: int | None = None
) -> jax.Array:
    """One-hot ``[..., count]`` of int ``x`` (``count`` set), else ``x`` flattened
    to ``[*batch, -1]`` float32. ``grid_size`` n: a cell id ``y * n + x`` (of
    any layer) also gets its coordinates ``(x, y) / n`` appended, the geometry
    a one-hot cell lacks."""
    if count is None:
        return x.astype(jnp.float32).reshape(x.shape[:batch_dims] + (-1,))
    out = jax.nn.one_hot(x, count, dtype=jnp.float32)
    if grid_size is None:
        return out
    cell = x % (grid_size * grid_size)
    xy = jnp.stack([cell % grid_size, cell // grid_size], axis=-1)
    return jnp.concatenate([out, xy.astype(jnp.float32) / grid_size], axis=-1)


def gather_steps(x: jax.Array, idx: jax.Array) -> jax.Array:
    """``x [B, T, ...]`` at ``idx [B, N]`` -> ``[B, N, ...]``."""
    return x[jnp.arange(x.shape[0])[:, None], idx]


def reverse_cumsum(reward: jax.Array, valid: jax.Array) -> jax.Array:
    """``[B, H]`` return-to-go inside one episode per row (0 on padding)."""
    r = jnp.where(valid, reward.astype(jnp.float32), 0.0)
    return jnp.flip(jnp.cumsum(jnp.flip(r, axis=1), axis=1), axis=1) * valid


class Tokens(NamedTuple):
    """Policy inputs: ``obs [B, N, D]`` features, ``action``, ``reward [B, N]``."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array


def token_obs(obs_f, rtg, z, flag: float, scale: float) -> jax.Array:
    """``[obs features, rtg / scale, z, flag]`` along the last axis."""
    flags = jnp.full(rtg.shape + (1,), flag, jnp.float32)
    return jnp.concatenate([obs_f, (rtg / scale)[..., None], z, flags], axis=-1)


def _where_rows(keep: jax.Array, x: jax.Array) -> jax.Array:
    keep = keep.reshape(keep.shape + (1,) * (x.ndim - keep.ndim))
    return jnp.where(keep, x, jnp.zeros_like(x))


def prompt_tokens(
    source: WorldPass,
    action: jax.Array,
    length: jax.Array,
    has_prompt: jax.Array,
    errors: jax.Array,
    *,
    prompt_length: int,
    context_horizon: int,
    scale: float,
) -> Tokens:
    """The complementary prompt from a source episode (``[B, H]``).

    ``action`` is the source's raw actions; ``length [B]`` its steps;
    ``has_prompt [B]`` False gives the empty prompt (every token
    ``[0, 0, 0, 1]``, action and reward 0). Returns ``[B, k, ...]`` tokens.
    """
    start = select_prompt_start(errors, length, prompt_length, context_horizon)
    idx = start[:, None] + jnp.arange(prompt_length)[None, :]
    keep = (idx < length[:, None]) & has_prompt[:, None]
    idx = jnp.minimum(idx, source.obs.shape[1] - 1)
    valid = jnp.arange(source.obs.shape[1])[None, :] < length[:, None]
    rtg = gather_steps(reverse_cumsum(source.reward, valid), idx)
    obs_f = gather_steps(source.obs, idx)
    z = jnp.zeros(obs_f.shape[:2] + (source.z.shape[-1],), jnp.float32)
    obs = token_obs(_where_rows(keep, obs_f), _where_rows(keep, rtg), z, 1.0, scale)
    return Tokens(
        obs,
        _where_rows(keep, gather_steps(action, idx)),
        _where_rows(keep, gather_steps(source.reward, idx)),
    )


def episode_tokens(wp: WorldPass, action, rtg, valid, scale: float) -> Tokens:
    """The imitated episode's tokens ``[B, H, ...]`` (``z`` without gradient)."""
    z = jax.lax.stop_gradient(wp.z)
    obs = token_obs(wp.obs, rtg, z, 0.0, scale)
    return Tokens(_where_rows(valid, obs), _where_rows(valid, action), wp.reward)


def join(prompt: Tokens, episode: Tokens) -> Tokens:
    """Prompt then episode along the step axis: ``[B, k + H, ...]``."""
    return Tokens(
        *(jnp.concatenate(p, axis=1) for p in zip(prompt, episode, strict=True))
    )
