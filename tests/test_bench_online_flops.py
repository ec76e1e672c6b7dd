"""``online_throughput``'s FLOP count of a transformer PPO trial charges the
work the trainer does: per partial update the critic's prefix and chunk,
the actor's re-encoding up to the chunk's end (none after the last), not a
whole trial each (which overcounted 1.25x at the committed shape)."""

from __future__ import annotations

import types

import pytest
from model_throughput import model_flops_per_token
from online_long_context import model_config
from online_throughput import transformer_flops_per_trial


def _tokens_at(n, contexts):
    """FLOPs of ``n`` envs' tokens, one per context length in ``contexts``."""
    return n * sum(model_flops_per_token(CFG, c) for c in contexts)


CFG = model_config(layers=1, width=16)


@pytest.mark.parametrize("k", [4, 12])
def test_the_count_follows_the_trainers_passes(k):
    n, length, epochs = 2, 12, 3
    shape = types.SimpleNamespace(
        num_envs=n, trial_steps=length, update_every=k, num_epochs=epochs
    )
    expected = _tokens_at(n, range(1, length + 1))  # acting
    for start in range(0, length, k):
        end = start + k
        if k < length:
            expected += _tokens_at(
                n, range(1, end + 2)
            )  # critic: prefix, chunk, bootstrap
            if end < length:
                expected += _tokens_at(n, range(1, end + 1))  # actor re-encoded
        else:
            expected += _tokens_at(n, range(1, length + 1))  # one forward pass
        expected += epochs * 6 * n * k * model_flops_per_token(CFG, start + k // 2)
    assert transformer_flops_per_trial(CFG, shape) == pytest.approx(expected)
