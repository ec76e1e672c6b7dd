"""Mixed precision (``compute_dtype="bfloat16"``) against float32.

Same weights under both dtypes: outputs within 3% of the output scale,
gradients within 3% in relative norm (bfloat16 keeps 8 significand bits,
~0.4% per rounding; the measured errors are ~1%). Parameters and gradients
stay float32, the compiled pass really has bfloat16 matmuls (float32 out),
so does its backward pass (every bfloat16 matmul's two transposes), and cached
decoding equals the bfloat16 full pass to float32 rounding (the cache holds
the keys and values in bfloat16, as the full pass's attention sees them).
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from model_factory import make_model
from test_models_transformer import forward, inputs, run_decode, small

from agentrl.cli import main
from agentrl.models import ModelConfig
from agentrl.models.precision import mixed_dot_general, weight_grad_split

T = 9  # "sar": 27 tokens, blocks of 4 tokens
OUT_TOL = 0.03  # max |bf16 - f32| over max |f32|
GRAD_TOL = 0.03  # ||g_bf16 - g_f32|| / ||g_f32||


def _pair(**kw):
    """The same random weights under float32 and bfloat16 compute."""
    cfg = small(attention_block=4, d_model=32, d_ff=64, **kw)
    f32 = make_model(cfg)
    state = nnx.state(f32)
    low = make_model(dataclasses.replace(cfg, compute_dtype="bfloat16"))
    nnx.update(low, state)
    return cfg, f32, low


def _loss(m, obs, act, rew):
    out = m(obs, act, rew)
    logp = jax.nn.log_softmax(out.action.astype(jnp.float32))
    nll = -jnp.take_along_axis(logp, act[..., None], -1).mean()
    return nll + out.aux.get("balance_loss", 0.0)


_grad = nnx.jit(nnx.value_and_grad(_loss))


def _flat(grads):
    return jnp.concatenate([g.ravel() for g in jax.tree.leaves(nnx.state(grads))])


# top_k = experts in the MoE case: no routing decision can flip between the
# dtypes (a flipped top-k choice is a different function, not a rounding)
@pytest.mark.long
@pytest.mark.parametrize(
    "layout, moe",
    [("sar", ()), pytest.param("step", (1,), marks=pytest.mark.long)],
)
def test_bfloat16_outputs_and_gradients_are_close_to_float32(layout, moe):
    kw = dict(token_top_k=4, task_top_k=4, moe_layers=moe, token_noise=False)
    cfg, f32, low = _pair(token_layout=layout, **kw)
    obs, act, rew = inputs(cfg, T)
    a32 = forward(f32, obs, act, rew).action
    a16 = forward(low, obs, act, rew).action
    assert a16.dtype == jnp.float32
    err = float(jnp.abs(a16 - a32).max() / jnp.abs(a32).max())
    assert 0 < err < OUT_TOL, err  # > 0: the option is not a no-op

    (l32, g32), (l16, g16) = _grad(f32, obs, act, rew), _grad(low, obs, act, rew)
    np.testing.assert_allclose(l16, l32, rtol=OUT_TOL)
    for leaf in jax.tree.leaves(nnx.state(g16)) + jax.tree.leaves(
        nnx.state(low, nnx.Param)
    ):
        assert leaf.dtype == jnp.float32  # float32 parameters and gradients
    f, b = _flat(g32), _flat(g16)
    assert float(jnp.linalg.norm(b - f) / jnp.linalg.norm(f)) < GRAD_TOL


def test_bfloat16_step_compiles_bfloat16_matmuls():
    cfg, _, low = _pair(token_layout="sar", moe_layers=(1,))
    obs, act, rew = inputs(cfg, T)
    graphdef, state = nnx.split(low)
    hlo = (
        jax.jit(lambda s: nnx.merge(graphdef, s)(obs, act, rew).action)
        .lower(state)
        .as_text()
    )
    dots = [line for line in hlo.splitlines() if "dot_general" in line]
    low_dots = [line for line in dots if "bf16>, tensor" in line]
    # attention's 4 matmuls per layer, the dense FFN's 2 (routers, embedding
    # and head are float32 by design); every matmul returns float32
    assert len(low_dots) >= 4 * cfg.num_layers + 2, low_dots
    assert all(line.rstrip().endswith("xf32>") for line in dots), dots


def _bf16_dots(hlo: str) -> int:
    return sum("dot_general" in x and "bf16>, tensor" in x for x in hlo.splitlines())


def test_the_backward_pass_multiplies_in_bfloat16_too():
    # JAX's own transpose multiplies the float32 cotangent by the bfloat16
    # operand: a float32 matmul (XLA:GPU ran them as TF32 GEMMs, most of an
    # update's time); each bfloat16 matmul's two transposes must be bfloat16
    cfg, _, low = _pair(token_layout="sar", moe_layers=(1,))
    obs, act, rew = inputs(cfg, T)
    graphdef, params, rest = nnx.split(low, nnx.Param, ...)

    def loss(p):
        return _loss(nnx.merge(graphdef, p, rest), obs, act, rew)

    forward_dots = _bf16_dots(jax.jit(loss).lower(params).as_text())
    backward = jax.jit(jax.grad(loss)).lower(params).as_text()
    assert forward_dots >= 4 * cfg.num_layers + 2
    assert _bf16_dots(backward) == 3 * forward_dots


@pytest.mark.long
@pytest.mark.parametrize(
    "layout, moe", [("sar", ()), pytest.param("step", (0, 1), marks=pytest.mark.long)]
)
def test_bfloat16_decoding_equals_the_bfloat16_full_pass(layout, moe):
    # top_k = experts: no routing decision can flip against float32 (above)
    kw = dict(token_top_k=4, task_top_k=4, moe_layers=moe)
    cfg, f32, low = _pair(token_layout=layout, **kw)
    obs, act, rew = inputs(cfg, T)
    full = forward(low, obs, act, rew, window=4).action
    dec, cache = run_decode(low, cfg, obs, act, rew, 4)
    assert cache.keys[0].dtype == jnp.bfloat16
    np.testing.assert_allclose(dec, full, atol=2e-5, rtol=2e-5)
    ref = forward(f32, obs, act, rew, window=4).action
    assert float(jnp.abs(dec - ref).max() / jnp.abs(ref).max()) < OUT_TOL


def test_bad_compute_dtype_names_the_field_and_the_choices(monkeypatch, capsys):
    with pytest.raises(ValueError, match=r"compute_dtype must be one of .*bfloat16"):
        ModelConfig(compute_dtype="float16")

    import agentrl.train.loop

    def refuse(*a, **k):
        raise AssertionError("a bad compute_dtype reached a compile")

    monkeypatch.setattr(agentrl.train.loop, "make_train_step", refuse)
    code = main(["train", "ad_darkroom", "--model.compute_dtype", "half"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert "compute_dtype" in err and "bfloat16" in err, err


def test_weight_grad_split_cuts_many_rows_into_a_small_output():
    linear = (((2,), (0,)), ((), ()))
    assert weight_grad_split((64, 501, 32), (32, 96), linear) == 64  # dpt_bandit
    assert weight_grad_split((64, 501, 32), (32, 5), linear) == 64  # its head
    assert weight_grad_split((2, 4096, 8), (8, 16), linear) == 32  # 256-row chunks
    assert weight_grad_split((3, 1001, 8), (8, 16), linear) == 1  # odd rows
    assert weight_grad_split((4, 1000, 8), (8, 16), linear) == 1  # too few rows
    assert weight_grad_split((512, 80, 512), (512, 1536), linear) == 1  # big out
    batched = (((2,), (1,)), ((0,), (0,)))
    assert weight_grad_split((64, 501, 32), (64, 32, 96), batched) == 1


@pytest.mark.parametrize("dtype, tol", [(jnp.float32, 1e-5), (jnp.bfloat16, 2e-2)])
def test_a_split_weight_gradient_equals_the_whole_one(dtype, tol):
    # 8,192 rows into 8x16: split into 32 chunks of 256 rows
    kx, kw, kg = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(kx, (2, 4096, 8)).astype(dtype)
    w = jax.random.normal(kw, (8, 16)).astype(dtype)
    g = jax.random.normal(kg, (2, 4096, 16))
    dims = (((2,), (0,)), ((), ()))

    def loss(dot, x, w):
        return jnp.sum(dot(x, w, dims, preferred_element_type=jnp.float32) * g)

    split = jax.jit(jax.grad(functools.partial(loss, mixed_dot_general), (0, 1)))
    whole = jax.grad(functools.partial(loss, jax.lax.dot_general), (0, 1))
    x32, w32 = x.astype(jnp.float32), w.astype(jnp.float32)
    for got, want in zip(split(x, w), whole(x32, w32), strict=True):
        assert got.dtype == dtype
        err = jnp.linalg.norm(got.astype(jnp.float32) - want) / jnp.linalg.norm(want)
        assert float(err) < tol, float(err)
    # the weight gradient is one batched matmul over the 32 chunks
    text = split.lower(x, w).as_text()
    assert "tensor<32x256x8x" in text and "tensor<32x8x16xf32>" in text, text
