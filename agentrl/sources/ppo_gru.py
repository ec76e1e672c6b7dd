"""The PPO source's recurrent learner (``core="gru"``): one GRU actor-critic
per task, its hidden state carried through the task's whole stream.

The shape of XLand-100B's collector (dunnolab/xland-minigrid-datasets,
``collection/training/nn.py`` and ``train.py``), on agentrl's one learner
per task:

- Input at step t: the observation's features and the previous step's env
  action. The observation, by ``obs_encoder``: ``"flat"`` (default) as the
  MLP core reads it (:func:`~agentrl.rl.nets.obs_features`; XLand's
  ``[5, 5, 2]`` ids flattened to ordinal floats); ``"cells"``, the
  collector's encoder of ``[h, w, 2]`` (tile, colour) id observations
  (nn.py:100-160): each cell's tile and colour embedded (16 units each),
  then three 2x2 ``VALID`` convolutions of 16, 32 and 64 channels with
  ReLUs, flattened (``64 * (h - 3) * (w - 3)``: 256 on XLand's 5x5 view),
  learned with the rest (:func:`encode_cells`). The previous action:
  one-hot for ``Discrete`` (the collector embeds it with ``nn.Embed``,
  nn.py:190, a learned linear map of the one-hot, which the core's input
  layer is); 0 on the stream's first step (train.py:448), otherwise the
  last action taken, across episode boundaries too (train.py:266 carries
  it without looking at ``done``). No reward, no new-episode flag (the
  collector has neither).
- Core: :class:`~agentrl.rl.cores.GRUCore` (input layer, GRU of
  ``core_hidden`` units, actor and critic MLPs of that width), zero hidden
  state at the stream's start (nn.py:235) and **never reset after**: the
  collector's GRU takes no ``done`` (nn.py:18: "tried to reset hidden
  state on done, worked better without it"; its rollout, train.py:227-267,
  carries ``hstate`` unchanged over episode ends). Episodes of one task
  therefore share a memory.
- Update: every ``steps_per_update`` steps, ``num_epochs`` passes over
  ``num_minibatches`` minibatches. A task has one env stream (the
  collector has 8,192 and minibatches whole streams of them, train.py:333),
  so a minibatch here is a contiguous chunk of ``steps_per_update /
  num_minibatches`` steps of the stream, replayed by the core from the
  hidden state the actor had at the chunk's first step (stored in the
  rollout; gradients truncated there and at rollout boundaries). With
  ``num_minibatches=1`` that is the collector's scheme exactly: the whole
  rollout replayed from its first hidden state (train.py:269, 353).
- Advantages: the MLP core's per-episode GAE. A truncated episode
  bootstraps from the value of ``final_observation`` read with the hidden
  state after the step (the collector's GAE treats every episode end as
  terminal, utils.py:36).

Shapes: one task's arrays ``[T, ...]`` (``T = steps_per_update``); the
whole run is vmapped over tasks by :mod:`agentrl.sources.ppo`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import agentrl.envs.spaces as spaces
from agentrl.prng import key_scan
from agentrl.rl.cores import GRUCore
from agentrl.rl.nets import ActionHead, example, obs_features
from agentrl.rl.ppo import (
    Learner,
    batch_loss,
    episode_advantages,
    epoch_permutations,
    optimizer,
    sgd_epochs,
)
from agentrl.sources.recording import recorded_step

#: ``obs_encoder`` choices (module docstring)
ENCODERS = ("flat", "cells")
#: the cell encoder's embedding width per id and its convolutions' channels
#: (``ObservationEncoder.emb_dim``, nn.py:124 and train.py:49; nn.py:133-156)
CELL_EMBED, CELL_CHANNELS = 16, (16, 32, 64)


def cells_problem(space: Any) -> str | None:
    """Why ``"cells"`` cannot encode observations of ``space`` (None: it can)."""
    shape = getattr(space, "shape", None)
    if not isinstance(space, spaces.Box) or shape is None or len(shape) != 3:
        return f"it needs [h, w, 2] (tile, colour) id observations, got {space!r}"
    if shape[2] != 2 or min(shape[:2]) < len(CELL_CHANNELS) + 1:
        return f"it needs [h, w, 2] ids with h, w >= 4, got shape {shape}"
    if jnp.issubdtype(space.dtype, jnp.floating):
        return f"it needs integer ids, got dtype {space.dtype}"
    return None


def init_cells(key: jax.Array, space: Any) -> dict:
    """The cell encoder's weights: ``tile [n, 16]``, ``colour [n, 16]``
    (``n`` = the box's largest id + 1) and three 2x2 convolutions
    ``{"w": [2, 2, in, out], "b": [out]}``. Embeddings as ``nn.Embed``'s
    default (variance 1 / 16), kernels orthogonal with gain sqrt(2) (nn.py
    lines 136, 144, 152), biases 0."""
    rows = int(np.max(np.asarray(space.high))) + 1  # static: a NumPy max
    k = jax.random.split(key, 2 + len(CELL_CHANNELS))
    embed = jax.nn.initializers.variance_scaling(
        1.0, "fan_in", "truncated_normal", in_axis=1, out_axis=0
    )
    conv, width = [], 2 * CELL_EMBED
    for kk, out in zip(k[2:], CELL_CHANNELS, strict=True):
        w = jax.nn.initializers.orthogonal(math.sqrt(2.0))(
            kk, (2, 2, width, out), jnp.float32
        )
        conv.append({"w": w, "b": jnp.zeros(out, jnp.float32)})
        width = out
    return {
        "tile": embed(k[0], (rows, CELL_EMBED), jnp.float32),
        "colour": embed(k[1], (rows, CELL_EMBED), jnp.float32),
        "conv": conv,
    }


def encode_cells(weights: dict, obs: jax.Array) -> jax.Array:
    """``[64 * (h - 3) * (w - 3)]`` features of one ``[h, w, 2]`` id
    observation: per-cell tile and colour embeddings, concatenated, under
    three 2x2 VALID convolutions with ReLUs (nn.py:100-160), flattened."""
    ids = jnp.asarray(obs, jnp.int32)
    y = jnp.concatenate(
        [weights["tile"][ids[..., 0]], weights["colour"][ids[..., 1]]], -1
    )[None]
    for layer in weights["conv"]:
        y = jax.lax.conv_general_dilated(
            y, layer["w"], (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        y = jax.nn.relu(y + layer["b"])
    return y.reshape(-1)


class GRUActing(NamedTuple):
    """The rollout scan's carry: acting weights, env, memory."""

    weights: Any
    obs: Any
    env_state: Any
    hidden: jax.Array  # [H] the core's state before this step
    prev_action: jax.Array  # the env action of the step before


class GRURunCarry(NamedTuple):
    """The update scan's carry: the learner, the env and the memory."""

    learner: Learner
    obs: Any
    env_state: Any
    hidden: jax.Array
    prev_action: jax.Array


class GRUTaskRun:
    """One task's recurrent PPO run (``params``: that task's env params).

    The same interface as :class:`agentrl.sources.ppo.TaskRun`:
    ``init_weights``, ``start``, ``update`` and ``greedy_actions``.
    """

    def __init__(self, env, config, params):
        self.env, self.config, self.params = env, config, params
        self.obs_space = env.observation_space(params)
        self.head = ActionHead(env.action_space(params))
        self.no_action = jnp.zeros(self.head.space.shape, self.head.space.dtype)
        self.cells = config.obs_encoder == "cells"
        if self.cells:
            h, w, _ = self.obs_space.shape
            obs_dim = CELL_CHANNELS[-1] * (h - 3) * (w - 3)
        else:
            obs_dim = obs_features(self.obs_space, example(self.obs_space)).shape[0]
        dim = obs_dim + self.head.action_features(self.no_action).shape[0]
        width = config.core_hidden
        self.core = GRUCore(dim, self.head.out, width, width, self.head.discrete)
        self.record_optimal = config.labels == "oracle"
        self.tx = optimizer(config.lr, config.max_grad_norm)

    # ---------------------------------------------------------------- pieces
    def features(self, weights, obs: Any, prev_action: jax.Array) -> jax.Array:
        """``[dim]``: the observation's features (the cell encoder's under
        ``weights["cells"]``, or fixed) and the previous action's."""
        if self.cells:
            o = encode_cells(weights["cells"], obs)
        else:
            o = obs_features(self.obs_space, obs)
        return jnp.concatenate([o, self.head.action_features(prev_action)])

    def features_over(self, weights, obs: Any, prev_action: jax.Array):
        """:meth:`features` of ``[T, ...]`` steps: ``[T, dim]``."""
        return jax.vmap(lambda o, a: self.features(weights, o, a))(obs, prev_action)

    def init_weights(self, key: jax.Array) -> dict:
        """The core's weights, and the cell encoder's under ``"cells"``."""
        if not self.cells:
            return self.core.init(key, self.config.init_log_std)
        k_core, k_cells = jax.random.split(key)
        weights = self.core.init(k_core, self.config.init_log_std)
        weights["cells"] = init_cells(k_cells, self.obs_space)
        return weights

    def start(self, learner: Learner, obs, env_state) -> GRURunCarry:
        """The carry at the stream's start: zero memory, previous action 0."""
        return GRURunCarry(
            learner, obs, env_state, self.core.init_hidden(), self.no_action
        )

    def env_step(self, carry: GRUActing, k):
        """One step: ``(carry, (record, learn))`` as the MLP core's, with
        ``learn["h"]`` the core's state after the step."""
        k_act, k_step = jax.random.split(k)
        x = self.features(carry.weights, carry.obs, carry.prev_action)
        hidden, out, value = self.core.step(carry.weights, carry.hidden, x)
        log_std = carry.weights.get("log_std")
        raw = self.head.sample(k_act, out, log_std)
        logp, _ = self.head.logp_entropy(out, log_std, raw)
        action = self.head.to_env(raw)
        next_obs, env_state, record, info = recorded_step(
            self.env,
            self.params,
            carry.env_state,
            carry.obs,
            action,
            k_step,
            self.record_optimal,
        )
        learn = {
            "prev_action": carry.prev_action,
            "raw": raw,
            "logp": logp,
            "value": value,
            "h": hidden,
            "next_x": self.features(carry.weights, info["final_observation"], action),
        }
        # The memory and the previous action carry over an episode's end
        # (the collector's rollout never resets them; module docstring).
        carry = GRUActing(carry.weights, next_obs, env_state, hidden, action)
        return carry, (record, learn)

    def batch(self, weights, h0: jax.Array, record: dict, learn: dict) -> dict:
        """The rollout's training batch ``[T, ...]``: GAE advantages and
        targets, and ``h_in [T, H]`` the state each step started from."""
        # V of each step's true successor, read with the state after the step
        # (a batched cell step: the states are known, nothing recurs).
        _, _, next_value = self.core.step(weights, learn["h"], learn["next_x"])
        c = self.config
        adv, target = episode_advantages(
            learn["value"], next_value, record, c.gamma, c.gae_lambda
        )
        return {
            "obs": record["obs"],
            "prev_action": learn["prev_action"],
            "raw": learn["raw"],
            "logp": learn["logp"],
            "adv": adv,
            "target": target,
            "h_in": jnp.concatenate([h0[None], learn["h"][:-1]], 0),
        }

    def loss(self, weights, batch):
        """PPO's loss on one chunk ``[L, ...]``, the core replayed over it
        from ``batch["h_in"][0]`` with no reset inside (the inputs computed
        here, so that the cell encoder learns too)."""
        xs = self.features_over(weights, batch["obs"], batch["prev_action"])[:, None]
        no_reset = jnp.zeros(xs.shape[:2], bool)
        out, value = self.core.unroll(weights, batch["h_in"][:1], xs, no_reset)
        logp, entropy = self.head.logp_entropy(
            out[:, 0], weights.get("log_std"), batch["raw"]
        )
        c = self.config
        return batch_loss(
            logp, entropy, value[:, 0], batch, c.clip_eps, c.vf_coef, c.ent_coef
        )

    def chunk_order(self, key):
        """``[epochs * minibatches]`` chunk ids, a fresh order per epoch."""
        c = self.config
        m = c.num_minibatches
        return epoch_permutations(key, m, c.num_epochs, m)[:, 0]

    def chunk(self, batch: dict, index: jax.Array) -> dict:
        """Chunk ``index`` of the batch: steps ``[index * L, (index + 1) * L)``."""
        size = self.config.steps_per_update // self.config.num_minibatches
        return jax.tree.map(
            lambda a: jax.lax.dynamic_slice_in_dim(a, index * size, size), batch
        )

    def update(self, carry: GRURunCarry, k):
        """One rollout of ``steps_per_update`` steps and its PPO update."""
        k_roll, k_train = jax.random.split(k)
        weights = carry.learner.params
        acting, (record, learn) = key_scan(
            self.env_step,
            GRUActing(
                weights, carry.obs, carry.env_state, carry.hidden, carry.prev_action
            ),
            jax.random.split(k_roll, self.config.steps_per_update),
        )
        batch = self.batch(weights, carry.hidden, record, learn)
        learner, _ = sgd_epochs(
            self.tx,
            self.loss,
            carry.learner,
            self.chunk_order(k_train),
            lambda index: (self.chunk(batch, index),),
        )
        new = GRURunCarry(
            learner, acting.obs, acting.env_state, acting.hidden, acting.prev_action
        )
        return new, record

    def greedy_actions(self, weights, record: dict) -> jax.Array:
        """``[steps, ...]`` the deterministic policy of ``weights`` at every
        recorded step, its memory the recorded stream from a zero state."""
        actions = record["action"]
        prev = jnp.concatenate([self.no_action[None], actions[:-1]], 0)
        xs = self.features_over(weights, record["obs"], prev)[:, None]
        h0 = self.core.init_hidden((1,))
        out, _ = self.core.unroll(weights, h0, xs, jnp.zeros(xs.shape[:2], bool))
        raw = self.head.sample(None, out[:, 0], weights.get("log_std"), greedy=True)
        return self.head.to_env(raw)
