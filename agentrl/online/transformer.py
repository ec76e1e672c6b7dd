"""Transformer PPO over trials (ReLIC-style), with partial updates.

The policy is the causal transformer of :mod:`agentrl.models` (a
``DecisionModel`` with the ``"step"`` token layout: one token per step
embedding ``obs_t``, ``a_{t-1}``, ``r_{t-1}``), the critic a second one of
the same shape whose first output is the value. Every update runs one
trial of ``L = trial_episodes * env.horizon`` steps in each of ``num_envs``
environments, each on a fresh training task:

- **acting** step by step with the model's KV cache (``decode``), the
  context running across the trial's episode boundaries;
- **training** on the trial's tokens in parallel: one forward pass over
  the ``[env, L]`` token buffer gives every step's logits and values
  (causal attention: positions after the current one cannot change them);
- **partial updates** (ReLIC, Elawady et al., 2024): with ``update_every =
  K < L`` the policy is updated after every K steps of the trial, on those
  K steps, with the whole context so far as input; the trial then goes on
  with the new weights over the same context (the cache is re-encoded with
  them, as ReLIC's ``update_stale_kv``, in causal pieces of up to 128
  tokens: only the steps so far, each piece against the pieces before it).
  ``K = L`` updates once per trial, at its end, on the full forward pass.
- **full update** (ReLIC's ``full_updates_per_rollout = 1``,
  ``full_update``): with ``K < L``, the trial's last update trains on all
  ``L`` steps in one full forward pass (the ``K = L`` update) instead of on
  its last chunk: ``L / K - 1`` partial updates and one full one a trial,
  the last chunk getting no partial update of its own
  (``relic/trainer/transformers_trainer.py``: no partial update at the
  rollout's last step; the update after the rollout starts its loss at
  step 0). Its old log-probabilities are the acting ones and its values
  the critic's after the partial updates (ReLIC's refreshed
  ``update_stale_values``); its backward pass holds the trial's
  ``[B, H, L, L]`` scores.
- **cost**: acting reads the cache once a step and writes its slot in
  place (no whole-cache copy in any loop of the compiled update; tested);
  a partial update re-encodes the critic's cache of the steps before its
  chunk and the actor's up to its end, ``~(start**2 + end**2) / 2`` token
  pairs, so one partial update costs O(L**2) and a trial of ``L / K``
  updates O(L**3 / K) (quadratic when the number of updates per trial is
  fixed, as ReLIC's ``updates_per_rollout``). Measured in
  ``agentrl bench online_long_context``.
- **bounded training memory**: a partial update trains the chunk's K steps
  attending to the cache of the steps before it, computed by the weights
  that acted (and the critic before the update) and held fixed during the
  update's epochs (Transformer-XL's stop-gradient memory; the gradient does
  not reach the earlier steps' keys and values). The backward pass then
  holds ``[B, K]`` activations and ``[B, H, K, L]`` scores: memory grows
  with the cache (linearly in L), not with the trial's ``[L, L]``. At the
  update's first epoch the outputs equal the whole-trial forward pass.
- **shuffled old episodes** (ReLIC's ``shuffle_old_episodes``,
  ``shuffle_episodes``): after each partial update the trial's complete
  episodes change places per env (the one in progress stays last), and
  the trial goes on over them in that order: the cache is re-encoded from
  the shuffled buffer and the later updates train on it (needs the
  model's per-episode positions, ``model.positions="episode"``).
- **the learning rate's clock** (``lr_clock``): ``"trial"`` gives every
  update of trial ``u`` the rate ``lr x lr_shape(u)``; ``"env_steps"``
  recomputes it before every update from ReLIC's env-step counter
  (:meth:`TransformerPPO.lr_count`, ReLIC's ``_step_sched`` after each
  update), ``lr_shape`` then a shape over env steps (ReLIC's warm-up and
  cosine, :func:`agentrl.schedule.warmup_cosine_shape`).
- **Sink-KV** (``model.attention_sink``): the models' learned per-head sink
  key and value; acting, re-encoding and training all use it (tested
  equal to the full forward pass with the sink on).

Advantages run across episode boundaries by default (the trial is the
episode, RL²'s objective; see :func:`agentrl.rl.ppo.gae_across_episodes`);
with ``episode_steps`` (``algo.advantage_scope="episode"``) they also stop
at every episode's end, as ReLIC's. A chunk that ends before the trial
(and, per episode, inside an episode) bootstraps from the critic's value
of the next step.
Episodes are assumed to last the env's ``horizon`` (Dark Room, bandits,
Point-Robot): a trial is ``L`` steps.

**Actions** go through :class:`agentrl.rl.nets.ActionHead`, the PPO
source's and RL²'s head: categorical logits for ``Discrete`` spaces; for
``Box`` spaces a diagonal Gaussian in units of half the box width, whose
mean is the model's ``"mse"`` head output (in the env's units) and whose
log standard deviation is a learned state-independent vector
(``PolicyParams.log_std``, initialised at ``init_log_std``). The env gets
the clipped, rescaled sample and the model's next token the env's action;
the log-probability is the unclipped sample's. The actor's mean head
starts near the box centre (its kernel scaled by ``0.01`` x half the
width, PPO's small policy-output init). The policy evaluation gets
(:meth:`TransformerPPO.weights`) is then a :class:`GaussianPolicy`: the
model with the learned log std in the env's units, so that the acting rule
``"sample"`` at temperature 1 draws from the distribution training's
rollouts drew from and ``"greedy"`` takes the clipped mean (tested).

:class:`TransformerPPO` has the :class:`agentrl.online.ppo.TrialPPO`
interface: ``init(key, hp)``, ``update(state, hp) -> (state, metrics)``
(one trial) and ``__call__(key, hp)`` (the whole run as one ``lax.scan``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from agentrl.models.transformer import DecisionModel
from agentrl.online.ppo import hparam, trial_metrics, trial_optimizer
from agentrl.prng import key_scan
from agentrl.rl.nets import ActionHead
from agentrl.rl.ppo import (
    Learner,
    batch_loss,
    epoch_permutations,
    gae_across_episodes,
    mean_metrics,
    sgd_epochs,
)

PREFILL = 128  # most tokens a re-encoding chunk attends from at once


@dataclasses.dataclass(frozen=True)
class TransformerShape:
    """Static settings: trial length ``trial_steps``, chunk ``update_every``."""

    num_envs: int
    trial_steps: int
    update_every: int
    num_epochs: int
    num_minibatches: int
    num_updates: int
    grad_clip: float | None
    lr_shape: Callable[[Any], Any] | None = None
    init_log_std: float = -0.5  # continuous actions: the Gaussian's initial log std
    #: advantages stop every this many steps too (an episode: ReLIC's
    #: per-episode returns); 0: only at the trial's end (RL²'s)
    episode_steps: int = 0
    adam_b2: float = 0.999  # Adam's second-moment decay (train.adam_b2)
    #: ReLIC's full update: the trial's last update over all its steps
    full_update: bool = False
    #: advantages normalised per minibatch (PureJaxRL's; ReLIC's are not)
    normalize_advantages: bool = True
    #: habitat-baselines' clipped value loss, ReLIC's (rl.ppo.clipped_value)
    clip_values: bool = False
    #: ReLIC's shuffle_old_episodes: after each partial update, the trial's
    #: complete episodes change places (per env), every this many steps (the
    #: horizon); 0: off
    shuffle_episodes: int = 0
    #: ReLIC's grad_accum_mini_batches: a step's gradient is the sum of this
    #: many equal parts' mean-loss gradients (this many times the
    #: minibatch's mean), clipped and fed to Adam as such
    summed_minibatches: int = 1
    #: what ``lr_shape`` reads: ``"trial"``, the trial's index (one rate a
    #: trial); ``"env_steps"``, ReLIC's env-step counter before every update
    #: (:meth:`TransformerPPO.lr_count`)
    lr_clock: str = "trial"


def episode_ends(start, length: int, episode_steps: int) -> jax.Array:
    """``[length]`` bool: which of the trial's steps ``start ..
    start + length - 1`` end an episode of ``episode_steps`` (all ``False``
    for 0: advantages then stop only at the trial's end)."""
    if episode_steps == 0:
        return jnp.zeros(length, bool)
    return (start + jnp.arange(length) + 1) % episode_steps == 0


def shuffle_episodes(key, buf: dict, done, horizon: int) -> dict:
    """``buf``'s leaves ``[n, L, ...]`` with the episodes of ``horizon`` steps
    that end by step ``done`` (traced) in a random order, drawn per env from
    ``key``; the later steps stay in place (ReLIC's ``shuffle_episodes``:
    the episode in progress stays last)."""
    n, length = buf["reward"].shape
    episodes = length // horizon
    index = jnp.arange(episodes)
    # complete episodes draw a random sort key in [0, 1); the rest keep
    # their places after them
    keys = jax.random.uniform(key, (n, episodes))
    order = jnp.argsort(jnp.where(index < done // horizon, keys, 1.0 + index), 1)
    step = jnp.arange(length)
    rows = order[:, step // horizon] * horizon + step % horizon  # [n, L]

    def take(x):
        idx = rows.reshape(rows.shape + (1,) * (x.ndim - 2))
        return jnp.take_along_axis(x, idx, axis=1)

    return jax.tree.map(take, buf)


class PolicyParams(NamedTuple):
    """The actor of a continuous-action trainer: the model's parameters (its
    output is the Gaussian's mean) and the state-independent ``log_std [A]``."""

    model: Any  # nnx.State
    log_std: jax.Array


class GaussianPolicy(nnx.Module):
    """Transformer PPO's trained policy over ``Box`` actions, as evaluation gets it.

    The actor's ``DecisionModel`` (``model``; its ``"mse"`` head gives the
    Gaussian's mean in the env's units) and the learned state-independent
    log std in the env's units (``log_std [A]``:
    :meth:`agentrl.rl.nets.ActionHead.env_log_std` of the trainer's), which
    every output carries as ``out.log_std``, broadcast to its mean's shape.
    The model agents' acting rules
    (:func:`~agentrl.agents.model_agents.select_action`) then act with the
    Gaussian training sampled from: ``"sample"`` at temperature 1 draws
    from the distribution training's rollouts drew from (mean + std x N(0,
    1), clipped to the box), ``"greedy"`` takes the clipped mean.
    ``config`` is the model's; ``init_cache`` and ``prefill`` are the
    model's, ``decode`` and ``__call__`` the model's with the std.
    """

    def __init__(self, model: DecisionModel, log_std: jax.Array):
        self.config = model.config
        self.model = model
        self.log_std = nnx.Param(jnp.asarray(log_std, jnp.float32))

    def _with_std(self, out):
        std = jnp.broadcast_to(self.log_std[...], out.action.shape)
        return out.replace(log_std=std)

    def __call__(self, *args: Any, **kwargs: Any):
        return self._with_std(self.model(*args, **kwargs))

    def init_cache(self, *args: Any, **kwargs: Any):
        return self.model.init_cache(*args, **kwargs)

    def decode(self, cache, obs, prev_action, prev_reward):
        out, cache = self.model.decode(cache, obs, prev_action, prev_reward)
        return self._with_std(out), cache

    def prefill(self, *args: Any, **kwargs: Any):
        """The model's (its outputs are the means, an array)."""
        return self.model.prefill(*args, **kwargs)


class TransformerState(NamedTuple):
    actor: Any  # nnx.State of the actor's parameters (PolicyParams: Box actions)
    critic: Any
    opt_state: Any
    key: jax.Array
    update: jax.Array


class Acting(NamedTuple):
    """The acting scan's carry (leaves ``[env, ...]``)."""

    actor: Any  # the acting weights
    cache: Any  # the actor's KV cache of the trial so far
    obs: Any
    env_state: Any
    prev_action: jax.Array
    prev_reward: jax.Array
    buf: dict  # the trial's tokens: obs, action, reward, raw, logp [env, L, ...]


class ChunkCarry(NamedTuple):
    """The trial's scan over chunks carries the learner and the acting."""

    actor: Any
    critic: Any
    opt_state: Any
    cache: Any
    scratch: Any  # the critic's prefix cache (partial updates), or None
    obs: Any
    env_state: Any
    prev_action: jax.Array
    prev_reward: jax.Array
    buf: dict


class TransformerPPO:
    """See the module docstring. ``model_config``: a completed ModelConfig."""

    def __init__(self, env: Any, shape: TransformerShape, model_config, sample_task):
        self.head = ActionHead(env.action_space(env.default_params))
        wanted = "categorical" if self.head.discrete else "mse"
        if model_config.head != wanted:
            raise ValueError(
                f"transformer PPO needs model.head={wanted!r} for this action space "
                f"(continuous: the model gives the Gaussian's mean), got "
                f"{model_config.head!r}"
            )
        if model_config.token_layout != "step":
            raise ValueError(
                "transformer PPO needs model.token_layout='step', got "
                f"{model_config.token_layout!r}"
            )
        if shape.trial_steps % shape.update_every:
            raise ValueError(
                f"update_every={shape.update_every} must divide the trial's "
                f"{shape.trial_steps} steps"
            )
        if model_config.max_steps < shape.trial_steps:
            raise ValueError(
                f"transformer PPO attends over the whole trial: model.max_steps="
                f"{model_config.max_steps} must be >= its {shape.trial_steps} steps"
            )
        self.env, self.shape, self.sample_task = env, shape, sample_task
        self.chunks = shape.trial_steps // shape.update_every  # updates a trial
        # chunks updated on their own steps (the last one not, with full_update)
        full = shape.full_update and self.chunks > 1  # K = L: already full
        self.partial = self.chunks - 1 if full else self.chunks
        # tokens per re-encoding piece: bounds its scores to [n, H, prefill,
        # prefill]; a divisor of K, so that every re-encoded prefix ends a piece
        self.prefill = max(
            d
            for d in range(1, min(PREFILL, shape.update_every) + 1)
            if shape.update_every % d == 0
        )
        self.config = model_config
        model = DecisionModel(model_config, rngs=nnx.Rngs(0))
        self.graphdef, _, self.rest = nnx.split(model, nnx.Param, ...)

    # ----------------------------------------------------------- the models
    def _init_params(self, key, policy: bool = False):
        """A model's parameters; ``policy`` with continuous actions: the
        actor's :class:`PolicyParams` (mean head near the box centre)."""
        model = DecisionModel(self.config, rngs=nnx.Rngs(key))
        if not policy or self.head.discrete:
            return nnx.split(model, nnx.Param, ...)[1]
        proj, half = model.head.proj, self.head.half.reshape(-1)
        proj.kernel[...] = proj.kernel[...] * (0.01 * half)
        proj.bias[...] = jnp.broadcast_to(self.head.center.reshape(-1), half.shape)
        log_std = jnp.full(self.head.out, self.shape.init_log_std, jnp.float32)
        return PolicyParams(nnx.split(model, nnx.Param, ...)[1], log_std)

    def model(self, params):
        """The ``DecisionModel`` of ``params`` (an actor's or the critic's)."""
        if isinstance(params, PolicyParams):
            params = params.model
        return nnx.merge(self.graphdef, params, self.rest)

    def policy_scores(self, out: jax.Array) -> jax.Array:
        """The head's input from the model's action output ``[..., A]``:
        logits, or the Gaussian's mean in half box widths."""
        out = out.astype(jnp.float32)
        if self.head.discrete:
            return out
        return (out - self.head.center.reshape(-1)) / self.head.half.reshape(-1)

    @staticmethod
    def log_std(actor) -> jax.Array | None:
        """The Gaussian's ``log_std [A]`` (``None`` for discrete actions)."""
        return actor.log_std if isinstance(actor, PolicyParams) else None

    def logp_entropy(self, actor, out: jax.Array, raw: jax.Array):
        """``(log pi(raw), entropy)`` ``[...]`` of the actor's ``out [..., A]``."""
        return self.head.logp_entropy(self.policy_scores(out), self.log_std(actor), raw)

    def weights(self, state: TransformerState):
        """The trained policy (acts with its KV cache): the actor's
        ``DecisionModel``; over ``Box`` actions a :class:`GaussianPolicy`,
        the model with the learned log std (in the env's units)."""
        return self.policy(state.actor)

    def policy(self, actor):
        """The policy evaluation acts with, of the actor's parameters."""
        model = self.model(actor)
        if not isinstance(actor, PolicyParams):
            return model
        return GaussianPolicy(model, self.head.env_log_std(actor.log_std))

    def forward(self, params, obs, action, reward):
        """``[B, L, A]`` outputs of the model over whole token buffers."""
        return self.model(params)(obs, action, reward, deterministic=True).action

    def _optimizer(self, hp: dict, count) -> optax.GradientTransformation:
        """The actor's and critic's chain with the rate of ``lr_shape(count)``
        (summed minibatches' gradients scaled as
        :func:`agentrl.rl.ppo.optimizer` says)."""
        return trial_optimizer(self.shape, hp, count, self.shape.summed_minibatches)

    def lr_count(self, update, start):
        """What ``lr_shape`` reads at the update on the chunk acted from step
        ``start`` of trial ``update`` (both may be traced).

        ``lr_clock="trial"``: ``update`` (every update of a trial at one
        rate). ``"env_steps"``: ReLIC's counter, the env steps (all envs')
        of the run's chunks before the previous one: its trainer steps the
        scheduler to the steps counted after each update, and counts an
        update's chunk only after that (``relic/trainer/
        transformers_trainer.py`` ``_update_agent``, then
        ``_coalesce_post_step``), so the run's first two updates read 0 and
        each later one the steps up to the start of the chunk before its own.
        """
        s = self.shape
        if s.lr_clock == "trial":
            return update
        chunk = update * self.chunks + start // s.update_every  # the run's index
        # float32: a full-scale run's env steps overflow int32
        before = jnp.maximum(chunk - 1, 0).astype(jnp.float32)
        return before * float(s.update_every * s.num_envs)

    def init(self, key: jax.Array, hp: dict) -> TransformerState:
        del hp
        k_a, k_c, key = jax.random.split(key, 3)
        actor, critic = self._init_params(k_a, policy=True), self._init_params(k_c)
        opt = self._optimizer({"lr": 1.0, "weight_decay": 0.0}, 0)
        return TransformerState(
            actor, critic, opt.init((actor, critic)), key, jnp.zeros((), jnp.int32)
        )

    # ------------------------------------------------------------- the trial
    def _empty_buffers(self, obs_example):
        """``action``: the env's (the model's input); ``raw``: the head's
        sample (what the learner scores; the same ints for discrete actions)."""
        n, length = self.shape.num_envs, self.shape.trial_steps
        space, shape = self.head.space, self.head.shape
        buf = {
            "obs": jnp.zeros((n, length, *obs_example.shape[1:]), obs_example.dtype),
            "action": jnp.zeros((n, length, *shape), space.dtype),
            "raw": jnp.zeros((n, length, *shape), space.dtype),
            "reward": jnp.zeros((n, length), jnp.float32),
            "logp": jnp.zeros((n, length), jnp.float32),
        }
        if self.shape.shuffle_episodes:  # each row's acting step (for the logs)
            step = jnp.arange(length, dtype=jnp.int32)
            buf["step"] = jnp.broadcast_to(step, (n, length))
        return buf

    # ------------------------------------------------- cached chunk passes
    def _chunk(self, model, cache, x, pos):
        """Attend tokens ``x [B, C, d]`` at consecutive ``pos [C]`` to ``cache``
        (and causally to each other). Returns ``(outputs [B, C, A], cache)``
        with the chunk written at slots ``pos`` (the cache spans the trial)."""
        keys, values, router = [], [], []
        for i, block in enumerate(model.blocks):
            x, _, k, v, r = block.decode(
                x,
                pos,
                cache.keys[i],
                cache.values[i],
                cache.router_inputs[i],
                cache.slot_pos,
                cache.capacity,
                0,
            )
            keys.append(k)
            values.append(v)
            router.append(r)
        slot_pos = jax.lax.dynamic_update_slice(cache.slot_pos, pos, (pos[0],))
        cache = cache._replace(
            keys=tuple(keys), values=tuple(values), router_inputs=tuple(router)
        )
        out = model.head(model.ln_f(x))[0]
        return out, cache._replace(slot_pos=slot_pos)

    def _encode(self, params, buf, upto, into=None):
        """The cache of the first ``upto`` steps of ``buf`` under ``params``.

        ``upto`` (traced) ``< L``; later slots are marked empty. The model's
        loop-based prefill (:meth:`agentrl.models.DecisionModel.prefill`)
        in pieces of ``prefill`` tokens (a divisor of K, so ``upto``, a
        multiple of K, ends a piece): each piece attends to the slots before
        it and causally to itself, so re-encoding a prefix of ``u`` steps
        costs ``~u**2 / 2`` token pairs, not ``L**2``, with peak attention
        memory ``[n, H, prefill, prefill]``; its compiled size does not
        grow with ``L``. ``into``: a cache of the trial whose buffers to
        overwrite in place (the loop-carried one; a new one by default).
        """
        length = self.shape.trial_steps
        _, cache = self.model(params).prefill(
            buf["obs"],
            buf["action"],
            buf["reward"],
            upto,
            piece=self.prefill,
            max_steps=length,
            cache=into,
        )
        return cache

    @staticmethod
    def _mark(cache, upto):
        """``cache`` holding the steps before ``upto`` (later slots empty)."""
        slots = jnp.arange(cache.capacity, dtype=jnp.int32)
        return cache._replace(
            slot_pos=jnp.where(slots < upto, slots, -1),
            next_pos=jnp.asarray(upto, jnp.int32),
        )

    def chunk_forward(self, params, prefix, buf, start, size: int):
        """Outputs ``[B, size, A]`` of steps ``start .. start + size`` of
        ``buf`` attending to the ``prefix`` cache (the steps before
        ``start``, held fixed) and causally to each other."""
        model = self.model(params)
        tokens = model.embed.steps(buf["obs"], buf["action"], buf["reward"])
        x = jax.lax.dynamic_slice_in_dim(tokens, start, size, 1)
        pos = start + jnp.arange(size, dtype=jnp.int32)
        return self._chunk(model, prefix, x, pos)[0]

    def _chunk_values(self, critic, prefix, buf, start):
        """Critic values ``[B, K + 1]`` of steps ``start .. start + K``
        attending to ``prefix`` (the critic's cache of the steps before
        ``start``): the chunk's and the bootstrap's (step ``start + K``; a
        zero token past the trial's end, whose value is not used). The
        pass's cache writes are dropped, so ``prefix`` is not copied."""
        model = self.model(critic)
        tokens = model.embed.steps(buf["obs"], buf["action"], buf["reward"])
        tokens = jnp.pad(tokens, ((0, 0), (0, 1), (0, 0)))
        size = self.shape.update_every + 1
        x = jax.lax.dynamic_slice_in_dim(tokens, start, size, 1)
        pos = start + jnp.arange(size, dtype=jnp.int32)
        return self._chunk(model, prefix, x, pos)[0][..., 0]

    def _outputs(self, params, batch, start, size: int):
        """Actor logits and critic values ``[B, size, ...]`` of the update's
        steps ``start .. start + size``.

        The whole trial (``size = L``): the full forward pass. Partial
        updates (``size = K``): the chunk's K steps attending to the caches
        of the steps before it
        (computed by the weights that acted / the critic before the update,
        held fixed), so the backward pass stores ``[B, K]`` activations and
        ``[B, H, K, L]`` scores, never the whole trial's.
        """
        actor, critic = params
        if size == self.shape.trial_steps:
            args = (batch["obs"], batch["action"], batch["reward"])
            return self.forward(actor, *args), self.forward(critic, *args)[..., 0]
        logits = self.chunk_forward(actor, batch["actor_prefix"], batch, start, size)
        value = self.chunk_forward(critic, batch["critic_prefix"], batch, start, size)
        return logits, value[..., 0]

    def _loss(self, params, batch, hp, start, size: int):
        logits, value = self._outputs(params, batch, start, size)
        logp, entropy = self.logp_entropy(params[0], logits, batch["chunk_raw"])
        return batch_loss(
            logp,
            entropy,
            value,
            batch,
            hparam(hp, "clip_eps"),
            hparam(hp, "vf_coef"),
            hparam(hp, "ent_coef"),
            self.shape.normalize_advantages,
            self.shape.clip_values,
        )

    def update(self, state: TransformerState, hp: dict):
        """One trial in every env, with ``L / update_every`` PPO updates
        (with ``full_update``, the last over the whole trial)."""
        new, metrics, _, _ = self.run_trial(state, hp)
        return new, metrics

    def run_trial(self, state: TransformerState, hp: dict):
        """:meth:`update` that also returns the trial's token buffer (``obs``,
        ``action``, ``reward``, ``logp`` ``[env, L]``) and the actor weights
        each chunk acted with (stacked ``[chunks, ...]``)."""
        s = self.shape
        n, length, chunks = s.num_envs, s.trial_steps, self.chunks
        key, k_task, k_reset, k_chunks = jax.random.split(state.key, 4)
        tasks = jax.vmap(self.sample_task)(jax.random.split(k_task, n))
        obs, env_state = jax.vmap(self.env.reset)(jax.random.split(k_reset, n), tasks)
        # the critic's prefix cache, re-encoded into the same buffers each chunk
        scratch = self.model(state.critic).init_cache(n, length) if chunks > 1 else None
        carry = ChunkCarry(
            actor=state.actor,
            critic=state.critic,
            opt_state=state.opt_state,
            cache=self.model(state.actor).init_cache(n, length),
            scratch=scratch,
            obs=obs,
            env_state=env_state,
            prev_action=jnp.zeros((n, *self.head.shape), self.head.space.dtype),
            prev_reward=jnp.zeros((n,), jnp.float32),
            buf=self._empty_buffers(obs),
        )

        def tx(start):  # the chain of the update on the chunk from ``start``
            return self._optimizer(hp, self.lr_count(state.update, start))

        keys = jax.random.split(k_chunks, chunks)
        carry, (m, acting) = key_scan(
            lambda c, xs: self._trial_chunk(tx, tasks, hp, c, xs),
            carry,
            (jnp.arange(self.partial), keys[: self.partial]),
        )
        if self.partial < chunks:  # ReLIC's full update ends the trial
            start = length - s.update_every
            carry, last = self._act_and_update(
                tx, tasks, hp, carry, start, keys[-1], full=True
            )
            m, acting = jax.tree.map(
                lambda a, b: jnp.concatenate([a, b[None]]), (m, acting), last
            )
        metrics = mean_metrics(m, hparam(hp, "vf_coef"), hparam(hp, "ent_coef"))
        metrics.update(self._trial_metrics(self._acting_order(carry.buf)))
        new = TransformerState(
            carry.actor, carry.critic, carry.opt_state, key, state.update + 1
        )
        return new, metrics, carry.buf, acting

    @staticmethod
    def _acting_order(buf) -> jax.Array:
        """The trial's rewards ``[n, L]`` in the order they were acted (the
        buffer's after shuffled episodes)."""
        if "step" not in buf:
            return buf["reward"]
        rows = jnp.arange(buf["step"].shape[0])[:, None]
        return jnp.zeros_like(buf["reward"]).at[rows, buf["step"]].set(buf["reward"])

    def _trial_metrics(self, rewards):
        """:func:`~agentrl.online.ppo.trial_metrics` of trials whose episodes
        last the env's horizon."""
        length = self.shape.trial_steps
        ends = episode_ends(0, length, self.env.horizon)
        return trial_metrics(rewards, jnp.broadcast_to(ends, rewards.shape))

    def _act_step(self, tasks, carry: Acting, xs):
        """One step of every env with the KV cache; its token into ``buf``."""
        t, k = xs
        k_act, k_step = jax.random.split(k)
        out, cache = self.model(carry.actor).decode(
            carry.cache, carry.obs, carry.prev_action, carry.prev_reward
        )
        scores = self.policy_scores(out.action)
        log_std = self.log_std(carry.actor)
        raw = self.head.sample(k_act, scores, log_std)
        logp, _ = self.head.logp_entropy(scores, log_std, raw)
        action = self.head.to_env(raw)
        next_obs, env_state, reward, _, _, _ = jax.vmap(self.env.step)(
            jax.random.split(k_step, self.shape.num_envs),
            carry.env_state,
            action,
            tasks,
        )
        reward = jnp.asarray(reward, jnp.float32)
        buf = dict(
            carry.buf,
            obs=carry.buf["obs"].at[:, t].set(carry.obs),
            action=carry.buf["action"].at[:, t].set(action),
            raw=carry.buf["raw"].at[:, t].set(raw),
            reward=carry.buf["reward"].at[:, t].set(reward),
            logp=carry.buf["logp"].at[:, t].set(logp),
        )
        carry = Acting(carry.actor, cache, next_obs, env_state, action, reward, buf)
        return carry, None

    def _act_chunk(self, tasks, carry: ChunkCarry, start, key) -> ChunkCarry:
        """Act the chunk's K steps from ``start``; the observation after it
        goes into ``buf`` (for the bootstrap value) if the trial goes on."""
        k_len, length = self.shape.update_every, self.shape.trial_steps
        acting, _ = key_scan(
            lambda c, xs: self._act_step(tasks, c, xs),
            Acting(*(getattr(carry, name) for name in Acting._fields)),
            (start + jnp.arange(k_len), jax.random.split(key, k_len)),
        )
        end = start + k_len
        at = jnp.minimum(end, length - 1)
        buf = acting.buf
        obs = buf["obs"].at[:, at].set(acting.obs)
        buf = dict(buf, obs=jnp.where(end < length, obs, buf["obs"]))
        return carry._replace(**acting._replace(buf=buf)._asdict())

    def _critic_values(self, carry: ChunkCarry, start, size: int):
        """``(critic values [B, size], bootstrap value [B], scratch)`` of the
        update's steps (partial updates: against the critic's re-encoded
        prefix cache; the whole trial: its full forward pass)."""
        length = self.shape.trial_steps
        critic, buf = carry.critic, carry.buf
        end = start + size
        if size < length:
            # the critic's, in the buffers of the last chunk's (in place)
            scratch = self._encode(critic, buf, start, into=carry.scratch)
            values = self._chunk_values(critic, scratch, buf, start)
            v_chunk, next_value = values[:, :-1], values[:, -1]
        else:
            scratch = carry.scratch
            values = self.forward(critic, buf["obs"], buf["action"], buf["reward"])
            v_chunk, next_value = values[..., 0], jnp.zeros(values.shape[0])
        return v_chunk, jnp.where(end < length, next_value, 0.0), scratch

    def _chunk_batch(self, carry: ChunkCarry, start, hp, size: int):
        """The update's training batch (GAE over its ``size`` steps from
        ``start``: a chunk's K, or the whole trial's L) and ``scratch``."""
        n, partial = self.shape.num_envs, size < self.shape.trial_steps
        buf = carry.buf

        def part(x):
            return jax.lax.dynamic_slice_in_dim(x, start, size, 1)

        if partial:
            # the steps before the chunk, as the acting weights saw them:
            # the acting cache with the chunk's slots marked empty (no copy)
            prefix = self._mark(carry.cache, start)
        v_chunk, next_value, scratch = self._critic_values(carry, start, size)
        adv = gae_across_episodes(
            v_chunk.T,
            next_value,
            part(buf["reward"]).T * hparam(hp, "reward_scale"),
            jnp.broadcast_to(
                episode_ends(start, size, self.shape.episode_steps)[:, None],
                (size, n),
            ),
            hparam(hp, "gamma"),
            hparam(hp, "gae_lambda"),
        ).T
        batch = {
            "obs": buf["obs"],
            "action": buf["action"],
            "reward": buf["reward"],
            "chunk_raw": part(buf["raw"]),
            "logp": part(buf["logp"]),
            "adv": adv,
            "target": adv + v_chunk,
            "value": v_chunk,
        }
        if partial:  # per-env caches (shared slots)
            batch["actor_prefix"] = prefix
            batch["critic_prefix"] = scratch
        return batch, scratch

    def _update(self, tx, hp, carry: ChunkCarry, start, size: int, key):
        """PPO's epochs on the update's batch with the chain ``tx``;
        ``(learner, metrics, scratch)``."""
        s = self.shape
        batch, scratch = self._chunk_batch(carry, start, hp, size)
        learner, m = sgd_epochs(
            tx,
            lambda params, b, h, at: self._loss(params, b, h, at, size),
            Learner((carry.actor, carry.critic), carry.opt_state),
            epoch_permutations(key, s.num_envs, s.num_epochs, s.num_minibatches),
            lambda idx: (_take_envs(batch, idx), hp, start),
        )
        return learner, {name: v.mean() for name, v in m.items()}, scratch

    def _trial_chunk(self, tx, tasks, hp, carry: ChunkCarry, xs):
        """Act one chunk of K steps, then update on it (the chunks' scan body)."""
        c, k = xs
        return self._act_and_update(
            tx, tasks, hp, carry, c * self.shape.update_every, k
        )

    def _act_and_update(self, tx, tasks, hp, carry: ChunkCarry, start, key, full=False):
        """Act the chunk of K steps from ``start``, then update on it, or with
        ``full`` on all the trial's ``L`` steps (ReLIC's full update, which
        ends the trial), with the chain ``tx(start)``; ``(carry, (metrics,
        the acting actor))``."""
        s = self.shape
        acting = carry.actor
        if s.shuffle_episodes:  # a third key only then: the others' draws stay
            k_act, k_perm, k_shuffle = jax.random.split(key, 3)
        else:
            k_act, k_perm = jax.random.split(key)
        carry = self._act_chunk(tasks, carry, start, k_act)
        span = (0, s.trial_steps) if full else (start, s.update_every)
        learner, m, scratch = self._update(tx(start), hp, carry, *span, k_perm)
        (actor, critic), cache, buf = learner.params, carry.cache, carry.buf
        if self.chunks > 1 and not full:
            # go on over the same context with the new weights (not after the
            # trial's last chunk: upto 0 skips every piece and shuffles none)
            end = start + s.update_every
            upto = jnp.where(end < s.trial_steps, end, 0)
            if s.shuffle_episodes:  # the context goes on in the new order
                buf = shuffle_episodes(k_shuffle, buf, upto, s.shuffle_episodes)
            cache = self._encode(actor, buf, upto, into=cache)
        carry = carry._replace(
            actor=actor,
            critic=critic,
            opt_state=learner.opt_state,
            cache=cache,
            scratch=scratch,
            buf=buf,
        )
        return carry, (m, acting)

    def __call__(self, key: jax.Array, hp: dict):
        state = self.init(key, hp)
        return jax.lax.scan(
            lambda st, _: self.update(st, hp), state, None, self.shape.num_updates
        )


def _take_envs(tree, idx):
    """``tree``'s leaves at envs ``idx`` (slot positions are shared: kept)."""

    def one(path, a):
        shared = any(getattr(p, "name", None) == "slot_pos" for p in path)
        return a if shared or a.ndim == 0 else a[idx]

    return jax.tree_util.tree_map_with_path(one, tree)
