"""Cached decoding's attention equals the reference on any cache state.

:meth:`CausalSelfAttention.decode` joins the cache slots, the chunk and the
sink in one softmax reduced part by part (no concatenation) over values
cached ``[B, H, Dh, S]`` (narrow heads) or ``[B, H, S, Dh]``. Here it is checked against
:func:`masked_attention` over the cache and the chunk laid side by side
(the definition), on caches that are empty, partly filled (the slots past
the last token hold stale keys that must get no weight), filled with the
DPT query in slot 0, or wrapped around the ring; chunks of 1 and 3 tokens,
with and without Sink-KV, float32 and bfloat16 caches, both value
layouts. The in-place write of the chunk is checked too.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from agentrl.models.attention import (
    VALUES_TRANSPOSED_BELOW,
    CausalSelfAttention,
    cache_slots,
    masked_attention,
    value_slot_axis,
)

B, H, DH, S = 2, 2, 4, 12
D = H * DH
#: head widths on either side of the values' layout switch
WIDE = VALUES_TRANSPOSED_BELOW


def _attn(sink: bool, dh: int = DH):
    attn = CausalSelfAttention(H * dh, H, 10_000.0, rngs=nnx.Rngs(0), sink=sink)
    if sink:  # a sink that matters: larger than the init's 0.02 scale
        attn.sink_key[...] = attn.sink_key[...] * 50.0
        attn.sink_value[...] = attn.sink_value[...] * 50.0
    return attn


def _state(kind: str, c: int, offset: int):
    """``(slot_pos [S], pos [C])`` of a cache before a chunk of ``c`` tokens."""
    slots = np.arange(S)
    if kind == "empty":
        filled, first = 0, 0
    elif kind == "partly":  # 7 tokens (the last slot filled is not a block end)
        filled, first = 7, 7
    elif kind == "query":  # DPT: the query at slot 0, then 4 transitions
        filled, first = 5, 5
    else:  # wrapped: 17 tokens written into 12 slots
        filled, first = S, 17
    start = first - offset  # positions start at -offset ("sar": 3t - 2)
    if kind == "wrapped":
        # slot (p + offset) mod S holds the latest position p < start
        slot_pos = np.empty(S, np.int64)
        for p in range(start - S, start):
            slot_pos[(p + offset) % S] = p
    else:
        slot_pos = np.where(slots < filled, slots - offset, -1)
    pos = start + np.arange(c)
    return jnp.asarray(slot_pos, jnp.int32), jnp.asarray(pos, jnp.int32)


def _to_tokens(values, dh):
    """Cached values (either layout) as ``[B, S, H, Dh]``."""
    if value_slot_axis(dh) == 3:
        return values.transpose(0, 3, 1, 2)
    return values.swapaxes(1, 2)


def _reference(attn, x, pos, keys, values, slot_pos, window, dtype):
    """The definition: one masked softmax over the cache and the chunk."""
    q, k, v = attn._project(x, pos)
    k, v, q = k.astype(dtype), v.astype(dtype), q.astype(dtype)
    k_all = jnp.concatenate([keys.transpose(0, 3, 1, 2), k], axis=1)
    v_all = jnp.concatenate([_to_tokens(values, attn.head_dim), v], axis=1)
    k_pos = jnp.concatenate([slot_pos, pos])
    y = masked_attention(q, k_all, v_all, pos, k_pos, window, attn._sink())
    return attn._merge(y), k, v


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
@pytest.mark.parametrize("sink", [False, True])
@pytest.mark.parametrize("c", [1, 3])
@pytest.mark.parametrize("kind", ["empty", "partly", "query", "wrapped"])
@pytest.mark.parametrize("dh", [DH, WIDE])
def test_decode_equals_the_masked_reference(dh, kind, c, sink, dtype):
    attn = _attn(sink, dh)
    offset = c - 1  # as DecisionModel._decode_chunk
    slot_pos, pos = _state(kind, c, offset)
    rng = np.random.default_rng(0)
    # stale keys and values in the empty slots too: they must get no weight
    keys = jnp.asarray(rng.normal(size=(B, H, dh, S)) * 3, dtype)
    v_shape = (B, H, dh, S) if value_slot_axis(dh) == 3 else (B, H, S, dh)
    values = jnp.asarray(rng.normal(size=v_shape), dtype)
    x = jnp.asarray(rng.normal(size=(B, c, H * dh)), jnp.float32)
    window = S
    y, k_new, v_new = attn.decode(x, pos, keys, values, slot_pos, window, offset)
    ref, k, v = _reference(attn, x, pos, keys, values, slot_pos, window, dtype)
    visible = np.asarray(pos) >= 0  # placeholder rows ("sar" start) see nothing
    tol = 1e-5 if dtype == jnp.float32 else 2e-2
    np.testing.assert_allclose(
        np.asarray(y)[:, visible], np.asarray(ref)[:, visible], rtol=tol, atol=tol
    )
    # the chunk written in place at its slots, the rest untouched
    slot = int(cache_slots(pos, S, offset))
    written = np.arange(slot, slot + c)
    np.testing.assert_array_equal(
        np.asarray(k_new[..., written]), np.asarray(k.transpose(0, 2, 3, 1))
    )
    v_tok = _to_tokens(v_new, dh)  # [B, S, H, Dh]
    np.testing.assert_array_equal(np.asarray(v_tok[:, written]), np.asarray(v))
    rest = np.setdiff1d(np.arange(S), written)
    np.testing.assert_array_equal(np.asarray(k_new[..., rest]), keys[..., rest])
    np.testing.assert_array_equal(
        np.asarray(v_tok[:, rest]), np.asarray(_to_tokens(values, dh)[:, rest])
    )


def test_stale_slots_get_no_weight():
    """Changing what the empty slots hold does not change the output."""
    attn = _attn(False)
    slot_pos, pos = _state("partly", 1, 0)
    rng = np.random.default_rng(1)
    keys = jnp.asarray(rng.normal(size=(B, H, DH, S)), jnp.float32)
    values = jnp.asarray(rng.normal(size=(B, H, DH, S)), jnp.float32)
    x = jnp.asarray(rng.normal(size=(B, 1, D)), jnp.float32)
    empty = np.asarray(slot_pos) < 0
    y, *_ = attn.decode(x, pos, keys, values, slot_pos, S)
    junk_k = keys.at[..., empty].set(100.0)
    junk_v = values.at[..., empty].set(-100.0)
    y2, *_ = attn.decode(x, pos, junk_k, junk_v, slot_pos, S)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(y2))
    # while a filled slot does change it
    y3, *_ = attn.decode(x, pos, keys, values.at[..., 0].add(5.0), slot_pos, S)
    assert np.abs(np.asarray(y3) - np.asarray(y)).max() > 1e-3


@pytest.mark.parametrize("dh", [DH, WIDE])
def test_init_cache_lays_the_values_out_by_head_width(dh):
    from agentrl.models import DecisionModel, ModelConfig

    cfg = ModelConfig(
        obs_size=5,
        action_size=3,
        num_layers=1,
        num_heads=H,
        d_model=H * dh,
        max_steps=4,
    )
    model = DecisionModel(cfg, rngs=nnx.Rngs(0))
    cache = model.init_cache(B)
    assert cache.keys[0].shape == (B, H, dh, 4)
    narrow = dh < VALUES_TRANSPOSED_BELOW
    assert cache.values[0].shape == ((B, H, dh, 4) if narrow else (B, H, 4, dh))
    decode = nnx.jit(lambda m, c, o: m.decode(c, o, o, jnp.zeros(B)))
    out, cache = decode(model, cache, jnp.zeros(B, jnp.int32))
    assert out.action.shape == (B, 3)
    assert bool(jnp.all(jnp.isfinite(out.action)))
    jax.block_until_ready(cache)


# -- the wide-head layout ([B, H, S, Dh] values) through the whole model ------
# (the other model tests use 8-wide heads, i.e. the transposed layout)


@pytest.mark.parametrize("layout", ["step", "sar"])
def test_wide_heads_decode_equals_the_full_pass(layout):
    from model_factory import make_model
    from test_models_transformer import forward, inputs, run_decode, small

    cfg = small(token_layout=layout, d_model=2 * WIDE, attention_sink=True)
    assert value_slot_axis(cfg.head_dim) == 2
    model = make_model(cfg)
    obs, act, rew = inputs(cfg)
    steps = 4  # a window shorter than the sequence: the ring wraps
    full = forward(model, obs, act, rew, window=steps).action
    dec, _ = run_decode(model, cfg, obs, act, rew, steps)
    np.testing.assert_allclose(dec, full, atol=1e-5, rtol=1e-5)


def test_wide_heads_dpt_cached_transitions_equal_predict_query():
    from model_factory import make_model
    from test_models_transformer import B as TB
    from test_models_transformer import inputs, small

    cfg = small(token_layout="transition", d_model=2 * WIDE, max_steps=8)
    model = make_model(cfg)
    n = 6
    obs, act, rew = inputs(cfg, t=n)
    nxt = (obs + 1) % cfg.obs_size
    query = obs[:, 0]
    full = nnx.jit(lambda m, *a: m.predict_query(*a).action)(
        model, query, obs, act, rew, nxt
    )
    o, cache = model.decode_query(model.init_cache(TB), query)
    outs = [o.action]
    step = nnx.jit(lambda m, c, *x: m.decode_transition(c, *x))
    for i in range(n):  # the cache holds i + 1 of its 8 slots
        o, cache = step(model, cache, obs[:, i], act[:, i], rew[:, i], nxt[:, i])
        outs.append(o.action)
    np.testing.assert_allclose(jnp.stack(outs, 1), full, atol=1e-5, rtol=1e-5)


@pytest.mark.long
def test_wide_heads_prefill_equals_decoding():
    from test_models_prefill import decoded, inputs, make, prefill_fn

    model = make(d_model=2 * WIDE, attention_sink=True)
    obs, act, rew = inputs()
    run, state = prefill_fn(model)
    caches = decoded(model, obs, act, rew)
    for upto in (5, 16):
        _, cache = run(state, obs, act, rew, upto)
        ref = caches[upto]
        for a, b in zip(cache.values, ref.values, strict=True):
            assert a.shape[2] == b.shape[2] == cache.capacity  # slots on axis 2
            np.testing.assert_allclose(
                a[:, :, :upto], b[:, :, :upto], rtol=1e-5, atol=2e-6
            )
