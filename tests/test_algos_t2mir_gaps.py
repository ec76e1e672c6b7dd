"""T2MIR's wiring and settings (pass 10 of the mutation passes): the EMA
router starts as a copy, the settings' defaults are the reference's
(docs/references.md, "T2MIR"), bad settings are refused."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from agentrl.algos import AD, DPT, T2MIR
from agentrl.algos.t2mir import init_ema_router


class _Router(nnx.Module):
    def __init__(self):
        self.w1 = nnx.Param(jnp.ones((2, 3)))
        self.w2 = nnx.Param(jnp.ones((3, 3)))


class _Model(nnx.Module):
    def __init__(self):
        self.task_router = _Router()


def test_the_ema_router_is_a_copy_not_a_view_of_the_online_router():
    model = _Model()
    ema = init_ema_router(model)
    model.task_router.w1[...] = model.task_router.w1[...] * 5.0  # in place
    for leaf in jax.tree.leaves(ema):
        np.testing.assert_array_equal(leaf, 1.0)


def test_defaults_are_the_references():
    # token-wise balance 0.1, task-wise contrast 0.01, EMA tau 0.005 per step
    algo = T2MIR()
    assert (algo.balance_weight, algo.contrastive_weight, algo.ema_tau) == (
        0.1,
        0.01,
        0.005,
    )
    assert algo.contrast_softmax is False and isinstance(algo.base, AD)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"ema_tau": 0.0}, r"algo.ema_tau must be in \(0, 1\]"),
        ({"ema_tau": 1.5}, r"algo.ema_tau must be in \(0, 1\]"),
        ({"balance_weight": -0.1}, "algo.balance_weight must be >= 0"),
        ({"contrastive_weight": -0.1}, "algo.contrastive_weight must be >= 0"),
        ({"base": T2MIR(base=DPT())}, "algo.base must be a"),
    ],
)
def test_bad_settings_are_refused(changes, match):
    with pytest.raises(ValueError, match=match):
        T2MIR(**changes)


def test_t2mir_terms_contrast_online_queries_with_ema_keys_by_hand():
    # a stand-in model: its task router (w2 sharp, so features differ by
    # row), W, and an output whose router input is given
    from test_models_contrastive_gaps import _by_hand, _softmax

    from agentrl.algos.t2mir import t2mir_terms

    rng = np.random.default_rng(4)
    model = _Model()
    w1 = rng.normal(size=(2, 3)).astype(np.float32)
    w2 = 5.0 * rng.normal(size=(3, 3)).astype(np.float32)
    model.task_router.w1[...] = jnp.asarray(w1)
    model.task_router.w2[...] = jnp.asarray(w2)
    w = rng.normal(size=(3, 3)).astype(np.float32)
    model.contrastive_w = nnx.Param(jnp.asarray(w))
    ema = {"w1": jnp.asarray(0.5 * w1), "w2": jnp.asarray(-w2)}
    x = rng.normal(size=(4, 6, 2)).astype(np.float32)
    out = types.SimpleNamespace(
        aux={"task_router_input": jnp.asarray(x), "balance_loss": jnp.float32(0.25)}
    )
    task = np.array([0, 0, 1, 1])
    for softmax in (False, True):
        # DPT's query token (the first) left out
        q = np.tanh(x[:, 1:] @ w1) @ w2
        k = np.tanh(x[:, 1:] @ (0.5 * w1)) @ -w2
        if softmax:
            q, k = _softmax(q), _softmax(k)
        want = _by_hand(q.mean(1), k.mean(1), w, task)
        balance, contrast = t2mir_terms(
            model, out, {"task_id": jnp.asarray(task)}, ema, 1, softmax
        )
        assert float(balance) == 0.25
        np.testing.assert_allclose(contrast, want, rtol=1e-4)
