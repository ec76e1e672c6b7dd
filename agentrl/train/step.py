"""The jitted update step: ``nnx.split`` once, ``nnx.merge`` per step.

The training state is a plain pytree ``{"params", "rest", "opt", "aux"}``:
``params`` are the model's ``nnx.Param`` leaves, ``rest`` everything else the
model carries (RNG stream counters for dropout and noisy gating), ``opt`` the
optax state and ``aux`` the algorithm's auxiliary state (T2MIR's EMA router;
``None`` for most).

The step knows no algorithm: it asks ``config.algo`` for the loss and the
auxiliary update. Numbers worth sweeping are *traced*: the step takes
``hparams``, the config's :func:`~agentrl.configtools.traced` fields as
float32 scalars keyed by path (``train.lr``, ``train.weight_decay``,
``algo.balance_weight`` ...), so :mod:`agentrl.sweep` can vmap one compiled
step over seeds and hyperparameters. Shapes, the schedule's form and the
algorithm are static. A step is pure, so resuming from a saved state and
step number reproduces the run exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from agentrl.schedule import schedule_shape
from agentrl.train.config import ExperimentConfig, TrainConfig


def make_optimizer(
    train: TrainConfig, lr: Any = None, weight_decay: Any = None
) -> optax.GradientTransformation:
    """AdamW (``b2 = train.adam_b2``), warm-up + cosine, global-norm clipping
    (none where ``train.grad_clip`` is ``None``: an identity of the same
    state); lr/wd may be traced."""
    lr = train.lr if lr is None else lr
    weight_decay = train.weight_decay if weight_decay is None else weight_decay
    shape = schedule_shape(train)
    clip = train.grad_clip
    return optax.chain(
        optax.identity() if clip is None else optax.clip_by_global_norm(clip),
        optax.adamw(
            lambda count: lr * shape(count),
            b2=train.adam_b2,
            weight_decay=weight_decay,
        ),
    )


def init_train_state(model: Any, config: ExperimentConfig):
    """``(graphdef, state)`` for :func:`make_train_step`."""
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    aux = config.algo.init_aux(model)
    opt = make_optimizer(config.train).init(params)
    return graphdef, {"params": params, "rest": rest, "opt": opt, "aux": aux}


def make_train_step(
    graphdef: Any, config: ExperimentConfig, env: Any
) -> Callable[[dict, dict, dict], tuple[dict, dict]]:
    """``step(state, batch, hparams) -> (state, metrics)``; jit or vmap it.

    ``config`` is the completed experiment (:func:`complete_config`); ``env``
    its environment (static: the loss may read its spaces).
    """
    algo, train = config.algo, config.train

    def loss_fn(params, rest, aux, batch, hp):
        # copy=True: fresh Variables at this trace level (RNG counters mutate).
        model = nnx.merge(graphdef, params, rest, copy=True)
        loss, metrics, _ = algo.loss(model, batch, aux, hp, env=env)
        _, _, new_rest = nnx.split(model, nnx.Param, ...)
        return loss, (metrics, new_rest)

    def step(state: dict, batch: dict, hp: dict) -> tuple[dict, dict]:
        algo_hp = hp["algo"]
        grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
        (loss, (metrics, rest)), grads = grad_fn(
            state["params"], state["rest"], state["aux"], batch, algo_hp
        )
        tx = make_optimizer(train, hp["train"]["lr"], hp["train"]["weight_decay"])
        updates, opt = tx.update(grads, state["opt"], state["params"])
        params = optax.apply_updates(state["params"], updates)
        aux = state["aux"]
        if aux is not None:
            model = nnx.merge(graphdef, params, rest, copy=True)
            aux = algo.update_aux(aux, model, algo_hp)
        metrics = {**metrics, "loss": loss, "grad_norm": optax.tree.norm(grads)}
        return {"params": params, "rest": rest, "opt": opt, "aux": aux}, metrics

    return step


def make_train_call(
    step: Callable[[dict, dict, dict], tuple[dict, dict]],
    draw: Callable[[Any, Any, Any], dict],
    batch_sharding: Any = None,
) -> Callable[..., tuple[dict, dict]]:
    """``call(state, hparams, data, start, count) -> (state, metrics)``: the
    ``count`` updates of steps ``start .. start + count - 1`` in one program.

    Update ``i`` trains on ``draw(data, start, i)`` (drawn inside the
    program). The updates run in a ``lax.fori_loop`` with a *traced* trip
    count (the while loop ``lax.scan`` lowers to), so ONE compiled program
    serves every call length: the calls cut at log and checkpoint steps, a
    resumed run's first call, the run's last. Every update runs the same
    compiled loop body whatever the call's length, so training ``k + m``
    steps in one call or in two gives bit-identical states. ``metrics`` are
    the last update's (reduced on the device: one small transfer per call),
    with ``"finite"``: whether every update of the call had a finite loss
    and gradient norm (an update whose gradients overflow leaves NaN
    weights behind a finite loss).
    ``batch_sharding`` (a mesh's data sharding) splits each batch's rows
    over the devices.
    """

    def call(state, hp, data, start, count):
        def update(state, i):
            batch = draw(data, start, i)
            if batch_sharding is not None:
                batch = jax.lax.with_sharding_constraint(batch, batch_sharding)
            return step(state, batch, hp)

        def body(i, carry):
            state, metrics = update(carry[0], i)
            # the carry keeps its (strong) dtypes: a weak-typed metric is cast
            metrics = jax.tree.map(lambda z, m: m.astype(z.dtype), carry[1], metrics)
            finite = carry[2] & jnp.isfinite(metrics["loss"])
            return state, metrics, finite & jnp.isfinite(metrics["grad_norm"])

        shapes = jax.eval_shape(update, state, 0)[1]
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
        carry = (state, zeros, jnp.bool_(True))
        state, metrics, finite = jax.lax.fori_loop(0, count, body, carry)
        return state, {**metrics, "finite": finite}

    return call
