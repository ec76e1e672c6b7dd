"""DPT's training loss as the reference computes it: the oracle's label
against the predictions from every prefix with at least one transition
(``net.py`` returns ``preds[:, 1:]`` in training); the query-only position
is never trained."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from model_factory import make_model

from agentrl import envs
from agentrl.algos import DPT, dpt_loss
from agentrl.models import ModelConfig
from agentrl.models.config import complete_model_config

N = 6


def _transition_model(env):
    """A one-layer DPT model reading ``N`` (s, a, r, s') transition tokens."""
    cfg = ModelConfig(
        num_layers=1, num_heads=1, d_model=16, d_ff=32, max_steps=N + 1,
        token_layout="transition",
    )  # fmt: skip
    return make_model(complete_model_config(cfg, env, DPT(context_size=N)), seed=3)


@pytest.mark.long
def test_the_query_only_position_is_left_out_of_the_loss():
    env = envs.make("gaussian_bandit", num_arms=4, horizon=N)
    model = _transition_model(env)
    rng = np.random.default_rng(0)
    b = 5
    batch = {
        "query_obs": jnp.zeros((b,), jnp.int32),
        "context_obs": jnp.zeros((b, N), jnp.int32),
        "context_action": jnp.asarray(rng.integers(0, 4, (b, N)), jnp.int32),
        "context_reward": jnp.asarray(rng.normal(size=(b, N)), jnp.float32),
        "context_next_obs": jnp.zeros((b, N), jnp.int32),
        "label": jnp.asarray(rng.integers(0, 4, b), jnp.int32),
    }
    loss, metrics, out = dpt_loss(model, batch, deterministic=True)
    logp = jax.nn.log_softmax(out.action, axis=-1)  # [B, N + 1, A]
    nll = -jnp.take_along_axis(logp, batch["label"][:, None, None], -1)[..., 0]
    np.testing.assert_allclose(float(loss), float(nll[:, 1:].mean()), rtol=1e-5)
    assert abs(float(nll[:, 1:].mean()) - float(nll.mean())) > 1e-4  # they differ
    # the accuracy DPT is judged by reads the whole context (the last position)
    hits = np.argmax(out.action, -1) == np.asarray(batch["label"])[:, None]
    assert hits[:, -1].mean() != hits[:, 0].mean()
    np.testing.assert_allclose(
        float(metrics["accuracy_full_context"]), hits[:, -1].mean()
    )


# Mutants the tests above let through (session 56's mutation pass).


def test_each_prediction_reads_its_transitions_next_state():
    # the context set's transitions are (s, a, r, s'): changing only the
    # next state of transition 3 (0-based) changes the predictions of
    # positions 4..N (which see it) and no earlier one (causal prefixes)
    env = envs.make("darkroom", size=5, horizon=N)
    model = _transition_model(env)
    rng = np.random.default_rng(1)
    b = 4
    batch = {
        "query_obs": jnp.asarray(rng.integers(0, 25, b), jnp.int32),
        "context_obs": jnp.asarray(rng.integers(0, 25, (b, N)), jnp.int32),
        "context_action": jnp.asarray(rng.integers(0, 5, (b, N)), jnp.int32),
        "context_reward": jnp.zeros((b, N), jnp.float32),
        "context_next_obs": jnp.asarray(rng.integers(0, 25, (b, N)), jnp.int32),
        "label": jnp.asarray(rng.integers(0, 5, b), jnp.int32),
    }
    _, _, out = dpt_loss(model, batch, deterministic=True)
    moved = dict(batch)
    moved["context_next_obs"] = batch["context_next_obs"].at[:, 3].add(7) % 25
    _, _, out2 = dpt_loss(model, moved, deterministic=True)
    a, a2 = np.asarray(out.action), np.asarray(out2.action)
    np.testing.assert_allclose(a2[:, :4], a[:, :4], atol=1e-6)
    assert np.abs(a2[:, 4:] - a[:, 4:]).max(axis=(0, 2)).min() > 1e-4


def test_the_loss_and_accuracy_read_the_positions_the_reference_trains():
    # A stand-in model with fixed logits (no transformer: this runs in the
    # fast suite beside the long test above): the loss is the label's NLL
    # averaged over positions 1..N (position 0, the query alone, is left
    # out), the accuracy DPT is judged by is the last position's argmax.
    from types import SimpleNamespace

    from agentrl.models.heads import ModelOutput

    rng = np.random.default_rng(2)
    b, arms = 3, 4
    logits = jnp.asarray(rng.normal(size=(b, N + 1, arms)), jnp.float32)
    label = jnp.array([0, 1, 2], jnp.int32)
    logits = logits.at[:, -1].set(jax.nn.one_hot(jnp.array([0, 3, 2]), arms) * 5)
    model = SimpleNamespace(
        config=SimpleNamespace(head="categorical"),
        predict_query=lambda *a, **k: ModelOutput(logits, None, {}),
    )
    fields = ("query_obs", "context_obs", "context_action", "context_reward")
    batch = {**dict.fromkeys((*fields, "context_next_obs")), "label": label}
    loss, metrics, _ = dpt_loss(model, batch, deterministic=True)
    nll = -jnp.take_along_axis(
        jax.nn.log_softmax(logits, -1), label[:, None, None], -1
    )[..., 0]
    np.testing.assert_allclose(float(loss), float(nll[:, 1:].mean()), rtol=1e-6)
    assert abs(float(nll[:, 1:].mean()) - float(nll[:, 2:].mean())) > 1e-3
    assert abs(float(nll[:, 1:].mean()) - float(nll.mean())) > 1e-3
    np.testing.assert_allclose(float(metrics["accuracy_full_context"]), 2 / 3)
