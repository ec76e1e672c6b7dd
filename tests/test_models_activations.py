"""``model.ffn_activation``: each name is its reference's function, the dense
FFN and the MoE experts both use it, and configs saved before it load."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from model_factory import make_model
from test_models_transformer import small

from agentrl import configtools
from agentrl.models import ModelConfig
from agentrl.models.activations import FFN_ACTIVATIONS
from agentrl.models.moe import Experts
from agentrl.models.transformer import MLP
from agentrl.train.config import ExperimentConfig
from agentrl.train.experiments import load_experiment

X = np.linspace(-6.0, 6.0, 241, dtype=np.float32)


def _by_hand(name: str, x: np.ndarray) -> np.ndarray:
    """Each activation from its textbook formula, in float64."""
    x = x.astype(np.float64)
    if name == "gelu":  # x Phi(x), torch's nn.GELU()
        return x * 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))
    if name == "gelu_tanh":  # GPT-2's gelu_new
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)
        return 0.5 * x * (1.0 + np.tanh(inner))
    if name == "relu":
        return np.maximum(x, 0.0)
    if name == "leaky_relu":  # torch's nn.LeakyReLU(): slope 0.01
        return np.where(x > 0, x, 0.01 * x)
    raise AssertionError(name)


@pytest.mark.parametrize("name", sorted(FFN_ACTIVATIONS))
def test_each_activation_is_its_formula(name):
    got = np.asarray(FFN_ACTIVATIONS[name](jnp.asarray(X)))
    np.testing.assert_allclose(got, _by_hand(name, X), atol=2e-6)


def test_the_two_gelus_are_told_apart():
    """They are within 5e-4 of each other; a swap would still be caught."""
    gap = np.abs(_by_hand("gelu", X) - _by_hand("gelu_tanh", X)).max()
    assert 1e-4 < gap < 5e-4
    exact = np.asarray(FFN_ACTIVATIONS["gelu"](jnp.asarray(X)))
    assert np.abs(exact - _by_hand("gelu_tanh", X)).max() > 1e-4


@pytest.mark.parametrize("name", ["gelu", "relu", "leaky_relu"])
def test_the_dense_ffn_applies_its_activation(name):
    mlp = MLP(4, 8, rngs=nnx.Rngs(0), activation=name)
    h = 2.0 * jax.random.normal(jax.random.key(1), (3, 4))
    hidden = np.asarray(mlp.fc1(h))
    want = mlp.fc2(jnp.asarray(_by_hand(name, hidden), jnp.float32))
    np.testing.assert_allclose(mlp(h), want, atol=1e-5)


def test_every_expert_dispatch_applies_the_activation():
    """Dense, blocked and sorted experts all run ``w2 act(w1 x + b1) + b2``."""
    experts = Experts(3, 4, 8, 2, rngs=nnx.Rngs(0), activation="leaky_relu")
    x = jax.random.normal(jax.random.key(1), (5, 4))
    idx = jnp.array([[0, 1], [2, 0], [1, 2], [0, 2], [1, 0]])
    w = jnp.full((5, 2), 0.5)
    gates = jnp.zeros((5, 3)).at[jnp.arange(5)[:, None], idx].set(w)
    w1, b1, w2, b2 = (
        np.asarray(p[...]) for p in (experts.w1, experts.b1, experts.w2, experts.b2)
    )
    hidden = np.einsum("nd,edh->neh", np.asarray(x), w1) + b1
    out = np.einsum("neh,eho->neo", _by_hand("leaky_relu", hidden), w2) + b2
    want = np.einsum("ne,neo->no", np.asarray(gates), out)
    np.testing.assert_allclose(experts.dense(x, gates), want, atol=1e-5)
    np.testing.assert_allclose(experts.blocked(x, idx, w), want, atol=1e-5)
    np.testing.assert_allclose(experts.sorted(x, idx, w), want, atol=1e-5)


def test_the_model_passes_its_activation_to_every_feed_forward():
    """Same weights, another activation: another output; each layer's FFN
    (dense in layer 0, both MoEs' experts in layer 1) holds the setting."""
    relu, default = (
        make_model(small(moe_layers=(1,), ffn_activation=activation))
        for activation in ("relu", "gelu_tanh")
    )
    assert relu.blocks[0].ffn.activation == "relu"
    for moe in (relu.blocks[1].ffn.token_moe, relu.blocks[1].ffn.task_moe):
        assert moe.experts.activation == "relu"
    obs = jnp.zeros((1, 6), jnp.int32)
    action, reward = jnp.zeros((1, 6), jnp.int32), jnp.ones((1, 6))
    a = relu(obs, action, reward, deterministic=True).action
    b = default(obs, action, reward, deterministic=True).action
    assert np.abs(np.asarray(a - b)).max() > 1e-3


def test_an_unknown_activation_is_refused_naming_the_field_and_the_choices():
    with pytest.raises(ValueError, match=r"ffn_activation must be one of .*'gelu'"):
        ModelConfig(ffn_activation="swish")


def test_a_config_saved_before_the_setting_loads_at_gpt2s_gelu():
    config = load_experiment("ad_darkroom", "smoke")
    saved = configtools.to_dict(config)
    del saved["model"]["ffn_activation"]
    loaded = configtools.from_dict(ExperimentConfig, saved)
    assert loaded == config and loaded.model.ffn_activation == "gelu_tanh"
