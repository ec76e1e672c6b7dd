"""Fast attention paths equal the reference: blockwise, in-place decoding, Sink-KV.

The blockwise full pass (query blocks over only the keys the window keeps)
must equal the reference (full masked ``[T, T]`` scores) in outputs and
gradients, dense and MoE; cached decoding must equal the full pass and
compile without a single whole-cache copy per step; Sink-KV must be off by
default (no parameters, reference outputs unchanged) and do what it says.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hlo_tools import cache_shapes, count_copies
from model_factory import make_model
from test_models_transformer import forward, inputs, run_decode, small

from agentrl.models import DecisionModel, attention
from agentrl.models.attention import (
    NEG_INF,
    CausalSelfAttention,
    blockwise_attention,
    masked_attention,
    window_mask,
    window_mean,
    window_mean_cumsum,
)

T = 9  # steps; "sar" makes 27 tokens, so blocks of 4 tokens cut it 7 ways


def _pair(**kw):
    """The same random weights under the blockwise and the reference path."""
    fast = small(attention="blockwise", attention_block=4, **kw)
    ref = dataclasses.replace(fast, attention="reference")
    model = make_model(fast)
    graphdef, state = nnx.split(model)
    ref_model = nnx.merge(nnx.split(make_model(ref))[0], state)
    return fast, model, ref_model


@pytest.mark.long
@pytest.mark.parametrize(
    "layout, moe, routing, window",
    [
        ("step", (), "token", None),  # window 16 steps > T: plain causal
        # sliding window shorter than the sequence
        pytest.param("sar", (), "token", 3, marks=pytest.mark.long),
        # MoE + windowed-mean task routing
        pytest.param("sar", (0, 1), "sequence", 4, marks=pytest.mark.long),
        pytest.param("step", (1,), "sequence", None, marks=pytest.mark.long),
    ],
)
def test_blockwise_equals_reference_outputs_and_gradients(layout, moe, routing, window):
    cfg, model, ref_model = _pair(
        token_layout=layout, moe_layers=moe, task_routing=routing
    )
    obs, act, rew = inputs(cfg, T)
    fast = forward(model, obs, act, rew, window=window)
    ref = forward(ref_model, obs, act, rew, window=window)
    np.testing.assert_allclose(fast.action, ref.action, atol=2e-5, rtol=1e-5)

    def loss(m):
        out = m(obs, act, rew, window=window)
        return jnp.mean(out.action**2) + out.aux["balance_loss"]

    grad = nnx.jit(nnx.grad(loss))
    g_fast = jax.tree.leaves(nnx.state(grad(model)))
    g_ref = jax.tree.leaves(nnx.state(grad(ref_model)))
    assert len(g_fast) == len(g_ref)
    for a, b in zip(g_fast, g_ref, strict=True):
        np.testing.assert_allclose(a, b, atol=5e-5, rtol=1e-4)


def _all_shapes(jaxpr) -> list[tuple[int, ...]]:
    """Output shapes of every equation, nested jaxprs (map, custom_vjp) included."""
    shapes = []
    for eqn in jaxpr.eqns:
        shapes += [tuple(v.aval.shape) for v in eqn.outvars]
        for param in eqn.params.values():
            for sub in param if isinstance(param, tuple | list) else (param,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    shapes += _all_shapes(inner)
    return shapes


@pytest.mark.long
def test_blockwise_skips_masked_blocks_and_never_builds_t_by_t(monkeypatch):
    """A 64-token pass in 8-token blocks: no [64, 64] array, forward or backward."""
    b, t, h, d, block = 2, 64, 2, 4, 8
    q, k, v = (jax.random.normal(jax.random.key(i), (b, t, h, d)) for i in range(3))
    pos = jnp.arange(t)
    for window in (t, 12):
        keys = min(t, window + block - 1)  # met by one query block
        # tiles of 2 (batch, head) groups at a time, not all 4
        monkeypatch.setattr(attention, "TILE_ELEMENTS", 2 * block * keys)
        monkeypatch.setattr(attention, "ONE_PASS_ELEMENTS", 0)
        fast = blockwise_attention(q, k, v, window, block)
        ref = masked_attention(q, k, v, pos, pos, window)
        np.testing.assert_allclose(fast, ref, atol=1e-5)

        def loss(q, k, v, w=window):
            return jnp.sum(blockwise_attention(q, k, v, w, block) ** 2)

        jaxpr = jax.make_jaxpr(jax.grad(loss, argnums=(0, 1, 2)))(q, k, v)
        shapes = _all_shapes(jaxpr.jaxpr)
        assert all(s[-2:] != (t, t) for s in shapes)
        # score tiles [chunk, block, keys], forward and backward
        tiles = [s for s in shapes if len(s) == 3 and s[:2] == (2, block)]
        assert max(s[-1] for s in tiles) == keys


@pytest.mark.parametrize("sink", [False, True])
@pytest.mark.parametrize(
    "window, block, tile, one_pass",
    [
        pytest.param(40, 8, 1 << 18, 1 << 20, marks=pytest.mark.long),
        pytest.param(40, 8, 1 << 18, 0, marks=pytest.mark.long),
        pytest.param(12, 8, 96, 0, marks=pytest.mark.long),
        (9, 16, 1, 0),
    ],
)
def test_blockwise_gradients_equal_the_reference(
    monkeypatch, sink, window, block, tile, one_pass
):
    """Flash attention's backward pass vs autodiff of the reference.

    Gradients of queries, keys, values and the sink's key and value: in one
    pass (autodiff through the blocks), and by the hand-written backward pass
    with the (batch, head) groups in one chunk, in chunks of 2 and one at a
    time; a sliding window shorter than the sequence; a last block cut short.
    """
    monkeypatch.setattr(attention, "TILE_ELEMENTS", tile)
    monkeypatch.setattr(attention, "ONE_PASS_ELEMENTS", one_pass)
    b, t, h, d = 2, 37, 2, 4
    keys = jax.random.split(jax.random.key(7), 6)
    q, k, v, g = (jax.random.normal(x, (b, t, h, d)) for x in keys[:4])
    sink_kv = tuple(jax.random.normal(x, (h, d)) for x in keys[4:]) if sink else None
    pos = jnp.arange(t)

    def loss(fn, q, k, v, s):
        return jnp.sum(fn(q, k, v, s) * g)

    def fast(q, k, v, s):
        return blockwise_attention(q, k, v, window, block, s)

    def ref(q, k, v, s):
        return masked_attention(q, k, v, pos, pos, window, s)

    args = (q, k, v, sink_kv)
    y_fast, y_ref = fast(*args), ref(*args)
    np.testing.assert_allclose(y_fast, y_ref, atol=1e-5)
    g_fast = jax.grad(lambda *a: loss(fast, *a), argnums=(0, 1, 2, 3))(*args)
    g_ref = jax.grad(lambda *a: loss(ref, *a), argnums=(0, 1, 2, 3))(*args)
    for a, r in zip(jax.tree.leaves(g_fast), jax.tree.leaves(g_ref), strict=True):
        np.testing.assert_allclose(a, r, atol=2e-5, rtol=1e-5)


def test_window_mean_running_sum_equals_the_mask_matmul():
    x = jax.random.normal(jax.random.key(0), (2, 30, 5))
    pos = jnp.arange(30)
    for window in (1, 7, 30, 50):
        np.testing.assert_allclose(
            window_mean_cumsum(x, window), window_mean(x, pos, window), atol=1e-5
        )


@pytest.mark.parametrize(
    "layout, moe, routing, sink",
    [
        ("step", (), "token", False),
        pytest.param("sar", (0, 1), "sequence", False, marks=pytest.mark.long),
        pytest.param("sar", (), "token", True, marks=pytest.mark.long),
        pytest.param("step", (1,), "token", True, marks=pytest.mark.long),
    ],
)
def test_cached_decoding_equals_blockwise_full_pass(layout, moe, routing, sink):
    """Rolling 4-step cache vs the blockwise pass with a 4-step window."""
    cfg = small(
        token_layout=layout,
        moe_layers=moe,
        task_routing=routing,
        attention_block=4,
        attention_sink=sink,
    )
    model = make_model(cfg)
    obs, act, rew = inputs(cfg, T)
    full = forward(model, obs, act, rew, window=4).action
    cached, _ = run_decode(model, cfg, obs, act, rew, steps=4)
    np.testing.assert_allclose(cached, full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("layout", ["step", "sar"])
def test_decode_scan_updates_the_cache_in_place(layout):
    """No whole-cache copy in the compiled decoding loop (the cache is donated)."""
    cfg = small(token_layout=layout, max_steps=6)
    model = make_model(cfg)
    graphdef, weights = nnx.split(model)
    cache = model.init_cache(3)

    def run(weights, cache):
        def body(cache, t):
            obs = jnp.full((3,), t % cfg.obs_size, jnp.int32)
            zero = jnp.zeros((3,), jnp.int32)
            out, cache = nnx.merge(graphdef, weights).decode(
                cache, obs, zero, jnp.zeros((3,))
            )
            return cache, out.action

        return jax.lax.scan(body, cache, jnp.arange(20))

    hlo = jax.jit(run, donate_argnums=1).lower(weights, cache).compile().as_text()
    assert count_copies(hlo, cache_shapes(cache)) == 0

    # the counter does see copies: a loop that keeps the old cache needs one
    def keep(weights, cache):
        def body(c, t):
            _, new = nnx.merge(graphdef, weights).decode(
                c,
                jnp.zeros((3,), jnp.int32),
                jnp.zeros((3,), jnp.int32),
                jnp.zeros((3,)),
            )
            both = jax.tree.map(lambda a, b: a + b, c.keys, new.keys)
            return c._replace(keys=both), None

        return jax.lax.scan(body, cache, jnp.arange(3))[0]

    hlo = jax.jit(keep).lower(weights, cache).compile().as_text()
    assert count_copies(hlo, cache_shapes(cache), loops_only=False) > 0


def test_sink_is_off_by_default_and_reference_outputs_are_unchanged():
    cfg = small()
    assert not cfg.attention_sink
    model = make_model(dataclasses.replace(cfg, attention="reference"))
    names = {str(p[-1]) for p, _ in nnx.to_flat_state(nnx.state(model, nnx.Param))}
    assert not {"sink_key", "sink_value"} & names
    # the reference path is bit-identical to the original einsum-mask-softmax
    attn = model.blocks[0].attn
    x = jax.random.normal(jax.random.key(2), (2, 11, cfg.d_model))
    pos = jnp.arange(11)
    q, k, v = attn._project(x, pos)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k)
    s = jnp.where(window_mask(pos, pos, 5), s, NEG_INF)
    before = attn._merge(jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), v))
    np.testing.assert_array_equal(attn(x, pos, 5), before)


@pytest.mark.parametrize(
    "impl", [pytest.param("blockwise", marks=pytest.mark.long), "reference"]
)
def test_a_dominant_sink_makes_attention_output_the_sink_value(impl):
    d, h = 16, 2
    attn = CausalSelfAttention(
        d, h, 10000.0, rngs=nnx.Rngs(0), impl=impl, block=4, sink=True
    )
    # constant queries (zero kernel, bias b_q), sink key along b_q: the sink
    # logit is |b_q|^2 * 50 / sqrt(Dh) >> any token logit (token keys are 0)
    b_q = jnp.ones((d,))
    zeros = jnp.zeros((d, 3 * d))
    attn.qkv.kernel[...] = zeros
    attn.qkv.bias[...] = jnp.concatenate([b_q, jnp.zeros(d), jnp.ones(d)])
    dh = d // h
    attn.sink_key[...] = 50.0 * jnp.ones((h, dh))
    sink_v = jnp.arange(h * dh, dtype=jnp.float32).reshape(h, dh)
    attn.sink_value[...] = sink_v
    x = jax.random.normal(jax.random.key(1), (2, 10, d))
    y = attn(x, jnp.arange(10), 10)
    expect = attn.out(jnp.broadcast_to(sink_v.reshape(-1), (2, 10, d)))
    np.testing.assert_allclose(y, expect, atol=1e-4)
    # a sink key of zero is one more uniform competitor: values (all ones)
    # mix with the sink value at weight 1 / (n_visible + 1)
    attn.sink_key[...] = jnp.zeros((h, dh))
    y = attn(x, jnp.arange(10), 10)
    n = jnp.arange(1, 11, dtype=jnp.float32)[None, :, None, None]
    mix = (n * jnp.ones((h, dh)) + sink_v) / (n + 1)
    expect = jnp.broadcast_to(attn.out(mix.reshape(1, 10, d)), y.shape)
    np.testing.assert_allclose(y, expect, atol=1e-4)


@pytest.mark.long
def test_sink_parameters_exist_per_layer_and_head_and_train():
    cfg = small(attention_sink=True)
    model = DecisionModel(cfg, rngs=nnx.Rngs(0))
    for block in model.blocks:
        assert block.attn.sink_key.shape == (cfg.num_heads, cfg.head_dim)
        assert block.attn.sink_value.shape == (cfg.num_heads, cfg.head_dim)
    obs, act, rew = inputs(cfg, T)
    grads = nnx.grad(lambda m: jnp.sum(m(obs, act, rew).action ** 2))(model)
    assert float(jnp.abs(grads.blocks[0].attn.sink_value[...]).sum()) > 0
    assert float(jnp.abs(grads.blocks[0].attn.sink_key[...]).sum()) > 0


@pytest.mark.parametrize("layout", ["step", "sar"])
def test_ad_agent_in_the_driver_copies_no_cache(layout):
    """The evaluation loop (agent + environment) keeps the cache in place."""
    from agentrl import envs
    from agentrl.agents.driver import run_batched_agent
    from agentrl.agents.model_agents import ModelHandle
    from agentrl.agents.rolling import ADModelAgent

    env = envs.make("darkroom", size=3, horizon=5)
    cfg = small(token_layout=layout, obs_size=9, action_size=5, max_steps=4)
    graphdef, weights = nnx.split(make_model(cfg))
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 2))

    def run(weights, params, key):
        agent = ADModelAgent(ModelHandle(graphdef, weights), env, 4)
        return run_batched_agent(env, agent, params, key, 12)[0].action

    hlo = jax.jit(run).lower(weights, params, jax.random.key(1)).compile().as_text()
    cache = nnx.merge(graphdef, weights).init_cache(2, 4)
    assert count_copies(hlo, cache_shapes(cache)) == 0


@pytest.mark.long
def test_remat_gives_the_same_outputs_and_gradients():
    cfg = small(token_layout="sar", moe_layers=(1,), attention_block=4)
    model = make_model(cfg)
    graphdef, state = nnx.split(model)
    remat = nnx.merge(
        nnx.split(make_model(dataclasses.replace(cfg, remat=True)))[0], state
    )
    obs, act, rew = inputs(cfg, T)

    def loss(m):
        out = m(obs, act, rew)
        return jnp.mean(out.action**2) + out.aux["balance_loss"]

    grad = nnx.jit(nnx.value_and_grad(loss))
    (l0, g0), (l1, g1) = grad(model), grad(remat)
    np.testing.assert_allclose(l1, l0, rtol=1e-6)
    for a, b in zip(
        jax.tree.leaves(nnx.state(g0)), jax.tree.leaves(nnx.state(g1)), strict=True
    ):
        np.testing.assert_allclose(b, a, atol=1e-6, rtol=1e-5)


def test_rope_rotates_half_split_pairs_at_the_standard_frequencies():
    # Dh = 4, base 10,000: pairs (0, 2) and (1, 3) turn by pos * 10000**(-i/2)
    x = jnp.eye(4)[None, :, None, :]  # [B=1, T=4 unit vectors, H=1, Dh=4]
    pos = jnp.array([1, 1, 3, 3])
    got = np.asarray(attention.rope(x, pos, 10_000.0))[0, :, 0]

    def turn(angle, first):  # unit vector e_first (pair partner +2) turned
        c, s = np.cos(angle), np.sin(angle)
        return [[c, 0, s, 0], [0, c, 0, s], [-s, 0, c, 0], [0, -s, 0, c]][first]

    # unit vector i at position p turns by p * freq of its pair (1, then 0.01)
    want = [turn(1.0, 0), turn(0.01, 1), turn(3.0, 2), turn(0.03, 3)]
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_rope_scores_depend_on_the_positions_difference_only():
    q, k = jax.random.normal(jax.random.key(0), (2, 1, 1, 1, 8))
    score = lambda i, j: float(  # noqa: E731
        jnp.sum(
            attention.rope(q, jnp.array([i]), 100.0)
            * attention.rope(k, jnp.array([j]), 100.0)
        )
    )
    assert score(7, 3) == pytest.approx(score(4, 0), abs=1e-5)
    assert score(7, 3) != pytest.approx(score(7, 4), abs=1e-3)
