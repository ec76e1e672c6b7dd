"""The PPO source's recurrent learner (``core="gru"``): one GRU actor-critic
per task, its hidden state carried through the task's whole stream.

The shape of XLand-100B's collector (dunnolab/xland-minigrid-datasets,
``collection/training/nn.py`` and ``train.py``), on agentrl's one learner
per task:

- Input at step t: the observation's features (as the MLP core's:
  :func:`~agentrl.rl.nets.obs_features`) and the previous step's env action
  (one-hot for ``Discrete``; the collector embeds it with ``nn.Embed``,
  nn.py:190, i.e. a learned linear map of the one-hot, which the core's
  input layer is). The previous action is 0 on the stream's first step
  (train.py:448) and otherwise the last action taken, across episode
  boundaries too (train.py:266 carries it without looking at ``done``).
  No reward, no new-episode flag (the collector has neither).
- Core: :class:`~agentrl.online.cores.GRUCore` (input layer, GRU of
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

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agentrl.online.cores import GRUCore
from agentrl.prng import key_scan
from agentrl.rl.nets import ActionHead, example, obs_features
from agentrl.rl.ppo import (
    Learner,
    epoch_permutations,
    gae,
    optimizer,
    ppo_loss,
    sgd_epochs,
)


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
        dim = self.features(example(self.obs_space), self.no_action).shape[0]
        width = config.core_hidden
        self.core = GRUCore(dim, self.head.out, width, width, self.head.discrete)
        self.record_optimal = config.labels == "oracle"
        self.tx = optimizer(config.lr, config.max_grad_norm)

    # ---------------------------------------------------------------- pieces
    def features(self, obs: Any, prev_action: jax.Array) -> jax.Array:
        """``[dim]``: the observation's features and the previous action's."""
        return jnp.concatenate(
            [obs_features(self.obs_space, obs), self.head.action_features(prev_action)]
        )

    def init_weights(self, key: jax.Array) -> dict:
        return self.core.init(key, self.config.init_log_std)

    def start(self, learner: Learner, obs, env_state) -> GRURunCarry:
        """The carry at the stream's start: zero memory, previous action 0."""
        return GRURunCarry(
            learner, obs, env_state, self.core.init_hidden(), self.no_action
        )

    def env_step(self, carry: GRUActing, k):
        """One step: ``(carry, (record, learn))`` as the MLP core's, with
        ``learn["h"]`` the core's state after the step."""
        k_act, k_step = jax.random.split(k)
        x = self.features(carry.obs, carry.prev_action)
        hidden, out, value = self.core.step(carry.weights, carry.hidden, x)
        log_std = carry.weights.get("log_std")
        raw = self.head.sample(k_act, out, log_std)
        logp, _ = self.head.logp_entropy(out, log_std, raw)
        action = self.head.to_env(raw)
        optimal = None
        if self.record_optimal:
            optimal = self.env.optimal_action(carry.env_state, self.params)
        next_obs, env_state, reward, term, trunc, info = self.env.step(
            k_step, carry.env_state, action, self.params
        )
        record = {
            "obs": carry.obs,
            "action": action,
            "reward": jnp.asarray(reward, jnp.float32),
            "terminated": term,
            "truncated": trunc,
            "optimal_action": optimal,
        }
        learn = {
            "x": x,
            "raw": raw,
            "logp": logp,
            "value": value,
            "h": hidden,
            "next_x": self.features(info["final_observation"], action),
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
        adv = gae(
            learn["value"],
            next_value,
            record["reward"],
            record["terminated"],
            jnp.logical_or(record["terminated"], record["truncated"]),
            self.config.gamma,
            self.config.gae_lambda,
        )
        return {
            "x": learn["x"],
            "raw": learn["raw"],
            "logp": learn["logp"],
            "adv": adv,
            "target": adv + learn["value"],
            "h_in": jnp.concatenate([h0[None], learn["h"][:-1]], 0),
        }

    def loss(self, weights, batch):
        """PPO's loss on one chunk ``[L, ...]``, the core replayed over it
        from ``batch["h_in"][0]`` with no reset inside."""
        xs = batch["x"][:, None]
        no_reset = jnp.zeros(xs.shape[:2], bool)
        out, value = self.core.unroll(weights, batch["h_in"][:1], xs, no_reset)
        logp, entropy = self.head.logp_entropy(
            out[:, 0], weights.get("log_std"), batch["raw"]
        )
        c = self.config
        return ppo_loss(
            logp,
            batch["logp"],
            entropy,
            value[:, 0],
            batch["adv"],
            batch["target"],
            c.clip_eps,
            c.vf_coef,
            c.ent_coef,
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
        xs = jax.vmap(self.features)(record["obs"], prev)[:, None]
        h0 = self.core.init_hidden((1,))
        out, _ = self.core.unroll(weights, h0, xs, jnp.zeros(xs.shape[:2], bool))
        raw = self.head.sample(None, out[:, 0], weights.get("log_std"), greedy=True)
        return self.head.to_env(raw)
