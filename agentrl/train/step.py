"""The jitted update step: ``nnx.split`` once, ``nnx.merge`` per step.

The training state is a plain pytree ``{"params", "rest", "opt", "ema"}``:
``params`` are the model's ``nnx.Param`` leaves, ``rest`` everything else the
model carries (RNG stream counters for dropout and noisy gating), ``opt`` the
optax state and ``ema`` the T2MIR EMA router (``None`` otherwise).

Numbers worth sweeping are *traced*: the step takes ``hparams`` (learning
rate, weight decay, T2MIR's balance and contrastive weights, EMA rate) as a
pytree of scalars, so :mod:`agentrl.sweep` can vmap one compiled step over
seeds and hyperparameters. Shapes, the schedule's form and the algorithm are
static. A step is pure, so resuming from a saved state and step number
reproduces the run exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from agentrl.algos import ad_loss, dpt_loss, dt_loss, t2mir_loss
from agentrl.algos.t2mir import init_ema_router, update_ema_router
from agentrl.train.config import ExperimentConfig, TrainConfig

HPARAM_NAMES = ("lr", "weight_decay", "balance_weight", "contrastive_weight", "ema_tau")


def default_hparams(config: ExperimentConfig) -> dict[str, jax.Array]:
    """The traced hyperparameters of ``config`` as float32 scalars."""
    return {
        "lr": jnp.float32(config.train.lr),
        "weight_decay": jnp.float32(config.train.weight_decay),
        "balance_weight": jnp.float32(config.model.balance_weight),
        "contrastive_weight": jnp.float32(config.model.contrastive_weight),
        "ema_tau": jnp.float32(config.train.ema_tau),
    }


def schedule_shape(train: TrainConfig) -> optax.Schedule:
    """Learning-rate multiplier in [0, 1]: linear warm-up, then cosine to 0.1
    (``schedule="cosine"``) or flat (``"constant"``)."""
    warmup = min(train.warmup_steps, max(train.steps - 1, 0))
    if train.schedule == "cosine":
        return optax.warmup_cosine_decay_schedule(
            0.0,
            1.0,
            warmup_steps=warmup,
            decay_steps=max(train.steps, warmup + 1),
            end_value=0.1,
        )
    return optax.join_schedules(
        [optax.linear_schedule(0.0, 1.0, max(warmup, 1)), optax.constant_schedule(1.0)],
        [max(warmup, 1)],
    )


def make_optimizer(
    train: TrainConfig, lr: Any = None, weight_decay: Any = None
) -> optax.GradientTransformation:
    """AdamW, warm-up + cosine, global-norm clipping; lr/wd may be traced."""
    lr = train.lr if lr is None else lr
    weight_decay = train.weight_decay if weight_decay is None else weight_decay
    shape = schedule_shape(train)
    return optax.chain(
        optax.clip_by_global_norm(train.grad_clip),
        optax.adamw(lambda count: lr * shape(count), weight_decay=weight_decay),
    )


def base_loss_fn(algo: str, **dt_kwargs: Any) -> Callable[..., tuple]:
    """The algorithm's loss ``(model, batch, deterministic=) -> (loss, m, out)``."""
    if algo in ("ad", "ad_eps", "t2mir_ad"):
        return ad_loss
    if algo in ("dpt", "t2mir_dpt"):
        return dpt_loss
    if algo == "dt":
        return lambda model, batch, **kw: dt_loss(model, batch, **dt_kwargs, **kw)
    raise ValueError(f"unknown algo {algo!r}")


def init_train_state(model: Any, train: TrainConfig, algo: str):
    """``(graphdef, state)`` for :func:`make_train_step`."""
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    ema = init_ema_router(model) if algo.startswith("t2mir") else None
    opt = make_optimizer(train).init(params)
    return graphdef, {"params": params, "rest": rest, "opt": opt, "ema": ema}


def make_train_step(
    graphdef: Any, train: TrainConfig, algo: str, **dt_kwargs: Any
) -> Callable[[dict, dict, dict], tuple[dict, dict]]:
    """``step(state, batch, hparams) -> (state, metrics)``; jit or vmap it."""
    base = base_loss_fn(algo, **dt_kwargs)
    t2mir = algo.startswith("t2mir")

    def loss_fn(params, rest, ema, batch, hp):
        # copy=True: fresh Variables at this trace level (RNG counters mutate).
        model = nnx.merge(graphdef, params, rest, copy=True)
        if t2mir:
            loss, metrics, _ = t2mir_loss(
                base,
                model,
                batch,
                ema,
                balance_weight=hp["balance_weight"],
                contrastive_weight=hp["contrastive_weight"],
                deterministic=False,
            )
        else:
            loss, metrics, _ = base(model, batch, deterministic=False)
        _, _, new_rest = nnx.split(model, nnx.Param, ...)
        return loss, (metrics, new_rest)

    def step(state: dict, batch: dict, hp: dict) -> tuple[dict, dict]:
        grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
        (loss, (metrics, rest)), grads = grad_fn(
            state["params"], state["rest"], state["ema"], batch, hp
        )
        tx = make_optimizer(train, hp["lr"], hp["weight_decay"])
        updates, opt = tx.update(grads, state["opt"], state["params"])
        params = optax.apply_updates(state["params"], updates)
        ema = state["ema"]
        if t2mir:
            model = nnx.merge(graphdef, params, rest, copy=True)
            ema = update_ema_router(ema, model, hp["ema_tau"])
        metrics = {**metrics, "loss": loss, "grad_norm": optax.tree.norm(grads)}
        return {"params": params, "rest": rest, "opt": opt, "ema": ema}, metrics

    return step
