"""Loop-based causal prefill (``DecisionModel.prefill``).

- the cache of the first ``upto`` steps (keys, values, MoE router inputs,
  slot positions) equals ``upto`` calls of ``decode``, and the outputs equal
  the full forward pass, for ``upto`` in 0 .. T (float32 with Sink-KV and
  sequence-routed MoE; bfloat16 compute);
- decoding goes on from a prefilled cache as from a decoded one;
- the compiled prefill copies no whole cache inside its loops, and its size
  does not grow with the sequence (the full pass's unrolled blocks do);
- bad arguments name what is wrong.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hlo_tools import cache_shapes, count_copies

from agentrl.models import DecisionModel, ModelConfig
from agentrl.models.attention import value_slot_axis

B, T, PIECE = 3, 24, 8


def make(t: int = T, **kw) -> DecisionModel:
    base = dict(
        obs_size=5,
        action_size=3,
        d_model=16,
        d_ff=32,
        num_layers=2,
        num_heads=2,
        max_steps=t,
        dropout=0.0,
        token_experts=4,
        task_experts=4,
        attention_block=PIECE,
    )
    return DecisionModel(ModelConfig(**{**base, **kw}), rngs=nnx.Rngs(0))


def inputs(t: int = T):
    k1, k2, k3 = jax.random.split(jax.random.key(1), 3)
    obs = jax.random.randint(k1, (B, t), 0, 5)
    act = jax.random.randint(k2, (B, t), 0, 3)
    return obs, act, jax.random.normal(k3, (B, t))


def decoded(model, obs, act, rew):
    """Caches after 0 .. T calls of ``decode`` (one jitted step)."""
    graphdef, state = nnx.split(model)

    @jax.jit
    def step(cache, o, a, r):
        return nnx.merge(graphdef, state).decode(cache, o, a, r)[1]

    caches = [model.init_cache(B)]
    for t in range(T):
        prev = (
            (act[:, t - 1], rew[:, t - 1]) if t else (jnp.zeros(B, int), jnp.zeros(B))
        )
        caches.append(step(caches[-1], obs[:, t], *prev))
    return caches


def prefill_fn(model, piece=PIECE):
    graphdef, state = nnx.split(model)

    def run(state, obs, act, rew, upto):
        return nnx.merge(graphdef, state).prefill(obs, act, rew, upto, piece=piece)

    return jax.jit(run), state


CASES = {
    "sink+moe": dict(attention_sink=True, moe_layers=(1,), task_routing="sequence"),
    "bfloat16": dict(compute_dtype="bfloat16", attention_sink=True),
    "normformer+moe": dict(normformer=True, moe_layers=(1,), task_routing="sequence"),
}


@pytest.mark.long
@pytest.mark.parametrize("case", list(CASES))
def test_prefill_equals_decoding_and_the_full_pass(case):
    model = make(**CASES[case])
    obs, act, rew = inputs()
    full = nnx.jit(lambda m: m(obs, act, rew).action)(model)
    run, state = prefill_fn(model)
    caches = decoded(model, obs, act, rew)
    tol = dict(rtol=1e-5, atol=2e-6)
    for upto in (0, 5, 8, 17, T):
        out, cache = run(state, obs, act, rew, upto)
        ref = caches[upto]
        np.testing.assert_array_equal(cache.slot_pos, ref.slot_pos)
        assert int(cache.next_pos) == int(ref.next_pos) == upto
        pairs = [
            (a[..., :upto], b[..., :upto])
            for a, b in zip(cache.keys, ref.keys, strict=True)
        ]
        axis = value_slot_axis(model.config.head_dim)  # the values' slots
        pairs += [
            (
                np.asarray(a).take(np.arange(upto), axis),
                np.asarray(b).take(np.arange(upto), axis),
            )
            for a, b in zip(cache.values, ref.values, strict=True)
        ]
        pairs += [
            (a[:, :upto], b[:, :upto])
            for a, b in zip(cache.router_inputs, ref.router_inputs, strict=True)
            if a is not None
        ]
        assert len(pairs) == 4 + ("moe" in case)
        for mine, theirs in pairs:
            assert mine.dtype == theirs.dtype
            np.testing.assert_allclose(
                mine.astype(jnp.float32), theirs.astype(jnp.float32), **tol
            )
        np.testing.assert_allclose(out[:, :upto], full[:, :upto], **tol)
        assert not np.any(out[:, upto:])
        # decoding goes on from the prefilled cache as from the decoded one
        if upto < T:
            prev = (
                (act[:, upto - 1], rew[:, upto - 1])
                if upto
                else (
                    jnp.zeros(B, int),
                    jnp.zeros(B),
                )
            )
            step = model.decode(cache, obs[:, upto], *prev)[0].action
            np.testing.assert_allclose(step, full[:, upto], **tol)


def test_prefill_of_a_dense_model_equals_the_full_pass():
    """The fast check in ``make test`` (the cases above are ``long``): a
    prefill over one, two and three pieces reads every earlier block."""
    model = make()
    obs, act, rew = inputs()
    full = nnx.jit(lambda m: m(obs, act, rew).action)(model)
    run, state = prefill_fn(model)
    for upto in (0, 13, T):
        out, _ = run(state, obs, act, rew, upto)
        np.testing.assert_allclose(out[:, :upto], full[:, :upto], rtol=1e-5, atol=2e-6)
        assert not np.any(out[:, upto:])


def hlo_of_prefill(t: int) -> tuple[str, set]:
    model = make(t, attention_sink=True, moe_layers=(1,), task_routing="sequence")
    run, state = prefill_fn(model)
    hlo = run.lower(state, *inputs(t), jnp.int32(t)).compile().as_text()
    return hlo, cache_shapes(model.init_cache(B))


def instructions(hlo: str) -> int:
    return sum(" = " in line for line in hlo.splitlines())


@pytest.mark.long
def test_prefill_copies_no_cache_and_its_program_does_not_grow_with_length():
    hlo, shapes = hlo_of_prefill(T)
    assert count_copies(hlo, shapes) == 0
    hlo2, _ = hlo_of_prefill(2 * T)
    assert instructions(hlo2) <= 1.05 * instructions(hlo)

    # the counter sees growth: the full pass's blockwise attention unrolls
    # its query blocks at trace time
    def full(t):
        model = make(t)
        graphdef, state = nnx.split(model)

        def run(state, obs, act, rew):
            return nnx.merge(graphdef, state)(obs, act, rew).action

        return jax.jit(run).lower(state, *inputs(t)).compile().as_text()

    assert instructions(full(2 * T)) > 1.3 * instructions(full(T))


def test_prefill_bad_arguments_are_named():
    model = make()
    obs, act, rew = inputs()
    with pytest.raises(ValueError, match="piece=7 must divide the 24 steps"):
        model.prefill(obs, act, rew, 4, piece=7)
    with pytest.raises(ValueError, match="exceed the cache's max_steps=16"):
        model.prefill(obs, act, rew, 4, piece=8, max_steps=16)
    sar = make(token_layout="sar")
    with pytest.raises(ValueError, match="token_layout='step'"):
        sar.prefill(obs, act, rew, 4, piece=8)
