"""PPO written once: the loss, GAE, the optimizer chain and one SGD step.

The PPO source of learning histories (:mod:`agentrl.sources.ppo`), RL²
(:mod:`agentrl.online.ppo`) and transformer PPO
(:mod:`agentrl.online.transformer`) all train with these:

- :func:`ppo_loss`: the clipped surrogate on per-minibatch normalised
  advantages, plus ``vf_coef`` times the squared-error value loss, minus
  ``ent_coef`` times the entropy; its metrics include the approximate KL
  ``E[(r - 1) - log r]``;
- :func:`gae`: generalized advantage estimation over ``[time, ...]``, with
  separate masks for "the successor's value does not count" (a terminal
  state) and "the recursion stops here" (the successor starts a new
  episode, or trial); :func:`gae_across_episodes` is RL²'s setting, where
  only a trial's end does either;
- :func:`optimizer`: global-norm clipping, Adam, optional decoupled weight
  decay, the (possibly traced) learning rate;
- :func:`sgd_step` / :func:`sgd_epochs`: a gradient step, and a scan of
  them over minibatch index rows, carrying a :class:`Learner`.

Coefficients (``clip_eps``, ``gamma``, ...) may be Python floats or traced
float32 scalars (vmapped over in sweeps).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax


# ---------------------------------------------------------------------- loss
def normalize(adv: jax.Array) -> jax.Array:
    """``adv`` shifted to mean 0 and scaled to std 1 (``+ 1e-8``)."""
    return (adv - adv.mean()) / (adv.std() + 1e-8)


def total_loss(pg, vf, ent, vf_coef, ent_coef):
    """``pg + vf_coef * vf - ent_coef * ent`` (the order every user sums in)."""
    return pg + vf_coef * vf - ent_coef * ent


def ppo_loss(
    logp: jax.Array,
    old_logp: jax.Array,
    entropy: jax.Array,
    value: jax.Array,
    adv: jax.Array,
    target: jax.Array,
    clip_eps: Any,
    vf_coef: Any,
    ent_coef: Any,
    normalize_advantages: bool = True,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """PPO's loss on a minibatch: ``(loss, metrics)``.

    Args:
      logp: log-probabilities of the taken actions under the current
        weights; ``old_logp`` under the weights that acted; ``entropy`` of
        the current policy; ``value`` the current critic's; ``adv`` the
        advantages (normalised here over the whole minibatch, unless
        ``normalize_advantages`` is false, as ReLIC's
        ``use_normalized_advantage: False``); ``target`` the value
        targets. All the same shape ``[...]``.
      clip_eps: the ratio is clipped to ``[1 - clip_eps, 1 + clip_eps]``.
      vf_coef, ent_coef: weights of the value loss ``0.5 * E[(V - target)^2]``
        and of the entropy bonus.

    Returns:
      the scalar loss and ``{"pg_loss", "vf_loss", "entropy", "approx_kl"}``.
    """
    log_ratio = logp - old_logp
    ratio = jnp.exp(log_ratio)
    if normalize_advantages:
        adv = normalize(adv)
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    pg = -jnp.minimum(ratio * adv, clipped * adv).mean()
    vf = 0.5 * jnp.square(value - target).mean()
    ent = entropy.mean()
    loss = total_loss(pg, vf, ent, vf_coef, ent_coef)
    kl = ((ratio - 1.0) - log_ratio).mean()
    return loss, {"pg_loss": pg, "vf_loss": vf, "entropy": ent, "approx_kl": kl}


def clipped_value(value: jax.Array, old_value: jax.Array, clip_eps: Any) -> jax.Array:
    """habitat-baselines' clipped value (its PPO's ``use_clipped_value_loss``,
    on by default, so ReLIC's): ``value`` where it moved by less than
    ``clip_eps`` from ``old_value``, the value its targets were computed
    with; elsewhere ``old_value`` moved by ``clip_eps`` towards it, with no
    gradient (the move is measured on the value held fixed), so such a step
    leaves the critic alone. Not PureJaxRL's form, which takes the larger of
    the clipped and unclipped squared errors. All ``[...]``."""
    moved = jax.lax.stop_gradient(value) - old_value
    held = old_value + jnp.clip(moved, -clip_eps, clip_eps)
    return jnp.where(jnp.abs(moved) < clip_eps, value, held)


def batch_loss(
    logp: jax.Array,
    entropy: jax.Array,
    value: jax.Array,
    batch: dict,
    clip_eps: Any,
    vf_coef: Any,
    ent_coef: Any,
    normalize_advantages: bool = True,
    clip_values: bool = False,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """:func:`ppo_loss` against a rollout's minibatch: its ``"logp"`` (the
    acting weights'), ``"adv"`` and ``"target"``, each ``[...]`` as ``logp``;
    with ``clip_values``, ``value`` is :func:`clipped_value` against the
    batch's ``"value"`` (the critic's values the targets were computed with)."""
    if clip_values:
        value = clipped_value(value, batch["value"], clip_eps)
    return ppo_loss(
        logp,
        batch["logp"],
        entropy,
        value,
        batch["adv"],
        batch["target"],
        clip_eps,
        vf_coef,
        ent_coef,
        normalize_advantages,
    )


def mean_metrics(metrics: dict, vf_coef: Any, ent_coef: Any) -> dict:
    """Per-step ``metrics`` (leaves ``[steps]``) averaged, with ``loss``
    recomputed from the averaged terms."""
    out = {name: v.mean() for name, v in metrics.items()}
    out["loss"] = total_loss(
        out["pg_loss"], out["vf_loss"], out["entropy"], vf_coef, ent_coef
    )
    return out


# ----------------------------------------------------------------------- GAE
def gae(
    value: jax.Array,
    next_value: jax.Array,
    reward: jax.Array,
    terminal: jax.Array,
    done: jax.Array,
    gamma: Any,
    lam: Any,
) -> jax.Array:
    """Advantages ``[T, ...]`` by generalized advantage estimation.

    ``delta_t = r_t + gamma * (1 - terminal_t) * next_value_t - value_t`` and
    ``A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}`` (``A_T = 0``).

    Args:
      value: ``[T, ...]`` V(s_t).
      next_value: ``[T, ...]`` V of each step's successor: of the true next
        state (``final_observation`` where an episode was cut), or
        :func:`successor_values` when the next step's value is it.
      reward: ``[T, ...]``.
      terminal: ``[T, ...]`` bool: the successor's value does not count.
      done: ``[T, ...]`` bool: the recursion stops (the next step starts a
        new episode). Per-episode GAE: ``terminal = terminated`` and
        ``done = terminated | truncated`` (a truncated episode bootstraps
        from its final observation). Passing the same array for both
        (RL²'s trial end) computes its mask once.
      gamma, lam: discount and GAE lambda.
    """
    not_term = 1.0 - terminal.astype(jnp.float32)
    not_done = not_term if done is terminal else 1.0 - done.astype(jnp.float32)
    delta = reward + gamma * not_term * next_value - value

    def back(acc, xs):
        d, nd = xs
        acc = d + gamma * lam * nd * acc
        return acc, acc

    init = jnp.zeros(delta.shape[1:], delta.dtype)
    _, adv = jax.lax.scan(back, init, (delta, not_done), reverse=True)
    return adv


def episode_advantages(
    value: jax.Array, next_value: jax.Array, record: dict, gamma: Any, lam: Any
) -> tuple[jax.Array, jax.Array]:
    """Per-episode :func:`gae` of a recorded stream and its value targets:
    ``(adv, adv + value)``, each ``[T, ...]``. ``record`` holds ``reward``,
    ``terminated`` and ``truncated`` ``[T, ...]``; a truncated episode
    bootstraps from ``next_value`` (its final observation's)."""
    done = jnp.logical_or(record["terminated"], record["truncated"])
    adv = gae(
        value, next_value, record["reward"], record["terminated"], done, gamma, lam
    )
    return adv, adv + value


def successor_values(value: jax.Array, last_value: jax.Array) -> jax.Array:
    """``[T, ...]`` V(s_{t+1}): ``value [T, ...]`` shifted by one step, with
    ``last_value [...]`` (the value of the step after the rollout) last."""
    return jnp.concatenate([value[1:], last_value[None]], 0)


def gae_across_episodes(value, next_value, reward, trial_end, gamma, lam):
    """``[T, N]`` advantages; only a trial's end stops bootstrapping.

    ``value [T, N]`` V(s_t); ``next_value [N]`` V of the step after the
    rollout; ``trial_end [T, N]`` the trial ended at step t (its successor
    belongs to a new task, whose value is not this trial's return). An
    episode's end inside a trial is not a terminal state (RL²: the return
    of exploring now is paid in later episodes); a learner that credits
    each episode alone (transformer PPO's ``advantage_scope="episode"``,
    ReLIC's) passes every episode's end as ``trial_end``.
    """
    following = successor_values(value, next_value)
    return gae(value, following, reward, trial_end, trial_end, gamma, lam)


# ----------------------------------------------------------------- optimizer
def optimizer(
    lr: Any,
    grad_clip: float | None,
    *,
    eps: float = 1e-8,
    weight_decay: Any = None,
    b2: float = 0.999,
    grad_scale: int = 1,
) -> optax.GradientTransformation:
    """The gradient times ``grad_scale``, global-norm clipping (``None``:
    none), Adam (second-moment decay ``b2``), decoupled weight decay, the
    learning rate.

    ``lr`` and ``weight_decay`` may be traced. ``weight_decay=None`` leaves
    the decay out of the chain (a decay of 0 would add ``0 * params``, and
    change the optimizer state's structure); so does ``grad_scale=1`` its
    scaling. ``grad_scale=k`` makes a step's gradient the sum of the
    mean-loss gradients of ``k`` equal parts of its minibatch (PyTorch's
    gradient accumulation over ``k`` minibatches, ReLIC's
    ``grad_accum_mini_batches``): ``k`` times the whole minibatch's mean,
    clipped as such.
    """
    clip = (
        optax.identity() if grad_clip is None else optax.clip_by_global_norm(grad_clip)
    )
    parts = [clip, optax.scale_by_adam(b2=b2, eps=eps)]
    if grad_scale != 1:
        parts.insert(0, optax.scale(float(grad_scale)))
    if weight_decay is not None:
        parts.append(optax.add_decayed_weights(weight_decay))
    return optax.chain(*parts, optax.scale(-lr))


# ----------------------------------------------------------------------- SGD
class Learner(NamedTuple):
    """What a run of SGD steps carries: the parameters and optimizer state."""

    params: Any
    opt_state: Any


def sgd_step(
    tx: optax.GradientTransformation,
    loss_fn: Callable[..., tuple[jax.Array, Any]],
    learner: Learner,
    *args: Any,
) -> tuple[Learner, Any]:
    """One step on ``loss_fn(params, *args) -> (loss, aux)``: ``(learner, aux)``."""
    grads, aux = jax.grad(loss_fn, has_aux=True)(learner.params, *args)
    updates, opt_state = tx.update(grads, learner.opt_state, learner.params)
    return Learner(optax.apply_updates(learner.params, updates), opt_state), aux


def sgd_epochs(
    tx: optax.GradientTransformation,
    loss_fn: Callable[..., tuple[jax.Array, Any]],
    learner: Learner,
    rows: jax.Array,
    minibatch: Callable[[jax.Array], tuple],
) -> tuple[Learner, Any]:
    """:func:`sgd_step` over the index rows ``rows [steps, ...]`` in a scan.

    ``minibatch(row)`` gives the step's ``args`` of ``loss_fn``. Returns
    the final learner and the steps' ``aux`` (leaves ``[steps, ...]``).
    """

    def step(carry: Learner, row):
        return sgd_step(tx, loss_fn, carry, *minibatch(row))

    return jax.lax.scan(step, learner, rows)


def epoch_permutations(
    key: jax.Array, n: int, num_epochs: int, num_minibatches: int
) -> jax.Array:
    """``[num_epochs * num_minibatches, n // num_minibatches]`` index rows:
    a fresh permutation of ``range(n)`` per epoch, cut into minibatches."""
    perms = jax.vmap(lambda k: jax.random.permutation(k, n))(
        jax.random.split(key, num_epochs)
    )
    return perms.reshape(num_epochs * num_minibatches, n // num_minibatches)
