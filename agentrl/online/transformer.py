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
- **Sink-KV** (``model.attention_sink``): the models' learned per-head sink
  key and value; acting, re-encoding and training all use it (tested
  equal to the full forward pass with the sink on).

Advantages run across episode boundaries (the trial is the episode; see
:func:`agentrl.online.ppo.gae_across_episodes`); a chunk that ends before
the trial does bootstraps from the critic's value of the next step. Discrete
actions only (categorical head). Episodes are assumed to last the env's
``horizon`` (Dark Room, bandits): a trial is ``L`` steps.

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

from agentrl.envs import spaces
from agentrl.online.ppo import _hp, _optimizer, gae_across_episodes

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
    grad_clip: float
    lr_shape: Callable[[Any], Any] | None = None


class TransformerState(NamedTuple):
    actor: Any  # nnx.State of the actor's parameters
    critic: Any
    opt_state: Any
    key: jax.Array
    update: jax.Array


class TransformerPPO:
    """See the module docstring. ``model_config``: a completed ModelConfig."""

    def __init__(self, env: Any, shape: TransformerShape, model_config, sample_task):
        from agentrl.models import DecisionModel

        if not spaces.is_discrete(env.action_space(env.default_params)):
            raise ValueError("transformer PPO supports discrete actions only")
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
        self.num_actions = int(env.action_space(env.default_params).n)

    # ----------------------------------------------------------- the models
    def _init_params(self, key):
        from agentrl.models import DecisionModel

        model = DecisionModel(self.config, rngs=nnx.Rngs(key))
        return nnx.split(model, nnx.Param, ...)[1]

    def model(self, params):
        return nnx.merge(self.graphdef, params, self.rest)

    def weights(self, state: TransformerState):
        """The trained policy: a ``DecisionModel`` (acts with its KV cache)."""
        return self.model(state.actor)

    def forward(self, params, obs, action, reward):
        """``[B, L, A]`` outputs of the model over whole token buffers."""
        return self.model(params)(obs, action, reward, deterministic=True).action

    def init(self, key: jax.Array, hp: dict) -> TransformerState:
        del hp
        k_a, k_c, key = jax.random.split(key, 3)
        actor, critic = self._init_params(k_a), self._init_params(k_c)
        opt = _optimizer(self.shape, {"lr": 1.0, "weight_decay": 0.0}, 0)
        return TransformerState(
            actor, critic, opt.init((actor, critic)), key, jnp.zeros((), jnp.int32)
        )

    # ------------------------------------------------------------- the trial
    def _empty_buffers(self, obs_example):
        n, length = self.shape.num_envs, self.shape.trial_steps
        return {
            "obs": jnp.zeros((n, length, *obs_example.shape[1:]), obs_example.dtype),
            "action": jnp.zeros((n, length), jnp.int32),
            "reward": jnp.zeros((n, length), jnp.float32),
            "logp": jnp.zeros((n, length), jnp.float32),
        }

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

    def _outputs(self, params, batch, start):
        """Actor logits and critic values ``[B, K, ...]`` of the chunk's steps.

        One chunk (``K = L``): the full forward pass. Partial updates: the
        chunk's K steps attending to the caches of the steps before it
        (computed by the weights that acted / the critic before the update,
        held fixed), so the backward pass stores ``[B, K]`` activations and
        ``[B, H, K, L]`` scores, never the whole trial's.
        """
        actor, critic = params
        k_len = self.shape.update_every
        if k_len == self.shape.trial_steps:
            args = (batch["obs"], batch["action"], batch["reward"])
            return self.forward(actor, *args), self.forward(critic, *args)[..., 0]
        logits = self.chunk_forward(actor, batch["actor_prefix"], batch, start, k_len)
        value = self.chunk_forward(critic, batch["critic_prefix"], batch, start, k_len)
        return logits, value[..., 0]

    def _loss(self, params, batch, hp, start):
        logits, value = self._outputs(params, batch, start)
        logp_all = jax.nn.log_softmax(logits)
        logp = jnp.take_along_axis(logp_all, batch["chunk_action"][..., None], -1)[
            ..., 0
        ]
        entropy = -jnp.sum(jnp.exp(logp_all) * logp_all, -1)

        def mean(x):
            return x.mean()

        adv = batch["adv"]
        mu = mean(adv)
        std = jnp.sqrt(mean(jnp.square(adv - mu)))
        adv = (adv - mu) / (std + 1e-8)
        log_ratio = logp - batch["logp"]
        ratio = jnp.exp(log_ratio)
        clip = _hp(hp, "clip_eps")
        pg = -mean(jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - clip, 1 + clip) * adv))
        vf = 0.5 * mean(jnp.square(value - batch["target"]))
        ent = mean(entropy)
        loss = pg + _hp(hp, "vf_coef") * vf - _hp(hp, "ent_coef") * ent
        kl = mean((ratio - 1.0) - log_ratio)
        return loss, {"pg_loss": pg, "vf_loss": vf, "entropy": ent, "approx_kl": kl}

    def update(self, state: TransformerState, hp: dict):
        """One trial in every env, with ``L / update_every`` PPO updates."""
        new, metrics, _, _ = self.run_trial(state, hp)
        return new, metrics

    def run_trial(self, state: TransformerState, hp: dict):
        """:meth:`update` that also returns the trial's token buffer (``obs``,
        ``action``, ``reward``, ``logp`` ``[env, L]``) and the actor weights
        each chunk acted with (stacked ``[chunks, ...]``)."""
        s = self.shape
        n, length, k_len = s.num_envs, s.trial_steps, s.update_every
        key, k_task, k_reset, k_chunks = jax.random.split(state.key, 4)
        tasks = jax.vmap(self.sample_task)(jax.random.split(k_task, n))
        obs, env_state = jax.vmap(self.env.reset)(jax.random.split(k_reset, n), tasks)
        buf = self._empty_buffers(obs)
        cache = self.model(state.actor).init_cache(n, length)
        tx = _optimizer(s, hp, state.update)
        chunks = length // k_len
        per = n // s.num_minibatches

        def act(carry, xs):
            actor, cache, obs, env_state, prev_a, prev_r, buf = carry
            t, k = xs
            k_act, k_step = jax.random.split(k)
            out, cache = self.model(actor).decode(cache, obs, prev_a, prev_r)
            logits = out.action.astype(jnp.float32)
            action = jax.random.categorical(k_act, logits).astype(jnp.int32)
            logp = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[
                :, 0
            ]
            next_obs, env_state, reward, _, _, _ = jax.vmap(self.env.step)(
                jax.random.split(k_step, n), env_state, action, tasks
            )
            reward = jnp.asarray(reward, jnp.float32)
            buf = {
                "obs": buf["obs"].at[:, t].set(obs),
                "action": buf["action"].at[:, t].set(action),
                "reward": buf["reward"].at[:, t].set(reward),
                "logp": buf["logp"].at[:, t].set(logp),
            }
            return (actor, cache, next_obs, env_state, action, reward, buf), None

        def chunk(carry, xs):
            actor, critic, opt_state, cache, scratch, obs, env_state = carry[:7]
            prev_a, prev_r, buf = carry[7:]
            acting = actor
            c, k = xs
            k_act, k_perm = jax.random.split(k)
            start = c * k_len
            end = start + k_len
            ts = start + jnp.arange(k_len)
            (_, cache, obs, env_state, prev_a, prev_r, buf), _ = jax.lax.scan(
                act,
                (actor, cache, obs, env_state, prev_a, prev_r, buf),
                (ts, jax.random.split(k_act, k_len)),
            )
            # the next step's observation, for the bootstrap value (if any)
            inside = end < length
            at = jnp.minimum(end, length - 1)
            buf = dict(
                buf, obs=jnp.where(inside, buf["obs"].at[:, at].set(obs), buf["obs"])
            )

            def part(x):
                return jax.lax.dynamic_slice_in_dim(x, start, k_len, 1)

            if chunks > 1:
                # the steps before the chunk, as the acting weights saw them:
                # the acting cache with the chunk's slots marked empty (no copy)
                prefix = self._mark(cache, start)
                # the critic's, in the buffers of the last chunk's (in place)
                critic_prefix = self._encode(critic, buf, start, into=scratch)
                scratch = critic_prefix
                values = self._chunk_values(critic, critic_prefix, buf, start)
                v_chunk, next_value = values[:, :-1], values[:, -1]
            else:
                values = self.forward(critic, buf["obs"], buf["action"], buf["reward"])[
                    ..., 0
                ]
                v_chunk, next_value = values, values[:, at]
            next_value = jnp.where(inside, next_value, 0.0)
            adv = gae_across_episodes(
                v_chunk.T,
                next_value,
                part(buf["reward"]).T * _hp(hp, "reward_scale"),
                jnp.zeros((k_len, n), bool),
                _hp(hp, "gamma"),
                _hp(hp, "gae_lambda"),
            ).T
            batch = {
                "obs": buf["obs"],
                "action": buf["action"],
                "reward": buf["reward"],
                "chunk_action": part(buf["action"]),
                "logp": part(buf["logp"]),
                "adv": adv,
                "target": adv + v_chunk,
            }
            if chunks > 1:  # per-env caches (slot positions are shared)
                batch["actor_prefix"] = prefix
                batch["critic_prefix"] = critic_prefix

            def take(tree, idx):
                def one(path, a):
                    shared = any(getattr(p, "name", None) == "slot_pos" for p in path)
                    return a if shared or a.ndim == 0 else a[idx]

                return jax.tree_util.tree_map_with_path(one, tree)

            def sgd(cc, idx):
                params, opt_state = cc
                mb = take(batch, idx)
                grads, m = jax.grad(self._loss, has_aux=True)(params, mb, hp, start)
                updates, opt_state = tx.update(grads, opt_state, params)
                return (optax.apply_updates(params, updates), opt_state), m

            perms = jax.vmap(lambda kk: jax.random.permutation(kk, n))(
                jax.random.split(k_perm, s.num_epochs)
            ).reshape(s.num_epochs * s.num_minibatches, per)
            ((actor, critic), opt_state), m = jax.lax.scan(
                sgd, ((actor, critic), opt_state), perms
            )
            if chunks > 1:  # go on over the same context with the new weights
                # (not after the trial's last chunk: upto 0 skips every piece)
                upto = jnp.where(inside, end, 0)
                cache = self._encode(actor, buf, upto, into=cache)
            metrics = {name: v.mean() for name, v in m.items()}
            return (
                actor,
                critic,
                opt_state,
                cache,
                scratch,
                obs,
                env_state,
                prev_a,
                prev_r,
                buf,
            ), (metrics, acting)

        prev_a = jnp.zeros((n,), jnp.int32)
        prev_r = jnp.zeros((n,), jnp.float32)
        # the critic's prefix cache, re-encoded into the same buffers each chunk
        scratch = self.model(state.critic).init_cache(n, length) if chunks > 1 else None
        carry = (state.actor, state.critic, state.opt_state, cache, scratch)
        carry = (*carry, obs, env_state)
        carry = (*carry, prev_a, prev_r, buf)
        carry, (m, acting) = jax.lax.scan(
            chunk, carry, (jnp.arange(chunks), jax.random.split(k_chunks, chunks))
        )
        actor, critic, opt_state, *_, buf = carry
        metrics = {name: v.mean() for name, v in m.items()}
        metrics["loss"] = (
            metrics["pg_loss"]
            + _hp(hp, "vf_coef") * metrics["vf_loss"]
            - _hp(hp, "ent_coef") * metrics["entropy"]
        )
        horizon = self.env.horizon
        rewards = buf["reward"]
        metrics["reward"] = rewards.mean()
        metrics["trial_return"] = rewards.sum(1).mean()
        metrics["episode_return_first"] = rewards[:, :horizon].sum(1).mean()
        metrics["episode_return_last"] = rewards[:, -horizon:].sum(1).mean()
        new = TransformerState(actor, critic, opt_state, key, state.update + 1)
        return new, metrics, buf, acting

    def __call__(self, key: jax.Array, hp: dict):
        state = self.init(key, hp)
        return jax.lax.scan(
            lambda st, _: self.update(st, hp), state, None, self.shape.num_updates
        )
