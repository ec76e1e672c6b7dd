"""ReLIC's clipped value loss in transformer PPO (``algo.clip_values``).

ReLIC runs habitat-baselines' PPO, whose ``use_clipped_value_loss`` is on
by default (habitat-lab ``default_structured_configs.py`` ``PPOConfig``;
the loss in aielawady/relic ``relic/trainer/transformer_ppo.py``): where
the critic's value has moved by ``clip_param`` or more from the value the
targets were computed with, the loss takes that old value moved by
``clip_param``, measured on the detached value, so the step gives the
critic no gradient. Checked here: the clipped value and its gradient on
either side of the clip (and at it), the loss against the batch's values
only when asked, the values the trainer puts in the batch (its critic's,
which the targets were computed with), and the field reaching the trainer.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_online_rl2 import hp
from test_online_transformer import full_forward, make_trainer

from agentrl.algos import TransformerPPO
from agentrl.online.transformer import TransformerPPO as Trainer
from agentrl.rl.ppo import batch_loss, clipped_value


def test_a_value_inside_the_clip_trains_and_one_at_or_beyond_it_is_held():
    old = jnp.zeros(5)
    value = jnp.array([0.1, -0.15, 0.5, -0.9, 0.2])
    target = jnp.full(5, 3.0)

    def loss(v):
        return 0.5 * jnp.sum(jnp.square(clipped_value(v, old, 0.2) - target))

    np.testing.assert_allclose(
        clipped_value(value, old, 0.2), [0.1, -0.15, 0.2, -0.2, 0.2], rtol=1e-6
    )
    # inside: d/dv 0.5 (v - 3)^2 = v - 3; at or beyond the clip: no gradient
    np.testing.assert_allclose(
        jax.grad(loss)(value), [0.1 - 3.0, -0.15 - 3.0, 0.0, 0.0, 0.0], rtol=1e-6
    )


def test_the_loss_clips_against_the_batch_values_only_when_asked():
    batch = {
        "logp": jnp.zeros(4),
        "adv": jnp.array([1.0, -1.0, 0.5, 0.0]),
        "target": jnp.array([2.0, 2.0, 2.0, 2.0]),
        "value": jnp.array([1.0, 1.0, 1.0, 1.0]),
    }
    value = jnp.array([1.1, 1.5, 0.0, 1.0])
    args = (jnp.zeros(4), jnp.zeros(4), value, batch, 0.2, 0.5, 0.0)
    _, plain = batch_loss(*args)
    _, clipped = batch_loss(*args, clip_values=True)
    held = np.array([1.1, 1.2, 0.8, 1.0])  # 1.5 and 0.0 moved beyond 0.2
    np.testing.assert_allclose(
        float(plain["vf_loss"]), 0.5 * np.mean((np.asarray(value) - 2.0) ** 2)
    )
    np.testing.assert_allclose(
        float(clipped["vf_loss"]), 0.5 * np.mean((held - 2.0) ** 2), rtol=1e-6
    )


class ValueProbe(Trainer):
    """The trainer, with the mean of the batch's ``"value"`` in its metrics."""

    def _loss(self, params, batch, hp, start, size):
        loss, metrics = super()._loss(params, batch, hp, start, size)
        return loss, {**metrics, "batch_value": batch["value"].mean()}


@pytest.mark.parametrize("update_every", [pytest.param(8, marks=pytest.mark.long), 4])
def test_the_batch_holds_the_critic_values_the_targets_were_computed_with(
    update_every,
):
    """At learning rate 0 nothing moves, so the batch's values are the
    initial critic's over each update's steps (the whole trial of 8, or
    two chunks of 4: their mean is the trial's either way)."""
    base = make_trainer(update_every)
    shape = dataclasses.replace(base.shape, clip_values=True)
    trainer = ValueProbe(base.env, shape, base.config, base.sample_task)
    params = hp(lr=0.0)
    state = trainer.init(jax.random.key(0), params)
    _, metrics, buf, _ = jax.jit(trainer.run_trial)(state, params)
    critic = full_forward(trainer, state.critic, buf)
    values = np.asarray(critic[..., 0])
    assert values.std() > 1e-3  # the check could fail
    np.testing.assert_allclose(
        float(metrics["batch_value"]), values.mean(), rtol=1e-4, atol=1e-6
    )


def test_the_field_reaches_the_trainer_and_must_be_a_bool():
    from agentrl.configtools import override
    from agentrl.envs import make as make_env
    from agentrl.online.program import transformer_program
    from agentrl.train.config import complete_config
    from agentrl.train.experiments import load_experiment

    config = load_experiment("transformer_ppo_darkroom", "smoke")
    assert config.algo.clip_values is False
    config = override(config, {"algo.clip_values": True})
    env = make_env(config.data.env, **dict(config.data.env_args))
    shape = transformer_program(complete_config(config, env), env).trainer.shape
    assert shape.clip_values is True
    with pytest.raises(ValueError, match="algo.clip_values must be true or false"):
        TransformerPPO(clip_values=1)
