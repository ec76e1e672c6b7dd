"""bfloat16 compute: which layers round their matmul operands and which do not."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_models_precision import OUT_TOL, _pair


def _rounding(a, b) -> float:
    return float(jnp.abs(a - b).max() / jnp.abs(b).max())


@pytest.mark.parametrize("dispatch", ["dense", "sorted", "blocked"])
def test_bfloat16_rounds_the_ffn_and_experts_not_the_head(dispatch):
    """Same weights under float32 and bfloat16 compute: the dense FFN and
    the MoE experts (every dispatch) multiply in bfloat16, so their
    outputs move by a rounding error; the action head stays float32,
    bit for bit."""
    kw = dict(moe_layers=(1,), moe_dispatch=dispatch, token_noise=False)
    _, f32, low = _pair(**kw)
    h = jax.random.normal(jax.random.key(4), (2, 5, 32))
    dense = [m.blocks[0].ffn(h) for m in (low, f32)]
    assert 0 < _rounding(*dense) < OUT_TOL
    moe = [m.blocks[1].ffn(h, h, True)[0] for m in (low, f32)]
    assert 0 < _rounding(*moe) < OUT_TOL
    np.testing.assert_array_equal(low.head(h)[0], f32.head(h)[0])


def test_a_bfloat16_models_cache_holds_bfloat16_keys_and_float32_router_inputs():
    """``init_cache``: keys and values in ``compute_dtype`` (as the full
    pass's attention sees them), the MoE router inputs float32."""
    _, _, low = _pair(moe_layers=(1,), task_routing="sequence")
    cache = low.init_cache(2)
    assert {a.dtype for a in cache.keys + cache.values} == {jnp.dtype("bfloat16")}
    assert cache.router_inputs[1].dtype == jnp.float32
