"""ReLIC's summed minibatch gradients in transformer PPO (``algo.summed_minibatches``).

ReLIC's PPO (aielawady/relic ``relic/trainer/transformer_ppo.py``
``_update_from_data_generator``) calls ``backward`` on each minibatch's
mean loss and steps the optimizer every ``grad_accum_mini_batches`` of
them, after clipping the accumulated (summed) gradient's norm: with its
Dark Room settings (``num_mini_batch: 8``, ``grad_accum_mini_batches: 4``)
a step's gradient is 4 times the mean over its 4 minibatches, and the clip
at 0.2 acts on that. Checked here: the optimizer's ``grad_scale`` against
the sum of the parts' gradients fed to a plain clip and Adam (steps whose
norms sit on either side of the clip, so scaling after the clip would
differ), the trainer's chain, its partial and full updates against a
trainer whose loss is the sum of the parts' means (``long``), and the
field reaching the trainer.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from test_online_rl2 import hp
from test_online_transformer import make_trainer

from agentrl.algos import TransformerPPO
from agentrl.online.transformer import TransformerPPO as Trainer
from agentrl.rl.ppo import optimizer


def _mean_loss(w, x, y):
    return 0.5 * jnp.mean(jnp.square(x @ w - y))


def _steps(tx, grads_of, batches, w):
    state = tx.init(w)
    for x, y in batches:
        updates, state = tx.update(grads_of(w, x, y), state, w)
        w = optax.apply_updates(w, updates)
    return w


def test_a_step_takes_the_sum_of_its_parts_mean_gradients_before_the_clip():
    keys = jax.random.split(jax.random.key(0), 6)
    # 3 minibatches of 8 rows: large, small, large inputs, so the summed
    # gradient's norm is above the clip, below it, above it
    batches = [
        (scale * jax.random.normal(kx, (8, 3)), jax.random.normal(ky, (8,)))
        for scale, kx, ky in zip((3.0, 0.05, 3.0), keys[:3], keys[3:], strict=True)
    ]
    w = jnp.array([0.5, -0.3, 0.2])
    clip, lr, parts = 1.0, 0.1, 4

    def summed(w, x, y):  # ReLIC: backward on each part's mean, summed
        grads = [
            jax.grad(_mean_loss)(w, xp, yp)
            for xp, yp in zip(jnp.split(x, parts), jnp.split(y, parts), strict=True)
        ]
        return sum(grads)

    norms = [float(jnp.linalg.norm(summed(w, x, y))) for x, y in batches]
    assert norms[0] > clip > norms[1]  # the clip acts on some steps only
    reference = _steps(optimizer(lr, clip, eps=1e-5), summed, batches, w)
    ours = _steps(
        optimizer(lr, clip, eps=1e-5, grad_scale=parts),
        jax.grad(_mean_loss),
        batches,
        w,
    )
    np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-7)
    # the check could fail: the mean's gradient, or the scale after the clip
    unscaled = _steps(optimizer(lr, clip, eps=1e-5), jax.grad(_mean_loss), batches, w)
    after_clip = optax.chain(
        optax.clip_by_global_norm(clip),
        optax.scale(float(parts)),
        optax.scale_by_adam(eps=1e-5),
        optax.scale(-lr),
    )
    late = _steps(after_clip, jax.grad(_mean_loss), batches, w)
    for other in (unscaled, late):
        assert float(jnp.max(jnp.abs(other - reference))) > 1e-3


class SummedLoss(Trainer):
    """The trainer with its minibatch loss multiplied by ``parts`` (the sum
    of ``parts`` equal parts' mean losses) and no scaling of its own."""

    parts = 4

    def _loss(self, params, batch, hp, start, size):
        loss, metrics = super()._loss(params, batch, hp, start, size)
        return self.parts * loss, metrics


def test_the_trainers_chain_scales_the_gradient_before_the_clip():
    """The chain the trainer builds (at init and for every trial) is
    :func:`agentrl.rl.ppo.optimizer`'s with ``grad_scale`` its field: two
    steps, the first clipped only when scaled (Adam's first step alone is
    blind to a uniform scale)."""
    base = make_trainer(4, grad_clip=0.5)
    trainer = Trainer(
        base.env,
        dataclasses.replace(base.shape, summed_minibatches=4),
        base.config,
        base.sample_task,
    )
    w = jnp.array([0.5, -0.3, 0.2])
    # norms 0.245 and 0.0245: 4 times the first is above the clip
    steps = [
        (jnp.array([0.2, 0.1, -0.1]), None),
        (jnp.array([0.01, -0.02, 0.01]), None),
    ]
    params = hp(lr=0.1)

    def given(w, g, _):
        return g

    def summed(w, g, _):
        return 4 * g

    ours = _steps(trainer._optimizer(params, 0), given, steps, w)
    want = _steps(optimizer(0.1, 0.5, eps=1e-5), summed, steps, w)
    plain = _steps(base._optimizer(params, 0), given, steps, w)
    np.testing.assert_allclose(ours, want, rtol=1e-6)
    assert float(jnp.max(jnp.abs(plain - want))) > 1e-3  # the check could fail


@pytest.mark.long
def test_the_trainers_updates_equal_the_summed_parts_loss():
    """Two trials of a partial update and a full one: the trainer with
    ``summed_minibatches=4`` ends where the one whose loss is 4 times the
    mean does; the mean's own gradient ends elsewhere (at a clip of 2 they
    differ; a clip that held every step of both would hide the scale from
    Adam, which is blind to it but for its eps)."""
    base = make_trainer(4, num_updates=2, grad_clip=2.0, full_update=True)
    summed = Trainer(
        base.env,
        dataclasses.replace(base.shape, summed_minibatches=4),
        base.config,
        base.sample_task,
    )
    reference = SummedLoss(base.env, base.shape, base.config, base.sample_task)
    params = hp(lr=3e-3)

    def train(trainer):
        state = trainer.init(jax.random.key(1), params)
        for _ in range(2):
            state, *_ = jax.jit(trainer.run_trial)(state, params)
        return jax.tree.leaves(state.actor) + jax.tree.leaves(state.critic)

    ours, want, mean = train(summed), train(reference), train(base)
    for a, b in zip(ours, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-6)
    moved = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(mean, want, strict=True))
    assert moved > 1e-3  # the check could fail


def test_the_field_reaches_the_trainer_and_must_be_a_positive_int():
    from agentrl.configtools import override
    from agentrl.envs import make as make_env
    from agentrl.online.program import transformer_program
    from agentrl.train.config import complete_config
    from agentrl.train.experiments import load_experiment

    config = load_experiment("transformer_ppo_darkroom", "smoke")
    assert config.algo.summed_minibatches == 1
    config = override(config, {"algo.summed_minibatches": 4})
    env = make_env(config.data.env, **dict(config.data.env_args))
    shape = transformer_program(complete_config(config, env), env).trainer.shape
    assert shape.summed_minibatches == 4
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match="algo.summed_minibatches must be an int"):
            TransformerPPO(summed_minibatches=bad)
