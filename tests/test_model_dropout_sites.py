"""Dropout sites of the decision model: embedding, residual, attention weights.

``ModelConfig.dropout`` is the embedding and residual rate it always was;
``embedding_dropout`` / ``residual_dropout`` (``None``: ``dropout``) set one
site each and ``attention_dropout`` drops attention weights (the AD-ε
reference's 0.5 / 0.1 / 0.3, docs/fidelity.md item 13). Each site drops
only where it says, training passes only; the blockwise attention (flash,
hand-written backward pass) and the reference drop the same weights for the
same key, outputs and gradients alike; a model with the new fields at their
defaults has the state and the outputs it had before they existed. Every
test runs under JAX's key-reuse checker.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from model_factory import make_model
from test_models_transformer import B, T, forward, inputs, run_decode, small

from agentrl.models import DecisionModel, ModelConfig, attention
from agentrl.models.attention import (
    WeightDropout,
    _weight_keep,
    blockwise_attention,
    masked_attention,
    window_mask,
)
from agentrl.train.experiments import load_experiment


@pytest.fixture(autouse=True)
def key_reuse_checked():
    """A key consumed twice raises (the check is part of jit's cache key)."""
    with jax.debug_key_reuse(True):
        yield


def _model(cfg: ModelConfig, seed: int = 0) -> DecisionModel:
    """``make_model``'s random weights, each RNG stream its own key (the
    factory gives every stream the same one)."""
    model = make_model(cfg, seed)
    graphdef, state = nnx.split(model)
    leaves, tree = jax.tree.flatten(state)
    keys = iter(jax.random.split(jax.random.key(100 + seed), len(leaves)))
    fresh = [
        next(keys) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x
        for x in leaves
    ]
    return nnx.merge(graphdef, jax.tree.unflatten(tree, fresh))


@nnx.jit
def _train_pass(model, obs, act, rew):
    return model(obs, act, rew, deterministic=False).action


def _same_weights(cfg: ModelConfig, model: DecisionModel) -> DecisionModel:
    """A model of ``cfg`` (same parameters' shapes) with ``model``'s parameters."""
    graphdef, _, rest = nnx.split(_model(cfg), nnx.Param, ...)
    return nnx.merge(graphdef, nnx.state(model, nnx.Param), rest)


# -- config -------------------------------------------------------------------
@pytest.mark.parametrize(
    "field", ["dropout", "embedding_dropout", "residual_dropout", "attention_dropout"]
)
@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, float("nan"), True, "0.1"])
def test_rates_outside_zero_one_are_refused_naming_the_field(field, bad):
    with pytest.raises(ValueError, match=rf"ModelConfig.{field} must be in \[0, 1\)"):
        small(**{field: bad})


def test_unset_site_rates_are_dropouts_and_set_ones_their_own():
    cfg = small(dropout=0.2)
    assert (cfg.embedding_dropout_rate, cfg.residual_dropout_rate) == (0.2, 0.2)
    assert cfg.attention_dropout == 0.0
    cfg = small(dropout=0.2, embedding_dropout=0.0, residual_dropout=0.4)
    assert (cfg.embedding_dropout_rate, cfg.residual_dropout_rate) == (0.0, 0.4)
    for field in ("dropout", "attention_dropout"):  # not optional
        with pytest.raises(ValueError, match=f"ModelConfig.{field}"):
            small(**{field: None})


def test_rates_are_overridable_by_name():
    c = load_experiment(
        "ad_darkroom",
        "smoke",
        {"model.attention_dropout": "0.5", "model.embedding_dropout": "0.3"},
    )
    assert (c.model.attention_dropout, c.model.embedding_dropout) == (0.5, 0.3)
    assert c.model.residual_dropout is None
    with pytest.raises(ValueError, match="ModelConfig.attention_dropout"):
        load_experiment("ad_darkroom", "smoke", {"model.attention_dropout": "1"})


# -- the model's state and outputs at the defaults ---------------------------
def _paths(model, *filters) -> list[str]:
    """The paths of ``model``'s state (``filters``: of that part of it)."""
    state = nnx.state(model, *filters)
    return [
        jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(state)
    ]


def test_new_fields_add_no_parameters_and_unset_ones_no_state():
    """Checkpoints of existing models still load: the parameters are the
    same with every site set, and only an attention rate above 0 adds state
    (one RNG stream per layer, nothing else)."""
    base = small(dropout=0.1)
    model = nnx.eval_shape(lambda: DecisionModel(base, rngs=nnx.Rngs(0)))
    explicit = dataclasses.replace(base, embedding_dropout=0.1, residual_dropout=0.1)
    same = nnx.eval_shape(lambda: DecisionModel(explicit, rngs=nnx.Rngs(0)))
    assert _paths(same) == _paths(model)
    att = dataclasses.replace(base, attention_dropout=0.5, embedding_dropout=0.3)
    dropping = nnx.eval_shape(lambda: DecisionModel(att, rngs=nnx.Rngs(0)))
    assert _paths(dropping, nnx.Param) == _paths(model, nnx.Param)
    added = sorted(set(_paths(dropping)) - set(_paths(model)))
    assert set(_paths(model)) <= set(_paths(dropping))
    assert len(added) == 2 * base.num_layers  # a key and a count per layer
    assert all("attn" in p and "dropout_rngs" in p for p in added)


def test_defaults_trace_to_the_program_of_one_rate():
    """Unset sites are ``dropout``: the training pass's program and its
    output equal those of a model with both sites set to it (the code path
    every existing preset took before the sites existed)."""
    base = small(dropout=0.3)
    explicit = dataclasses.replace(base, embedding_dropout=0.3, residual_dropout=0.3)
    model = _model(base)
    other = _model(explicit)
    obs, act, rew = inputs(base)

    def program(m):
        graphdef, state = nnx.split(m)

        def run(state):
            return nnx.merge(graphdef, state)(obs, act, rew, deterministic=False)

        return str(jax.make_jaxpr(run)(state))

    assert program(model) == program(other)
    np.testing.assert_array_equal(
        _train_pass(model, obs, act, rew), _train_pass(other, obs, act, rew)
    )


# -- each site drops only where it says --------------------------------------
def _mask_shapes(monkeypatch, model, cfg) -> list[tuple]:
    """Shapes of every dropout mask one training pass draws."""
    shapes = []
    bernoulli = jax.random.bernoulli

    def spy(key, p=0.5, shape=None, **kw):
        shapes.append(tuple(shape))
        return bernoulli(key, p, shape, **kw)

    monkeypatch.setattr(jax.random, "bernoulli", spy)
    obs, act, rew = inputs(cfg)
    graphdef, state = nnx.split(model)
    jax.make_jaxpr(
        lambda s: nnx.merge(graphdef, s)(obs, act, rew, deterministic=False)
    )(state)
    return shapes


@pytest.mark.parametrize(
    "site, rates",
    [
        ("embedding", dict(embedding_dropout=0.5, residual_dropout=0.0)),
        ("residual", dict(residual_dropout=0.5)),
        ("attention", dict(attention_dropout=0.5)),
    ],
)
def test_one_site_drops_and_the_others_do_not(monkeypatch, site, rates):
    """A rate at one site: masks drawn there only (the embedding's tokens
    ``[B, T, d]`` once, two residual branches per layer, one attention tile
    per query block and (batch, head) group), the training pass changed,
    the evaluation pass the undropped model's."""
    cfg = small(dropout=0.0, attention_block=4, **rates)
    model = _model(cfg)
    shapes = _mask_shapes(monkeypatch, model, cfg)
    tokens = (B, T, cfg.d_model)
    if site == "embedding":
        assert shapes == [tokens]
    elif site == "residual":
        assert shapes == [tokens] * (2 * cfg.num_layers)
    else:
        blocks = -(-T // cfg.attention_block)  # query blocks of 4 of 9 tokens
        assert len(shapes) == cfg.num_layers * blocks
        assert all(len(s) == 2 and s[0] <= cfg.attention_block for s in shapes)
    monkeypatch.undo()
    plain = _same_weights(small(dropout=0.0, attention_block=4), model)
    obs, act, rew = inputs(cfg)
    evaluation = forward(model, obs, act, rew).action
    np.testing.assert_array_equal(evaluation, forward(plain, obs, act, rew).action)
    training = _train_pass(model, obs, act, rew)
    assert np.abs(training - evaluation).max() > 1e-3


def test_attention_dropout_changes_training_not_evaluation_or_decoding():
    cfg = small(attention_dropout=0.5, attention_block=4)
    model = _model(cfg)
    obs, act, rew = inputs(cfg)
    plain = _same_weights(small(attention_block=4), model)
    full = forward(model, obs, act, rew).action
    np.testing.assert_array_equal(full, forward(plain, obs, act, rew).action)
    cached, _ = run_decode(model, cfg, obs, act, rew, steps=cfg.max_steps)
    np.testing.assert_allclose(cached, full, atol=1e-5, rtol=0)
    first, second = (_train_pass(model, obs, act, rew) for _ in range(2))
    assert np.abs(first - full).max() > 1e-3
    assert np.abs(first - second).max() > 1e-3  # a fresh key each pass


# -- blockwise == reference under the same key ------------------------------
@pytest.mark.parametrize(
    "sink, window, block, tile, one_pass",
    [
        (False, 9, 16, 1, 0),  # chunks of one (batch, head) group
        (True, 12, 8, 96, 0),  # a sliding window, chunks of 2 groups
        (True, 40, 8, 1 << 18, 1 << 20),  # one pass (autodiff)
        (False, 40, 8, 1 << 18, 0),  # one chunk of every group
    ],
)
@pytest.mark.long
def test_blockwise_drops_the_reference_weights(
    monkeypatch, sink, window, block, tile, one_pass
):
    """Outputs and gradients (queries, keys, values, the sink's key and
    value) of the flash pass with dropout, its hand-written backward pass
    drawing each tile's mask again, equal autodiff of the reference with the
    same key; every chunking draws the same masks."""
    monkeypatch.setattr(attention, "TILE_ELEMENTS", tile)
    monkeypatch.setattr(attention, "ONE_PASS_ELEMENTS", one_pass)
    b, t, h, d = 2, 37, 2, 4
    keys = jax.random.split(jax.random.key(7), 6)
    q, k, v, g = (jax.random.normal(x, (b, t, h, d)) for x in keys[:4])
    sink_kv = tuple(jax.random.normal(x, (h, d)) for x in keys[4:]) if sink else None
    pos = jnp.arange(t)
    drop_key = jax.random.key(3)

    def fast(q, k, v, s):
        drop = WeightDropout(jax.random.clone(drop_key), 0.4)
        return blockwise_attention(q, k, v, window, block, s, drop)

    def ref(q, k, v, s):
        drop = WeightDropout(jax.random.clone(drop_key), 0.4)
        return masked_attention(q, k, v, pos, pos, window, s, drop, block)

    args = (q, k, v, sink_kv)
    y_fast, y_ref = jax.jit(fast)(*args), jax.jit(ref)(*args)
    np.testing.assert_allclose(y_fast, y_ref, atol=1e-5)
    undropped = masked_attention(q, k, v, pos, pos, window, sink_kv)
    assert np.abs(y_ref - undropped).max() > 0.1

    def grads(fn):
        loss = jax.jit(jax.grad(lambda *a: jnp.sum(fn(*a) * g), argnums=(0, 1, 2, 3)))
        return jax.tree.leaves(loss(*args))

    g_fast, g_ref = grads(fast), grads(ref)
    assert len(g_fast) == len(g_ref) == (5 if sink else 3)
    for a, r in zip(g_fast, g_ref, strict=True):
        np.testing.assert_allclose(a, r, atol=2e-5, rtol=1e-5)


def test_the_keep_mask_keeps_one_minus_the_rate_inside_the_window():
    t, window, block, rate = 64, 20, 16, 0.3
    keys = jax.random.split(jax.random.key(0), 8)
    keep = _weight_keep(keys, t, window, block, rate, False)
    visible = np.asarray(window_mask(jnp.arange(t), jnp.arange(t), window))
    kept = np.asarray(keep)[:, visible]
    assert abs(kept.mean() - (1 - rate)) < 0.02
    # drawn on each query block's key span only (the entries it hides there
    # have zero weight anyway)
    span = np.zeros((t, t), bool)
    for q0, q1, k0 in attention._query_spans(t, window, block):
        span[q0:q1, k0:q1] = True
    assert visible[~span].sum() == 0 and not np.asarray(keep)[:, ~span].any()
    # the groups draw different masks
    assert (np.asarray(keep[0]) != np.asarray(keep[1])).any()


@pytest.mark.long
def test_model_paths_drop_the_same_weights_outputs_and_gradients():
    """A blockwise and a reference model with the same parameters and RNG
    state: the same training outputs and parameter gradients."""
    cfg = small(
        attention_dropout=0.5,
        dropout=0.1,
        attention_block=4,
        token_layout="sar",
        attention_sink=True,
    )
    fast = _model(cfg)
    graphdef, _ = nnx.split(_model(dataclasses.replace(cfg, attention="reference")))
    ref = nnx.merge(graphdef, nnx.state(fast), copy=True)
    obs, act, rew = inputs(cfg)
    np.testing.assert_allclose(
        _train_pass(fast, obs, act, rew), _train_pass(ref, obs, act, rew), atol=2e-5
    )

    def loss(m):
        return jnp.mean(m(obs, act, rew, deterministic=False).action ** 2)

    grad = nnx.jit(nnx.grad(loss))
    g_fast = jax.tree.leaves(nnx.state(grad(fast), nnx.Param))
    g_ref = jax.tree.leaves(nnx.state(grad(ref), nnx.Param))
    assert len(g_fast) == len(g_ref)
    for a, b in zip(g_fast, g_ref, strict=True):
        np.testing.assert_allclose(a, b, atol=5e-5, rtol=1e-4)


@pytest.mark.long
def test_remat_draws_the_same_attention_masks():
    cfg = small(attention_dropout=0.5, attention_block=4)
    model = _model(cfg)
    graphdef, _ = nnx.split(_model(dataclasses.replace(cfg, remat=True)))
    again = nnx.merge(graphdef, nnx.state(model), copy=True)
    obs, act, rew = inputs(cfg)

    def loss(m):
        return jnp.mean(m(obs, act, rew, deterministic=False).action ** 2)

    grad = nnx.jit(nnx.value_and_grad(loss))
    (l1, g1), (l2, g2) = grad(model), grad(again)
    np.testing.assert_allclose(l1, l2, rtol=1e-6)
    evaluation = jnp.mean(forward(model, obs, act, rew).action ** 2)
    assert abs(float(l1) - float(evaluation)) > 1e-4  # the masks dropped weights
    for a, b in zip(
        jax.tree.leaves(nnx.state(g1)), jax.tree.leaves(nnx.state(g2)), strict=True
    ):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-5)
