"""Per-op-class thunk timing of compiled XLA:CPU programs (sweep_vmap's profile)."""

import jax
import jax.numpy as jnp
import pytest
import xla_profile as xp


def _loss(w, x):
    return jnp.mean(jnp.tanh(x @ w) ** 2)


def _program(vmapped: bool):
    grad = jax.grad(_loss)
    fn = jax.jit(jax.vmap(grad) if vmapped else grad)
    shape = (4,) if vmapped else ()
    w = jnp.full((*shape, 16, 32), 0.01)
    x = jnp.ones((*shape, 64, 16))
    return fn, (w, x), fn.lower(w, x).compile().as_text()


def test_instructions_classify_matmuls_and_passes():
    for vmapped in (False, True):
        _, _, text = _program(vmapped)
        kinds = xp.instructions(text)
        assert set(k for k, _ in kinds.values()) <= set(xp.KINDS)
        matmuls = [p for k, p in kinds.values() if k.startswith("matmul")]
        # x @ w in the forward pass, dW = x^T dy in the backward
        assert "forward" in matmuls and "backward" in matmuls, kinds
        # only top-level instructions (thunks), not the bodies of fusions
        assert not any(name.startswith("param") for name in kinds)


@pytest.mark.long
def test_thunk_seconds_counts_every_call(monkeypatch):
    fn, args, text = _program(vmapped=True)
    jax.block_until_ready(fn(*args))
    one = xp.thunk_seconds(lambda: fn(*args), [text])
    assert one and all(v > 0 for v in one.values())
    assert set(k for k, _ in one) <= set(xp.KINDS)
    assert any(k.startswith("matmul") and p == "backward" for k, p in one)

    # every call's events are counted: with each event's duration taken as
    # 1 ns, the total is the number of events, exactly proportional to the
    # calls (timing the calls themselves was flaky: per-trace medians of
    # microsecond events vary 2-3x on a loaded machine)
    def events(n):
        runs = lambda: [fn(*args) for _ in range(n)]  # noqa: E731
        return round(sum(xp.thunk_seconds(runs, [text]).values()) * 1e9)

    monkeypatch.setattr(xp.statistics, "median", lambda ds: 1)
    per_call = events(1)
    assert per_call > 0 and events(20) == 20 * per_call
