"""ReLIC's full update in transformer PPO (``algo.full_update``), and its
unnormalised advantages (``algo.normalize_advantages = false``).

ReLIC (aielawady/relic ``relic/trainer/transformers_trainer.py``, ``train``)
makes no partial update at a rollout's last step; the update after the
rollout starts its loss at step 0 when ``full_updates_per_rollout > 0``. So
a trial of ``L / K`` chunks has ``L / K - 1`` partial updates and one over
all ``L`` steps. What is checked here, against values computed apart:

- the updates' value losses are those of GAE over the first chunk (with its
  bootstrap) and over the whole trial (NumPy GAE on the critic's values);
  without the full update, over the first and the last chunk;
- the last chunk is acted by the weights of the partial update before it
  (the cache re-encoded with them), and the trial ends on other weights
  than the plain partial-update trial's;
- with one chunk (``update_every = 0``) the flag changes nothing;
- without normalisation, the policy loss at ratio 1 is minus the mean raw
  advantage (NumPy GAE); with it, 0;
- the algorithm's fields reach the trainer, and a non-bool is refused.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from test_online_rl2 import hp
from test_online_transformer import forward_logp, full_forward, make_trainer

from agentrl.algos import TransformerPPO


def full_update_trainer(update_every: int, **changes):
    trainer = make_trainer(update_every)
    changes = {"full_update": True, **changes}
    shape = dataclasses.replace(trainer.shape, **changes)
    return type(trainer)(trainer.env, shape, trainer.config, trainer.sample_task)


def numpy_gae(values, rewards, bootstrap, gamma, lam):
    """``[env, T]`` advantages, no episode end before ``T``."""
    adv = np.zeros_like(values)
    acc = np.zeros(values.shape[0])
    for t in reversed(range(values.shape[1])):
        following = values[:, t + 1] if t + 1 < values.shape[1] else bootstrap
        delta = rewards[:, t] + gamma * following - values[:, t]
        acc = delta + gamma * lam * acc
        adv[:, t] = acc
    return adv


def value_loss(adv):
    return 0.5 * float(np.mean(adv**2))


@pytest.mark.long
def test_the_last_update_trains_on_the_whole_trial():
    """At learning rate 0 nothing moves, so each update's value loss is
    0.5 x mean(GAE²) over its own steps, from the initial critic: the full
    update's spans the 8 steps (no bootstrap), the plain trial's last
    update only steps 4-7."""
    params = hp(lr=0.0)
    gamma, lam = float(params["gamma"]), float(params["gae_lambda"])
    losses = {}
    for full in (False, True):
        trainer = full_update_trainer(4) if full else make_trainer(4)
        state = trainer.init(jax.random.key(0), params)
        _, metrics, buf, _ = jax.jit(trainer.run_trial)(state, params)
        critic = full_forward(trainer, state.critic, buf)
        values, rewards = np.asarray(critic[..., 0]), np.asarray(buf["reward"])
        first = numpy_gae(values[:, :4], rewards[:, :4], values[:, 4], gamma, lam)
        if full:
            last = numpy_gae(values, rewards, 0.0, gamma, lam)
        else:
            last = numpy_gae(values[:, 4:], rewards[:, 4:], 0.0, gamma, lam)
        expected = (value_loss(first) + value_loss(last)) / 2
        np.testing.assert_allclose(float(metrics["vf_loss"]), expected, rtol=1e-4)
        losses[full] = expected
    assert abs(losses[True] - losses[False]) > 1e-3 * losses[False]


@pytest.mark.long
def test_the_last_chunk_acts_after_one_partial_update_then_the_full_one_ends_it():
    params = hp(lr=1e-2)
    plain, full = make_trainer(4), full_update_trainer(4)
    state = full.init(jax.random.key(0), params)
    again = state._replace(key=jax.random.clone(state.key))  # the plain trial's
    new, metrics, buf, acting = jax.jit(full.run_trial)(state, params)
    assert jax.tree.leaves(acting)[0].shape[0] == 2
    first, second = (jax.tree.map(lambda x, c=c: x[c], acting) for c in (0, 1))
    assert all(jax.tree.leaves(jax.tree.map(np.array_equal, first, state.actor)))
    for c, actor in enumerate((first, second)):
        part = slice(4 * c, 4 * c + 4)
        np.testing.assert_allclose(
            buf["logp"][:, part],
            forward_logp(full, actor, buf)[:, part],
            rtol=1e-4,
            atol=1e-5,
        )
    # the first chunk's partial update is the plain trial's
    plain_new, _, plain_buf, plain_acting = jax.jit(plain.run_trial)(again, params)
    np.testing.assert_array_equal(plain_buf["action"], buf["action"])
    for a, b in zip(
        jax.tree.leaves(plain_acting), jax.tree.leaves(acting), strict=True
    ):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    moved = [
        not np.allclose(a, b, atol=1e-6)
        for a, b in zip(
            jax.tree.leaves(plain_new.actor), jax.tree.leaves(new.actor), strict=True
        )
    ]
    assert any(moved)  # the last update differs
    assert np.isfinite(float(metrics["loss"]))


@pytest.mark.long
def test_one_chunk_is_already_the_full_update():
    params = hp(lr=1e-2)
    plain, full = make_trainer(8), full_update_trainer(8)
    state = plain.init(jax.random.key(0), params)
    again = state._replace(key=jax.random.clone(state.key))
    a, _, _, _ = jax.jit(plain.run_trial)(state, params)
    b, _, _, _ = jax.jit(full.run_trial)(again, params)
    trained = (a.actor, a.critic, a.opt_state), (b.actor, b.critic, b.opt_state)
    for x, y in zip(*map(jax.tree.leaves, trained), strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.long
def test_unnormalised_advantages_enter_the_policy_loss_as_they_are():
    """At learning rate 0 the ratio is 1, so the policy loss is minus the
    mean advantage: the raw GAE's without normalisation, 0 with it."""
    params = hp(lr=0.0)
    gamma, lam = float(params["gamma"]), float(params["gae_lambda"])
    trainer = full_update_trainer(8, full_update=False, normalize_advantages=False)
    state = trainer.init(jax.random.key(0), params)
    _, metrics, buf, _ = jax.jit(trainer.run_trial)(state, params)
    critic = full_forward(trainer, state.critic, buf)
    values, rewards = np.asarray(critic[..., 0]), np.asarray(buf["reward"])
    adv = numpy_gae(values, rewards, 0.0, gamma, lam)
    assert abs(adv.mean()) > 0.05
    np.testing.assert_allclose(float(metrics["pg_loss"]), -adv.mean(), rtol=1e-4)


def test_normalised_advantages_have_no_mean_in_the_policy_loss():
    from agentrl.rl.ppo import ppo_loss

    adv = np.array([1.0, 2.0, 6.0, -1.0], np.float32)
    zeros = np.zeros(4, np.float32)
    args = (zeros, zeros, zeros, zeros, adv, zeros, 0.2, 0.5, 0.0)
    _, raw = ppo_loss(*args, normalize_advantages=False)
    _, normed = ppo_loss(*args)
    np.testing.assert_allclose(float(raw["pg_loss"]), -2.0, rtol=1e-6)
    np.testing.assert_allclose(float(normed["pg_loss"]), 0.0, atol=1e-6)


def test_the_fields_reach_the_trainer_and_must_be_bools():
    from agentrl.configtools import override
    from agentrl.envs import make as make_env
    from agentrl.online.program import transformer_program
    from agentrl.train.config import complete_config
    from agentrl.train.experiments import load_experiment

    config = load_experiment("transformer_ppo_darkroom", "smoke")
    assert config.algo.full_update is False
    assert config.algo.normalize_advantages is True
    changes = {"algo.full_update": True, "algo.normalize_advantages": False}
    config = override(config, changes)
    env = make_env(config.data.env, **dict(config.data.env_args))
    shape = transformer_program(complete_config(config, env), env).trainer.shape
    assert (shape.full_update, shape.normalize_advantages) == (True, False)
    for field in ("full_update", "normalize_advantages"):
        with pytest.raises(ValueError, match=f"algo.{field} must be true or false"):
            TransformerPPO(**{field: 1})
