"""T2MIR's contrastive task loss: the router's logits averaged over tokens,
DPT's query token left out (as T2MIR's reference code)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from model_factory import make_model

from agentrl.algos import DPT, T2MIR
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
