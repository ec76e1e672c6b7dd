"""Decision-model behaviour the model tests leave open: DPT tokens, task routing."""

import jax
import numpy as np
import pytest
from flax import nnx
from model_factory import make_model
from test_models_transformer import T, _decode, forward, inputs, run_decode, small

from agentrl.models.moe import router_logits


def test_dpt_tokens_tell_a_state_from_its_next_state():
    """A context token embeds s and s' with separate tables (emb(s) +
    emb'(s')): swapping them changes every prediction that sees the
    context, not the query-only one."""
    cfg = small(token_layout="transition", max_steps=8)
    model = make_model(cfg)
    obs, act, rew = inputs(cfg, t=4)
    nxt = (obs + 3) % cfg.obs_size
    predict = nnx.jit(lambda m, *a: m.predict_query(*a).action)
    out = np.asarray(predict(model, obs[:, 0], obs, act, rew, nxt))
    swapped = np.asarray(predict(model, obs[:, 0], nxt, act, rew, obs))
    np.testing.assert_allclose(swapped[:, 0], out[:, 0], atol=1e-6)
    assert np.abs(swapped[:, 1:] - out[:, 1:]).max(-1).min() > 1e-4


def test_task_gates_route_the_task_router_input():
    """The last MoE layer's task-wise MoE (the one ``model.task_router`` and
    the aux report) routes ``task_router_input`` (with sequence routing the
    running mean of the FFN inputs): its gates are the softmax over the
    top-k of the router's logits of that input (numpy here), and
    ``task_router_logits`` their mean over T."""
    cfg = small(moe_layers=(0, 1), task_routing="sequence")
    model = make_model(cfg)
    aux = forward(model, *inputs(cfg)).aux
    x = np.asarray(aux["task_router_input"])
    params = nnx.state(model.task_router, nnx.Param)
    logits = np.asarray(router_logits(params, jax.numpy.asarray(x)))
    k = cfg.task_top_k
    top = np.argsort(-logits, axis=-1)[..., :k]
    vals = np.take_along_axis(logits, top, -1)
    w = np.exp(vals - vals.max(-1, keepdims=True))
    gates = np.zeros_like(logits)
    np.put_along_axis(gates, top, w / w.sum(-1, keepdims=True), -1)
    np.testing.assert_allclose(aux["task_gates"][-1], gates, atol=1e-5)
    np.testing.assert_allclose(aux["task_router_logits"], logits.mean(1), atol=1e-5)


@pytest.mark.long
def test_sequence_routing_decode_and_prefill_equal_the_full_pass():
    """Task routing on the running window mean: rolling decoding (a 4-step
    window over 9 steps, the router inputs' ring wrapped) equals the full
    pass with that window, and a prefill of 6 steps equals the full pass
    there and lets decoding go on to the same outputs."""
    cfg = small(moe_layers=(1,), task_routing="sequence")
    model = make_model(cfg)
    obs, act, rew = inputs(cfg)
    full = forward(model, obs, act, rew, window=4).action
    cached, _ = run_decode(model, cfg, obs, act, rew, steps=4)
    np.testing.assert_allclose(cached, full, atol=1e-5, rtol=0)
    whole = forward(model, obs, act, rew).action
    prefill = nnx.jit(lambda m, *a: m.prefill(*a, piece=3, max_steps=T))
    out, cache = prefill(model, obs, act, rew, 6)
    np.testing.assert_allclose(out[:, :6], whole[:, :6], atol=1e-5, rtol=0)
    for t in range(6, T):
        o, cache = _decode(model, cache, obs[:, t], act[:, t - 1], rew[:, t - 1])
        np.testing.assert_allclose(o.action, whole[:, t], atol=1e-5, rtol=0)


def test_features_are_the_action_heads_input():
    """``head(features(...))[0]`` is ``__call__(...).action`` over 9 steps
    (the whole window, as the full pass attends)."""
    cfg = small()
    model = make_model(cfg)
    obs, act, rew = inputs(cfg)
    feats = nnx.jit(lambda m, *a: m.head(m.features(*a))[0])(model, obs, act, rew)
    full = forward(model, obs, act, rew).action
    np.testing.assert_allclose(feats, full, atol=1e-5, rtol=0)
