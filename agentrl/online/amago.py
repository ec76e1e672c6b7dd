"""AMAGO-style off-policy in-context RL over whole trials (Grigsby et al., 2024).

One causal transformer (the ``DecisionModel`` of :mod:`agentrl.models`,
``"step"`` token layout: ``obs_t``, ``a_{t-1}``, ``r_{t-1}`` per token) is
the shared sequence model of an actor and an ensemble of critics, trained
off-policy from a replay of whole multi-episode trials:

- **collection**: every update runs one trial of ``L = trial_episodes *
  horizon`` steps in each of ``num_envs`` environments (a fresh training
  task each), acting with the KV cache and AMAGO's randomised epsilon-greedy
  (each trial draws ``u ~ U[0, 1)`` and explores with ``u * eps(t)``,
  ``eps`` annealed linearly from ``eps_start`` to ``eps_end`` over
  ``explore_steps`` steps per env); with ``explore_window = (start, end)``
  (AMAGO's T-Maze exploration) the steps ``t`` of an episode with ``start <
  t < horizon - end`` explore with ``0.5 / horizon`` instead; the trials go
  into the replay.
- **replay** (:class:`Replay`): a ring buffer of whole trials on the device,
  ``[capacity, L, ...]``; the oldest trials are overwritten; a batch is
  ``batch_size`` whole trials drawn uniformly from the filled slots.
- **multi-gamma heads** on the trunk's features ``h [B, L, d]``: an actor
  with a categorical policy per discount (``[B, L, G, A]``; the last discount
  is the one that acts, its logits the ``DecisionModel``'s own head, so the
  trained policy is a plain ``DecisionModel`` for evaluation) and
  ``num_critics`` critics of ``Q(s, ., gamma) [B, L, C, G, A]``.
- **critic loss**: squared TD error against :func:`td_targets` from
  target heads (EMA, ``tau`` per gradient step) of the actor and critics on
  the same trunk features (AMAGO keeps no target trunk), the bootstrap
  ``V(s') = sum_a pi_targ(a | s') Q_targ(s', a)`` reduced by the min over a
  random subset of ``critics_in_target`` critics (REDQ's clipped double Q;
  their mean when ``online_coeff`` is 0, as AMAGO).
  The trial is the episode: bootstrapping runs across its episodes and stops
  at its last step.
- **actor loss** (AMAGO's ``online_coeff`` x policy improvement +
  ``offline_coeff`` x filtered BC): ``-min_c sum_a pi(a|s) Q_c(s, a)`` with
  the critics and the features frozen (the gradient reaches the actor
  through ``pi`` only), plus ``-1[A(s, a) > 0] log pi(a|s)`` on the replayed
  actions, ``A = Q(s, a) - V(s)`` (critic means). Both for every discount.
  Total: actor loss + ``critic_coeff`` x critic loss; the trunk learns from
  both.
- **policy**: with ``prob_clip = (low, high)`` (AMAGO's ``Discrete``:
  0.001, 0.99) each probability is clipped and renormalised wherever the
  trainer reads the policy (collection, both actor terms, the targets);
  evaluation's acting rules read the model's logits, unclipped.
- **value scale**: instead of AMAGO's PopArt, every critic predicts
  ``(1 - gamma) x`` its return (targets ``(1 - gamma) r + gamma V'``), a
  named deviation. Since returns stop at the trial's last step, that bounds
  a discount's values by ``(1 - gamma**T) x`` the largest reward, not by the
  reward itself: for the acting discount 0.999 over trials of T = 100 /
  160 / 200 steps about 0.10 / 0.15 / 0.18 of it (0.011 over the T-Maze's
  11 steps at L = 10; 0.1's: all of it), so its TD errors and
  policy-improvement term are 5-90x smaller than the short discounts' and
  its head is moved mostly by the filtered BC term, where PopArt scales
  each discount apart.

Discrete actions only. A trial is ``trial_episodes x horizon`` steps; on
families whose episodes end early (Dark Key-to-Door, at the door) it
holds more episodes than that, as the reference's fixed meta-horizon
does. :class:`AmagoTrainer` has the online trainers' interface
(``init``/``update``/``__call__``/``weights``); :func:`amago_program` maps
an experiment config onto it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

import agentrl.envs.spaces as spaces
from agentrl.models.config import complete_model_config
from agentrl.models.transformer import DecisionModel
from agentrl.online.ppo import hparam, trial_metrics, trial_optimizer
from agentrl.online.program import OnlineProgram, training_tasks
from agentrl.prng import key_scan
from agentrl.rl.ppo import Learner, sgd_step
from agentrl.schedule import schedule_shape

#: the traced hyperparameters ``hp`` (AMAGO's defaults: ``Agent`` and
#: ``Experiment`` in amago/agent.py, amago/experiment.py)
DEFAULT_HPARAMS = {
    "lr": 1e-4,
    "weight_decay": 1e-3,
    "tau": 0.003,
    "online_coeff": 1.0,
    "offline_coeff": 0.1,
    "critic_coeff": 10.0,
    "reward_scale": 10.0,
    "eps_start": 1.0,
    "eps_end": 0.05,
}
HPARAMS = tuple(DEFAULT_HPARAMS)


def amago_hparams(**changes: float) -> dict[str, jax.Array]:
    """``hp`` for a trainer run outside an experiment (tests, benchmarks)."""
    unknown = sorted(set(changes) - set(HPARAMS))
    if unknown:
        raise ValueError(f"unknown AMAGO hparams {unknown}; known: {list(HPARAMS)}")
    return {k: jnp.float32(v) for k, v in {**DEFAULT_HPARAMS, **changes}.items()}


# ---------------------------------------------------------------- replay
class Replay(NamedTuple):
    """A ring buffer of whole trials: ``obs [capacity, L, ...]``, ``action``,
    ``reward [capacity, L]`` and ``count [] int32`` (trials written so far;
    trial ``i`` lives in slot ``i % capacity``)."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    count: jax.Array

    @property
    def capacity(self) -> int:
        return self.action.shape[0]


def replay_init(capacity: int, trial_steps: int, obs_example: jax.Array) -> Replay:
    """An empty replay for trials of ``trial_steps`` steps of ``obs_example``'s
    observations (one observation, unbatched)."""
    obs = jnp.asarray(obs_example)
    return Replay(
        obs=jnp.zeros((capacity, trial_steps, *obs.shape), obs.dtype),
        action=jnp.zeros((capacity, trial_steps), jnp.int32),
        reward=jnp.zeros((capacity, trial_steps), jnp.float32),
        count=jnp.zeros((), jnp.int32),
    )


def replay_add(replay: Replay, trials: dict[str, jax.Array]) -> Replay:
    """``replay`` with the ``n`` trials ``{obs, action, reward} [n, L, ...]``
    written after the last ones, wrapping around (``n <= capacity``)."""
    n = trials["action"].shape[0]
    slots = (replay.count + jnp.arange(n, dtype=jnp.int32)) % replay.capacity
    return Replay(
        obs=replay.obs.at[slots].set(trials["obs"]),
        action=replay.action.at[slots].set(trials["action"]),
        reward=replay.reward.at[slots].set(trials["reward"]),
        count=replay.count + n,
    )


def replay_sample(replay: Replay, key: jax.Array, batch: int) -> dict[str, jax.Array]:
    """``batch`` whole trials ``{obs, action, reward} [batch, L, ...]``, drawn
    uniformly (with replacement) from the filled slots (at least one)."""
    filled = jnp.maximum(jnp.minimum(replay.count, replay.capacity), 1)
    idx = jax.random.randint(key, (batch,), 0, filled)
    return {
        "obs": replay.obs[idx],
        "action": replay.action[idx],
        "reward": replay.reward[idx],
    }


# ----------------------------------------------------------- loss pieces
def td_targets(reward, done, next_value, gammas, reward_scale):
    """Multi-gamma TD targets ``[B, L, G]`` in the critics' scale.

    ``reward``, ``done [B, L]`` (``done`` 1 where the step ends the trial);
    ``next_value [B, L, G]``: the bootstrap ``V(s_{t+1})`` of each discount
    (already ``(1 - gamma)``-scaled); ``gammas [G]``. Each critic predicts
    ``(1 - gamma)`` times its return, so the target is ``(1 - gamma) * s * r
    + gamma * (1 - done) * V'`` with ``s = reward_scale``.
    """
    g = jnp.asarray(gammas, jnp.float32)
    r = (reward * reward_scale)[..., None]
    keep = 1.0 - jnp.asarray(done, jnp.float32)[..., None]
    return (1.0 - g) * r + g * keep * next_value


def policy_log_probs(logits: jax.Array, clip: tuple[float, float] | None) -> jax.Array:
    """``log pi [..., A]`` of the categorical policy with ``logits``: the
    softmax's, or with ``clip = (low, high)`` AMAGO's ``Discrete`` (its
    ``nets/policy_dists.py``): each probability clipped to ``[low, high]``
    and divided by the clipped sum, the sum held fixed in the gradient."""
    log_probs = jax.nn.log_softmax(logits)
    if clip is None:
        return log_probs
    clipped = jnp.clip(jnp.exp(log_probs), *clip)
    total = jax.lax.stop_gradient(clipped.sum(-1, keepdims=True))
    return jnp.log(clipped) - jnp.log(total)


def policy_values(q: jax.Array, probs: jax.Array) -> jax.Array:
    """``V_c(s, gamma) = sum_a pi(a | s, gamma) Q_c(s, a, gamma)``:
    ``q [..., C, G, A]``, ``probs [..., G, A]`` -> ``[..., C, G]``."""
    return jnp.sum(q * probs[..., None, :, :], -1)


def ensemble_target(
    values: jax.Array, key: jax.Array, k: int, online_coeff: jax.Array
) -> jax.Array:
    """``values [..., C, G]`` -> ``[..., G]``: ``k`` critics drawn at random
    (with replacement, as AMAGO) for every entry, reduced by their min
    (REDQ's clipped double Q) when the actor has a policy-improvement term
    (``online_coeff > 0``), by their mean when it has none: AMAGO's
    ``_critic_ensemble_to_td_target`` (``amago/agent.py``), whose comment
    says the min underestimates strongly without that term."""
    c, g = values.shape[-2:]
    idx = jax.random.randint(key, (*values.shape[:-2], k, g), 0, c)
    drawn = jnp.take_along_axis(values, idx, -2)
    return jnp.where(online_coeff > 0, drawn.min(-2), drawn.mean(-2))


def next_values(values: jax.Array) -> jax.Array:
    """``values [B, L, G]`` shifted one step earlier (``V(s_{t+1})`` at t);
    zero at the last step, which ends the trial."""
    return jnp.pad(values[:, 1:], ((0, 0), (0, 1), (0, 0)))


def filtered_bc(logp: jax.Array, advantage: jax.Array) -> jax.Array:
    """AMAGO's "offline" actor term with its binary filter:
    ``-1[A > 0] * log pi(a | s)`` (no gradient through ``advantage``)."""
    keep = (jax.lax.stop_gradient(advantage) > 0).astype(logp.dtype)
    return -keep * logp


def policy_improvement(probs: jax.Array, q_frozen: jax.Array) -> jax.Array:
    """AMAGO's "online" actor term for discrete actions: ``-min_c sum_a
    pi(a | s) Q_c(s, a)`` ``[..., G]``; the critics are held fixed (the
    gradient reaches only ``probs [..., G, A]``)."""
    v = policy_values(jax.lax.stop_gradient(q_frozen), probs)
    return -v.min(-2)


# ------------------------------------------------------------------ heads
def _layer(key, c, n_in, n_out, scale):
    w = jax.random.normal(key, (c, n_in, n_out), jnp.float32) * scale / math.sqrt(n_in)
    return {"w": w, "b": jnp.zeros((c, n_out), jnp.float32)}


def init_critics(key, d: int, hidden: int, num_critics: int, out: int) -> dict:
    """``num_critics`` MLPs ``d -> hidden -> hidden -> out`` (leaky ReLU),
    stacked on a leading ensemble axis (AMAGO's ``NCritics``, 2 layers)."""
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        "l1": _layer(k1, num_critics, d, hidden, math.sqrt(2.0)),
        "l2": _layer(k2, num_critics, hidden, hidden, math.sqrt(2.0)),
        "l3": _layer(k3, num_critics, hidden, out, 0.01),
    }


def critic_values(critics: dict, h: jax.Array, num_gammas: int) -> jax.Array:
    """``h [..., d]`` -> ``Q [..., C, G, A]`` of every critic, discount, action."""
    x = jnp.einsum("...d,cdk->...ck", h, critics["l1"]["w"]) + critics["l1"]["b"]
    x = jax.nn.leaky_relu(x)
    x = jnp.einsum("...cd,cdk->...ck", x, critics["l2"]["w"]) + critics["l2"]["b"]
    x = jax.nn.leaky_relu(x)
    q = jnp.einsum("...cd,cdk->...ck", x, critics["l3"]["w"]) + critics["l3"]["b"]
    return q.reshape(*q.shape[:-1], num_gammas, -1)


# ------------------------------------------------------------------ trainer
@dataclasses.dataclass(frozen=True)
class AmagoShape:
    """Static settings of a run (shapes, loop lengths, the discounts).

    ``gammas``: every discount, the acting one last; ``explore_steps``: steps
    per env over which epsilon anneals; ``lr_shape(update)``: the schedule;
    ``explore_window``: ``(start, end)`` of AMAGO's T-Maze exploration, or
    ``None``; ``prob_clip``: the policy's probability clip
    (:func:`policy_log_probs`), or ``None``.
    """

    num_envs: int
    trial_steps: int
    capacity: int
    batch_size: int
    grad_steps: int
    num_updates: int
    gammas: tuple[float, ...]
    num_critics: int
    critics_in_target: int
    critic_hidden: int
    explore_steps: int
    grad_clip: float | None
    lr_shape: Callable[[Any], Any] | None = None
    explore_window: tuple[int, int] | None = None
    adam_b2: float = 0.999  # Adam's second-moment decay (train.adam_b2)
    prob_clip: tuple[float, float] | None = None  # policy_log_probs's clip


class AmagoState(NamedTuple):
    """``params``: ``{"model", "actor", "critics"}`` (the trunk with the acting
    discount's head, the other discounts' actor head, the critics);
    ``target``: EMA copies of the heads ``{"head", "actor", "critics"}``."""

    params: Any
    target: Any
    opt_state: Any
    replay: Replay
    key: jax.Array
    update: jax.Array


class Collect(NamedTuple):
    """The acting scan's carry (leaves ``[env, ...]``)."""

    cache: Any
    obs: Any
    env_state: Any
    prev_action: jax.Array
    prev_reward: jax.Array


class AmagoTrainer:
    """See the module docstring. ``model_config``: a completed ModelConfig."""

    def __init__(self, env: Any, shape: AmagoShape, model_config, sample_task):
        if not spaces.is_discrete(env.action_space(env.default_params)):
            raise ValueError("AMAGO here supports discrete actions only")
        if model_config.token_layout != "step":
            raise ValueError(
                "AMAGO needs model.token_layout='step', got "
                f"{model_config.token_layout!r}"
            )
        if model_config.max_steps < shape.trial_steps:
            raise ValueError(
                f"AMAGO attends over the whole trial: model.max_steps="
                f"{model_config.max_steps} must be >= its {shape.trial_steps} steps"
            )
        self.env, self.shape, self.sample_task = env, shape, sample_task
        self.config = model_config
        model = DecisionModel(model_config, rngs=nnx.Rngs(0))
        self.graphdef, _, self.rest = nnx.split(model, nnx.Param, ...)
        self.head_def = nnx.split(model.head)[0]
        self.num_actions = int(env.action_space(env.default_params).n)
        self.num_gammas = len(shape.gammas)

    # ------------------------------------------------------------ models
    def model(self, params) -> DecisionModel:
        return nnx.merge(self.graphdef, params, self.rest)

    def weights(self, state: AmagoState) -> DecisionModel:
        """The trained policy: a ``DecisionModel`` whose head is the acting
        discount's actor (acts with its KV cache, like AD)."""
        return self.model(state.params["model"])

    def actor_logits(self, head, actor, h) -> jax.Array:
        """``[..., G, A]``: the other discounts' head ``actor`` and the acting
        one's ``head`` (the model's, an ``nnx`` state) on features ``h``."""
        acting = nnx.merge(self.head_def, head)(h)[0]
        others = h @ actor["w"] + actor["b"]
        others = others.reshape(*h.shape[:-1], self.num_gammas - 1, self.num_actions)
        return jnp.concatenate([others, acting[..., None, :]], -2)

    @staticmethod
    def heads(params) -> dict:
        """The parts of ``params`` that have target copies."""
        return {
            "head": params["model"]["head"],
            "actor": params["actor"],
            "critics": params["critics"],
        }

    def init(self, key: jax.Array, hp: dict) -> AmagoState:
        del hp
        s = self.shape
        k_model, k_actor, k_critic, key = jax.random.split(key, 4)
        model = DecisionModel(self.config, rngs=nnx.Rngs(k_model))
        d, a = self.config.d_model, self.num_actions
        w = jax.random.normal(k_actor, (d, (self.num_gammas - 1) * a), jnp.float32)
        params = {
            "model": nnx.split(model, nnx.Param, ...)[1],
            "actor": {"w": w * 0.01 / math.sqrt(d), "b": jnp.zeros(w.shape[1])},
            "critics": init_critics(
                k_critic, d, s.critic_hidden, s.num_critics, self.num_gammas * a
            ),
        }
        opt = trial_optimizer(s, {"lr": 1.0, "weight_decay": 0.0}, 0)
        obs, _ = self.env.reset(jax.random.key(0), self.env.default_params)
        return AmagoState(
            params=params,
            target=jax.tree.map(jnp.copy, self.heads(params)),
            opt_state=opt.init(params),
            replay=replay_init(s.capacity, s.trial_steps, obs),
            key=key,
            update=jnp.zeros((), jnp.int32),
        )

    # ------------------------------------------------------------- the loss
    def loss(self, params, target, batch, key, hp):
        """``(loss, metrics)`` of a batch of whole trials ``[B, L]``."""
        model = self.model(params["model"])
        h = model.features(batch["obs"], batch["action"], batch["reward"])
        log_probs = policy_log_probs(
            self.actor_logits(params["model"]["head"], params["actor"], h),
            self.shape.prob_clip,
        )
        q = critic_values(params["critics"], h, self.num_gammas)  # [B, L, C, G, A]
        action = batch["action"][..., None, None, None]
        q_taken = jnp.take_along_axis(q, action, -1)[..., 0]  # [B, L, C, G]
        y = jax.lax.stop_gradient(self._targets(target, h, batch["reward"], key, hp))
        critic_loss = jnp.mean((q_taken - y[..., None, :]) ** 2)
        # the actor's terms: critics and features frozen ("maximized critics")
        q_frozen = critic_values(
            params["critics"], jax.lax.stop_gradient(h), self.num_gammas
        )
        probs = jnp.exp(log_probs)
        v_pi = policy_values(jax.lax.stop_gradient(q_frozen), probs)
        advantage = q_taken.mean(-2) - v_pi.mean(-2)  # [B, L, G]
        logp = jnp.take_along_axis(log_probs, batch["action"][..., None, None], -1)
        online = policy_improvement(probs, q_frozen)
        offline = filtered_bc(logp[..., 0], advantage)
        actor_loss = jnp.mean(
            hparam(hp, "online_coeff") * online + hparam(hp, "offline_coeff") * offline
        )
        loss = actor_loss + hparam(hp, "critic_coeff") * critic_loss
        entropy = -jnp.sum(probs * log_probs, -1)
        return loss, {
            "loss": loss,
            "critic_loss": critic_loss,
            "actor_loss": actor_loss,
            "q_acting": q_taken[..., -1].mean(),
            "filter_frac": (advantage > 0).mean(),
            "entropy": entropy[..., -1].mean(),
        }

    def _targets(self, target, h, reward, key, hp):
        """TD targets ``[B, L, G]`` from the target heads on features ``h``."""
        h = jax.lax.stop_gradient(h)
        logits = self.actor_logits(target["head"], target["actor"], h)
        probs = jnp.exp(policy_log_probs(logits, self.shape.prob_clip))
        q = critic_values(target["critics"], h, self.num_gammas)
        v = ensemble_target(
            policy_values(q, probs),
            key,
            self.shape.critics_in_target,
            hparam(hp, "online_coeff"),
        )
        done = jnp.zeros(reward.shape, jnp.float32).at[:, -1].set(1.0)
        return td_targets(
            reward, done, next_values(v), self.shape.gammas, hparam(hp, "reward_scale")
        )

    # ------------------------------------------------------------ collection
    def epsilon(self, hp: dict, update: jax.Array) -> jax.Array:
        """The exploration ceiling after ``update`` updates (linear anneal)."""
        done = update * self.shape.trial_steps / self.shape.explore_steps
        start, end = hparam(hp, "eps_start"), hparam(hp, "eps_end")
        return start + (end - start) * jnp.minimum(done, 1.0)

    def step_epsilon(self, eps: jax.Array, t: jax.Array) -> jax.Array:
        """``eps [n]`` at step ``t [n]`` of each env's episode: unchanged, or
        ``0.5 / horizon`` inside the ``explore_window`` (AMAGO's T-Maze
        exploration: low noise in the corridor, the schedule at the ends)."""
        if self.shape.explore_window is None:
            return eps
        start, end = self.shape.explore_window
        horizon = self.env.horizon
        quiet = (t > start) & (t < horizon - end)
        return jnp.where(quiet, 0.5 / horizon, eps)

    def collect(self, model_params, tasks, eps, key) -> dict[str, jax.Array]:
        """One trial in every env (``eps [n]``: each env's epsilon): the token
        buffers ``{obs, action, reward} [n, L, ...]`` and where its episodes
        ended (``episode_end [n, L]``; the replay keeps the tokens only)."""
        n, length = self.shape.num_envs, self.shape.trial_steps
        model = self.model(model_params)
        k_reset, k_steps = jax.random.split(key)
        obs, env_state = jax.vmap(self.env.reset)(jax.random.split(k_reset, n), tasks)
        carry = Collect(
            cache=model.init_cache(n, length),
            obs=obs,
            env_state=env_state,
            prev_action=jnp.zeros((n,), jnp.int32),
            prev_reward=jnp.zeros((n,), jnp.float32),
        )
        _, steps = key_scan(
            lambda c, k: self._act_step(model, tasks, eps, c, k),
            carry,
            jax.random.split(k_steps, length),
        )
        return jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), steps)

    def _act_step(self, model, tasks, eps, carry: Collect, key):
        n = self.shape.num_envs
        k_pi, k_rand, k_use, k_env = jax.random.split(key, 4)
        out, cache = model.decode(
            carry.cache, carry.obs, carry.prev_action, carry.prev_reward
        )
        log_pi = policy_log_probs(out.action.astype(jnp.float32), self.shape.prob_clip)
        sampled = jax.random.categorical(k_pi, log_pi)
        uniform = jax.random.randint(k_rand, (n,), 0, self.num_actions)
        eps = self.step_epsilon(eps, carry.env_state.time)
        explore = jax.random.uniform(k_use, (n,)) < eps
        action = jnp.where(explore, uniform, sampled).astype(jnp.int32)
        next_obs, env_state, reward, terminated, truncated, _ = jax.vmap(self.env.step)(
            jax.random.split(k_env, n), carry.env_state, action, tasks
        )
        reward = jnp.asarray(reward, jnp.float32)
        step = {
            "obs": carry.obs,
            "action": action,
            "reward": reward,
            "episode_end": jnp.logical_or(terminated, truncated),
        }
        return Collect(cache, next_obs, env_state, action, reward), step

    # ---------------------------------------------------------------- update
    def update(self, state: AmagoState, hp: dict):
        """Collect one trial in every env into the replay, then
        ``grad_steps`` gradient steps on replayed trials."""
        s = self.shape
        key, k_task, k_eps, k_act, k_grad = jax.random.split(state.key, 5)
        tasks = jax.vmap(self.sample_task)(jax.random.split(k_task, s.num_envs))
        eps = jax.random.uniform(k_eps, (s.num_envs,)) * self.epsilon(hp, state.update)
        trials = self.collect(state.params["model"], tasks, eps, k_act)
        replay = replay_add(state.replay, trials)
        tx = trial_optimizer(s, hp, state.update)
        tau = hparam(hp, "tau")

        def grad_step(carry, k):
            learner, target = carry
            k_batch, k_loss = jax.random.split(k)
            batch = replay_sample(replay, k_batch, s.batch_size)
            learner, m = sgd_step(tx, self.loss, learner, target, batch, k_loss, hp)
            target = jax.tree.map(
                lambda t, p: (1.0 - tau) * t + tau * p,
                target,
                self.heads(learner.params),
            )
            return (learner, target), m

        (learner, target), m = key_scan(
            grad_step,
            (Learner(state.params, state.opt_state), state.target),
            jax.random.split(k_grad, s.grad_steps),
        )
        metrics = {name: v.mean() for name, v in m.items()}
        metrics.update(
            trial_metrics(trials["reward"], trials["episode_end"]), epsilon=eps.mean()
        )
        new = AmagoState(
            learner.params, target, learner.opt_state, replay, key, state.update + 1
        )
        return new, metrics

    def __call__(self, key: jax.Array, hp: dict):
        state = self.init(key, hp)
        return jax.lax.scan(
            lambda st, _: self.update(st, hp), state, None, self.shape.num_updates
        )


class AmagoProgram(OnlineProgram):
    """:class:`agentrl.online.program.OnlineProgram` on AMAGO's trainer and
    its traced settings."""

    hparam_names = HPARAMS


def amago_program(config: Any, env: Any) -> AmagoProgram:
    """AMAGO's program of ``config`` (an ``ExperimentConfig`` whose ``algo``
    is :class:`agentrl.algos.amago.Amago`)."""
    algo, train = config.algo, config.train
    trial_steps = algo.trial_episodes * env.horizon
    shape = AmagoShape(
        num_envs=algo.num_envs,
        trial_steps=trial_steps,
        capacity=algo.capacity,
        batch_size=algo.batch_size,
        grad_steps=algo.grad_steps,
        num_updates=train.steps,
        gammas=(*algo.gammas, algo.gamma),
        num_critics=algo.num_critics,
        critics_in_target=algo.critics_in_target,
        critic_hidden=algo.critic_hidden,
        explore_steps=algo.explore_steps,
        grad_clip=train.grad_clip,
        lr_shape=schedule_shape(train),
        explore_window=algo.explore_window,
        adam_b2=train.adam_b2,
        prob_clip=algo.prob_clip,
    )
    model = complete_model_config(config.model, env, algo)
    return AmagoProgram(
        AmagoTrainer(env, shape, model, training_tasks(env, config.data))
    )
