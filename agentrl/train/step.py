"""The jitted update step: ``nnx.split`` once, ``nnx.merge`` per step.

The training state is a plain pytree ``{"params", "rest", "opt", "ema"}``:
``params`` are the model's ``nnx.Param`` leaves, ``rest`` everything else the
model carries (RNG stream counters for dropout and noisy gating), ``opt`` the
optax state and ``ema`` the T2MIR EMA router (``None`` otherwise). A step
merges the graph with the current state, computes the algorithm's loss and
gradients, applies AdamW with warm-up + cosine and gradient clipping, and
returns the new state; it is pure, so resuming from a saved state and step
number reproduces the same run exactly.
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
from agentrl.train.config import TrainConfig


def make_optimizer(train: TrainConfig) -> optax.GradientTransformation:
    """AdamW with linear warm-up then cosine (or constant) and global-norm clip."""
    if train.schedule == "cosine":
        lr = optax.warmup_cosine_decay_schedule(
            0.0,
            train.lr,
            warmup_steps=min(train.warmup_steps, max(train.steps - 1, 0)),
            decay_steps=max(train.steps, train.warmup_steps + 1),
            end_value=0.1 * train.lr,
        )
    else:
        lr = optax.join_schedules(
            [
                optax.linear_schedule(0.0, train.lr, max(train.warmup_steps, 1)),
                optax.constant_schedule(train.lr),
            ],
            [max(train.warmup_steps, 1)],
        )
    return optax.chain(
        optax.clip_by_global_norm(train.grad_clip),
        optax.adamw(lr, weight_decay=train.weight_decay),
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


def init_train_state(model: Any, tx: optax.GradientTransformation, algo: str):
    """``(graphdef, state)`` for :func:`make_train_step`."""
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    ema = init_ema_router(model) if algo.startswith("t2mir") else None
    state = {"params": params, "rest": rest, "opt": tx.init(params), "ema": ema}
    return graphdef, state


def make_train_step(
    graphdef: Any,
    tx: optax.GradientTransformation,
    algo: str,
    ema_tau: float = 0.005,
    **dt_kwargs: Any,
) -> Callable[[dict, dict], tuple[dict, dict]]:
    """``step(state, batch) -> (state, metrics)`` (jit it; donate ``state``)."""
    base = base_loss_fn(algo, **dt_kwargs)
    t2mir = algo.startswith("t2mir")

    def loss_fn(params, rest, ema, batch):
        model = nnx.merge(graphdef, params, rest, copy=True)
        if t2mir:
            loss, metrics, _ = t2mir_loss(base, model, batch, ema, deterministic=False)
        else:
            loss, metrics, _ = base(model, batch, deterministic=False)
        _, _, new_rest = nnx.split(model, nnx.Param, ...)
        return loss, (metrics, new_rest)

    def step(state: dict, batch: dict) -> tuple[dict, dict]:
        grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
        (loss, (metrics, rest)), grads = grad_fn(
            state["params"], state["rest"], state["ema"], batch
        )
        updates, opt = tx.update(grads, state["opt"], state["params"])
        params = optax.apply_updates(state["params"], updates)
        ema = state["ema"]
        if t2mir:
            model = nnx.merge(graphdef, params, rest, copy=True)
            ema = update_ema_router(ema, model, ema_tau)
        metrics = {
            **metrics,
            "loss": loss,
            "grad_norm": optax.tree.norm(grads),
            "finite": jnp.isfinite(loss).astype(jnp.float32),
        }
        return {"params": params, "rest": rest, "opt": opt, "ema": ema}, metrics

    return step
