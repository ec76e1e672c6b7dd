"""The benchmarks' FLOP count of a training step is the step's useful work:
``3 x`` (``2 x`` the active matmul weights per token + causal attention over
the query-key pairs the windowed mask keeps), one function
(``train_throughput.train_flops``) for ``train_throughput``,
``preset_shapes``, ``peer_training`` and ``model_throughput``. Until session
54 ``train_throughput`` and ``model_throughput`` counted every query against
all ``T`` keys (the full ``[T, T]`` scores: 1.40x the useful forward at
``model_throughput``'s context 2,048) and ignored the sliding window."""

from __future__ import annotations

import argparse
import sys

import jax
import jax.numpy as jnp
import numpy as np
import peer_training
import preset_shapes
import pytest
import train_throughput
from flax import nnx

from agentrl.models import DecisionModel, ModelConfig
from agentrl.models.attention import window_mask


def _kept_pairs(tokens: int, window: int) -> int:
    """Brute force: the ``True`` entries of the attention mask."""
    pos = jnp.arange(tokens)
    return int(np.asarray(window_mask(pos, pos, window)).sum())


def _abstract(cfg: ModelConfig):
    return nnx.eval_shape(lambda: DecisionModel(cfg, rngs=nnx.Rngs(0)))


#: the tiny model's matmul weights, by hand (biases, LayerNorms and the
#: embedding tables are not matmuls): per layer qkv 16 x 48, out 16 x 16,
#: fc1 16 x 32, fc2 32 x 16; the action head 16 x 5 and the reward's
#: Linear(1, 16) embedding
TINY_WEIGHTS = 2 * (16 * 48 + 16 * 16 + 16 * 32 + 32 * 16) + 16 * 5 + 1 * 16


def _tiny(max_steps: int, **changes) -> ModelConfig:
    return ModelConfig(
        num_layers=2,
        num_heads=2,
        d_model=16,
        d_ff=32,
        obs_size=25,
        action_size=5,
        max_steps=max_steps,
        **changes,
    )


@pytest.mark.parametrize("tokens", [1, 5, 12])
@pytest.mark.parametrize("window", [1, 3, 5, 12, 40])
def test_kept_pairs_are_the_masks(tokens, window):
    assert train_throughput.attention_pairs(tokens, window) == _kept_pairs(
        tokens, window
    )
    if window >= tokens:
        assert train_throughput.attention_pairs(tokens) == tokens * (tokens + 1) // 2


@pytest.mark.parametrize(
    ("max_steps", "steps", "layout", "sink"),
    [
        (12, 12, "step", False),
        (4, 12, "step", False),
        (4, 12, "sar", False),
        (80, 80, "step", False),
        (4, 12, "step", True),
    ],
)
def test_the_step_count_is_3x_weights_and_kept_pairs(max_steps, steps, layout, sink):
    cfg = _tiny(max_steps, token_layout=layout, attention_sink=sink)
    model = _abstract(cfg)
    # "sar" adds a token-kind table, a sink a key and value per head: none
    # of them a matmul's weights
    weights = TINY_WEIGHTS
    assert train_throughput.active_matmul_params(model) == weights
    t = steps * cfg.tokens_per_step
    # a sink is one more key every query sees
    pairs = _kept_pairs(t, max_steps * cfg.tokens_per_step) + (t if sink else 0)
    batch = 3
    # 2 layers x 2 matmuls (QK^T, PV) x 2 FLOPs x d_model (all heads) a pair
    expected = 3 * batch * (2 * weights * t + 2 * 2 * 2 * 16 * pairs)
    assert train_throughput.train_flops(model, batch, steps) == expected
    assert train_throughput.forward_flops(model, batch, steps) * 3 == expected


@pytest.mark.parametrize(("ctx", "full_over_causal"), [(512, 1.14), (2048, 1.40)])
def test_the_full_square_count_overstates_model_throughputs_forward(
    ctx, full_over_causal
):
    """Counting all ``T`` keys per token (the old count) overstates the
    useful forward 1.14x / 1.40x at contexts 512 / 2,048 (dense model; 1.10x
    / 1.37x over what the blockwise attention computes, diagonal blocks'
    masked halves included)."""
    import model_throughput

    cfg = model_throughput.config(ctx, moe=False)
    model = _abstract(cfg)
    causal = train_throughput.forward_flops(model, 1, ctx)
    full = causal + train_throughput.attention_flops(
        cfg, ctx * ctx - ctx * (ctx + 1) // 2
    )
    assert full / causal == pytest.approx(full_over_causal, abs=0.01)
    # model_throughput's per-token helper (online_throughput's count), summed
    # at each token's own key count, has the same causal attention
    per_token = model_throughput.model_flops_per_token
    attention = sum(per_token(cfg, p + 1) for p in range(ctx)) - ctx * per_token(cfg, 0)
    assert attention == train_throughput.attention_flops(cfg, ctx * (ctx + 1) // 2)


def _current_train_throughput():
    """The ``train_throughput`` module the benchmarks import now (lazily, from
    ``sys.modules``): an earlier ``agentrl bench train_throughput`` in the same
    process (the bad-input tests) loads the file afresh under that name."""
    return sys.modules.get("train_throughput", train_throughput)


def _sentinel(monkeypatch) -> float:
    """``train_throughput.train_flops`` replaced by a recognisable count."""
    value = 123456789.0
    for module in {train_throughput, _current_train_throughput()}:
        monkeypatch.setattr(module, "train_flops", lambda m, b, s: value)
    return value


def test_peer_training_uses_the_one_count(monkeypatch):
    value = _sentinel(monkeypatch)
    model = _abstract(peer_training.agentrl_config("dpt_bandit"))
    t = {"torch_s": 2.0, "jax_s": 1.0, "ref_s": None, "compile_s": 0.0}
    t |= {"faults": 0, "real": {}}
    args = argparse.Namespace(repeats=1, peak=1e9)
    row = peer_training._kind_row("dpt_bandit", model, t, args)
    assert row["gflop"] == pytest.approx(value / 1e9)


def test_preset_shapes_uses_the_one_count_and_no_xla_count_off_the_cpu(
    monkeypatch,
):
    """On a GPU XLA's cost analysis leaves out cuBLAS's matmuls (~70x low in
    the first GPU record): the row says so instead of recording it."""
    value = _sentinel(monkeypatch)
    config = dict(preset_shapes.preset_configs(quick=True))["dpt_bandit/gpu"]
    row = preset_shapes.measure(config, 1, 1e12, flop_cap=1.0)  # not run: > cap
    assert row["analytic_flops_per_step"] == value
    assert row["status"].startswith("not run")

    compiled = jax.jit(lambda x: x @ x).lower(jnp.ones((8, 8))).compile()
    cpu = preset_shapes._xla_columns(compiled, "cpu")
    assert cpu["xla_flops_per_step"] == pytest.approx(2 * 8**3, rel=0.5)
    assert "xla_flops_note" not in cpu
    gpu = preset_shapes._xla_columns(compiled, "gpu")
    assert gpu["xla_flops_per_step"] is None
    assert "cuBLAS" in gpu["xla_flops_note"]


def test_model_throughput_has_no_count_of_its_own():
    import model_throughput

    # defined in train_throughput.py (whichever load of it model_throughput
    # imported: see _current_train_throughput)
    code = model_throughput.train_flops.__code__
    assert code.co_filename == train_throughput.train_flops.__code__.co_filename
    assert not hasattr(peer_training, "step_flops")
