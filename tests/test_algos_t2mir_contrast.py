"""T2MIR's contrastive task loss: the router's logits averaged over tokens,
DPT's query token left out (as T2MIR's reference code)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from model_factory import make_model

from agentrl.algos import DPT, T2MIR, dpt_loss
from agentrl.algos.t2mir import init_ema_router, t2mir_terms
from agentrl.models import ModelConfig, contrastive_loss, task_router_logits
from agentrl.models.moe import router_logits


@pytest.mark.long
def test_dpt_contrast_leaves_the_query_token_out():
    cfg = ModelConfig(
        obs_kind="discrete",
        obs_size=25,
        action_size=5,
        num_layers=2,
        num_heads=2,
        d_model=16,
        d_ff=32,
        max_steps=11,
        token_layout="transition",
        moe_layers=(1,),
        task_experts=4,
    )
    model = make_model(cfg, seed=3)
    graphdef, weights = nnx.split(model)
    rng = np.random.default_rng(0)
    b, n = 4, 10
    ctx = lambda high: jnp.asarray(rng.integers(0, high, (b, n)))  # noqa: E731
    forward = jax.jit(lambda w, *a: nnx.merge(graphdef, w).predict_query(*a))
    out = forward(
        weights,
        jnp.asarray(rng.integers(0, 25, b)),
        ctx(25),
        ctx(5),
        jnp.asarray(rng.random((b, n)), jnp.float32),
        ctx(25),
    )
    ema = jax.tree.map(lambda x: x * 0.5, init_ema_router(model))
    task_id = jnp.array([0, 0, 1, 1])
    x = out.aux["task_router_input"]
    online = nnx.state(model.task_router, nnx.Param)
    # the model's own average is over every token, the query's included
    np.testing.assert_allclose(
        out.aux["task_router_logits"], router_logits(online, x).mean(1), atol=1e-5
    )

    @jax.jit
    def expected(skip_x):
        q = router_logits(online, skip_x).mean(1)
        k = task_router_logits(ema, skip_x)
        return contrastive_loss(q, k, model.contrastive_w, task_id)

    @jax.jit
    def terms(w, out):
        m = nnx.merge(graphdef, w)
        batch = {"task_id": task_id}
        return t2mir_terms(m, out, batch, ema, 1)[1], t2mir_terms(m, out, batch, ema)[1]

    assert getattr(T2MIR(base=DPT()).base, "query_tokens", 0) == 1
    with_skip, all_tokens = terms(weights, out)
    expected = {1: expected(x[:, 1:]), 0: expected(x)}.get
    np.testing.assert_allclose(with_skip, expected(1), rtol=1e-5)
    np.testing.assert_allclose(all_tokens, expected(0), rtol=1e-5)
    assert abs(float(with_skip) - float(all_tokens)) > 1e-6


# Mutants the tests above let through (session 56's mutation pass).


def _t2mir_dpt_model_and_batch():
    cfg = ModelConfig(
        obs_kind="discrete", obs_size=25, action_size=5, num_layers=2,
        num_heads=2, d_model=16, d_ff=32, max_steps=11,
        token_layout="transition", moe_layers=(1,), task_experts=4,
    )  # fmt: skip
    model = make_model(cfg, seed=3)
    rng = np.random.default_rng(0)
    b, n = 4, 10
    batch = {
        "query_obs": jnp.asarray(rng.integers(0, 25, b), jnp.int32),
        "context_obs": jnp.asarray(rng.integers(0, 25, (b, n)), jnp.int32),
        "context_action": jnp.asarray(rng.integers(0, 5, (b, n)), jnp.int32),
        "context_reward": jnp.asarray(rng.random((b, n)), jnp.float32),
        "context_next_obs": jnp.asarray(rng.integers(0, 25, (b, n)), jnp.int32),
        "label": jnp.asarray(rng.integers(0, 5, b), jnp.int32),
        "task_id": jnp.array([0, 0, 1, 1]),
    }
    return model, batch


@pytest.mark.long
def test_t2mir_loss_weights_its_terms_and_skips_the_dpt_query():
    # loss = base + balance_weight * balance + contrastive_weight * contrast,
    # the contrast over the context tokens only (DPT's query left out)
    model, batch = _t2mir_dpt_model_and_batch()
    # sharper task-router features (w2 x 10, W x 3) so the rows' features
    # differ: the contrast is then 1.28, and 1.19 with the query token in
    # (at the random weights both are ~log 2 and differ by 1e-5)
    model.task_router.w2[...] = model.task_router.w2[...] * 10.0
    model.contrastive_w[...] = model.contrastive_w[...] * 3.0
    ema = jax.tree.map(lambda x: x * 0.5, init_ema_router(model))
    algo = T2MIR(base=DPT(context_size=10))
    hp = {"base": {}, "balance_weight": 0.3, "contrastive_weight": 0.7, "ema_tau": 0.25}
    loss, metrics, out = algo.loss(model, batch, ema, hp, env=None, deterministic=True)
    base = dpt_loss(model, batch, deterministic=True)[0]
    balance, contrast = t2mir_terms(model, out, batch, ema, 1)
    assert float(balance) > 1e-3 and float(contrast) > 1e-3  # both terms count
    want = float(base) + 0.3 * float(balance) + 0.7 * float(contrast)
    np.testing.assert_allclose(float(loss), want, rtol=1e-5)
    np.testing.assert_allclose(
        float(metrics["contrastive_loss"]), float(contrast), rtol=1e-5
    )
    with_query = float(t2mir_terms(model, out, batch, ema, 0)[1])
    assert abs(with_query - float(contrast)) > 0.05  # the skip matters here


def test_t2mir_ema_router_moves_a_tau_step_towards_the_online_router():
    # ema = 0.5 w; one update at tau 0.25: 0.75 * 0.5 w + 0.25 * w = 0.625 w
    model, _ = _t2mir_dpt_model_and_batch()
    online = nnx.state(model.task_router, nnx.Param)
    ema = jax.tree.map(lambda x: x * 0.5, init_ema_router(model))
    new = T2MIR(base=DPT()).update_aux(ema, model, {"ema_tau": jnp.float32(0.25)})
    for got, w in zip(jax.tree.leaves(new), jax.tree.leaves(online), strict=True):
        np.testing.assert_allclose(got, 0.625 * np.asarray(w), rtol=1e-6)
