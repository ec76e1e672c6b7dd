"""``model.normformer``: NormFormer's block (AMAGO's and T2MIR-AD's layer):
per-head output scales, a norm on the attention's output, one on the dense
FFN's hidden units; only its parameters are new, and decoding still equals
the full pass."""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from model_factory import make_model
from test_models_transformer import forward, inputs, run_decode, small


def _paths(model) -> set[str]:
    pure = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    leaves = jax.tree_util.tree_leaves_with_path(pure)
    return {".".join(str(getattr(k, "key", k)) for k in p) for p, _ in leaves}


def test_normformer_adds_only_its_own_parameters():
    plain = _paths(make_model(small(moe_layers=(1,))))
    norm = _paths(make_model(small(moe_layers=(1,), normformer=True)))
    assert plain < norm
    new = sorted(norm - plain)
    assert new == [
        "blocks.0.attn.head_scale",
        "blocks.0.attn_norm.bias",
        "blocks.0.attn_norm.scale",
        "blocks.0.ffn.hidden_norm.bias",
        "blocks.0.ffn.hidden_norm.scale",
        "blocks.1.attn.head_scale",  # the MoE layer: no norm inside experts
        "blocks.1.attn_norm.bias",
        "blocks.1.attn_norm.scale",
    ]


def _scaled(model, path: tuple[str, ...], factor: float):
    """``model`` with the kernel and bias of the linear at ``path`` times
    ``factor`` (a positive factor a following LayerNorm cancels)."""
    graphdef, state = nnx.split(model)
    pure = nnx.to_pure_dict(state)
    node = pure
    for key in path:
        node = node[key]
    node["kernel"] = node["kernel"] * factor
    node["bias"] = node["bias"] * factor
    nnx.replace_by_pure_dict(state, pure)
    return nnx.merge(graphdef, state)


def test_the_two_norms_cancel_the_scale_of_what_they_normalise():
    """Scaling the attention's output projection, or (under ReLU) the FFN's
    first layer, moves nothing when a norm follows it, and moves the output
    without one."""
    for normformer in (True, False):
        cfg = small(num_layers=1, ffn_activation="relu", normformer=normformer)
        model = make_model(cfg)
        obs, act, rew = inputs(cfg)
        base = forward(model, obs, act, rew).action
        for path in (("blocks", 0, "attn", "out"), ("blocks", 0, "ffn", "fc1")):
            moved = forward(_scaled(model, path, 3.0), obs, act, rew).action
            gap = float(jnp.abs(moved - base).max())
            assert gap < 1e-4 if normformer else gap > 1e-3, (path, gap)


def test_each_heads_scale_multiplies_that_heads_rows_of_the_projection():
    cfg = small(num_layers=1, normformer=True)
    model = make_model(cfg)
    obs, act, rew = inputs(cfg)
    graphdef, state = nnx.split(model)
    scaled, folded = nnx.to_pure_dict(state), nnx.to_pure_dict(state)
    attn_scaled, attn_folded = scaled["blocks"][0]["attn"], folded["blocks"][0]["attn"]
    scales = jnp.array([2.0, 0.5])
    attn_scaled["head_scale"] = scales
    attn_folded["head_scale"] = jnp.ones(2)  # the scale folded into the rows
    rows = jnp.repeat(scales, cfg.d_model // cfg.num_heads)[:, None]
    attn_folded["out"]["kernel"] = attn_folded["out"]["kernel"] * rows
    outs = []
    for pure in (scaled, folded):
        nnx.replace_by_pure_dict(state, pure)
        outs.append(forward(nnx.merge(graphdef, state), obs, act, rew).action)
    np.testing.assert_allclose(outs[0], outs[1], atol=1e-5)
    assert float(jnp.abs(outs[0] - forward(model, obs, act, rew).action).max()) > 1e-3


def test_cached_decoding_equals_the_full_pass_with_normformer():
    """A rolling 4-step cache over 9 steps, a dense and an MoE layer."""
    cfg = small(normformer=True, moe_layers=(1,))
    model = make_model(cfg)
    obs, act, rew = inputs(cfg)
    full = forward(model, obs, act, rew, window=4).action
    cached, _ = run_decode(model, cfg, obs, act, rew, steps=4)
    np.testing.assert_allclose(cached, full, atol=1e-5, rtol=0)


def test_the_ffn_norms_its_hidden_units_after_the_activation():
    """``fc2(LN(act(fc1 h)))``, AMAGO's order (a norm before the activation
    would cancel the same scales)."""
    from agentrl.models.transformer import MLP

    mlp = MLP(4, 8, rngs=nnx.Rngs(0), activation="relu", hidden_norm=True)
    h = jax.random.normal(jax.random.key(1), (3, 4))
    hidden = jax.nn.relu(mlp.fc1(h))
    mean = hidden.mean(-1, keepdims=True)
    normed = (hidden - mean) / jnp.sqrt(hidden.var(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(mlp(h), mlp.fc2(normed), atol=1e-5)
