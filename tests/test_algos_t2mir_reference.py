"""T2MIR's MoE and contrastive loss as NJU-RL/T2MIR's code has them
(docs/fidelity.md, item 15): the gate's shape, the unbiased CV^2, the
half-batch InfoNCE, softmax features per experiment, W's initial value, and
the load estimator's (deliberately Shazeer's) threshold test."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from model_factory import make_model

from agentrl.algos.t2mir import init_ema_router, t2mir_terms
from agentrl.models import DecisionModel, ModelConfig, contrastive_loss, cv_squared
from agentrl.models.moe import _prob_in_top_k, router_logits
from agentrl.train.experiments import load_experiment, load_module

CFG = dict(
    obs_size=5, action_size=3, num_layers=2, num_heads=2, d_model=16, d_ff=32,
    max_steps=8, moe_layers=(1,), token_experts=6, task_experts=4,
)  # fmt: skip


def _reference_contrast(q, k, w):
    """T2MIR-AD ``algorithms/transformers_moe.py`` ``contrastive_loss``
    (lines 16-33) in numpy: ``q, k [B, E]`` laid out as halves, row ``i``
    and row ``i + B/2`` a pair."""
    n = q.shape[0] // 2

    def cross_entropy(logits):  # F.cross_entropy(logits, arange(n))
        logits = logits - logits.max(1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
        return -np.mean(np.diag(logp))

    l1 = q[:n] @ (w @ k[n:].T)
    l2 = q[n:] @ (w @ k[:n].T)
    return 0.5 * cross_entropy(l1) + 0.5 * cross_entropy(l2)


def _halves(x):
    """Our pairs (rows ``2i, 2i + 1``) in the reference's layout (halves)."""
    x = np.asarray(x)
    return np.concatenate([x[0::2], x[1::2]])


def test_gates_are_linear_tanh_linear_of_width_e_without_biases():
    # moe.py TopKBalancedNoisyGate.get_gate_network("mlp"): Linear(d, E,
    # bias=False) -> Tanh -> Linear(E, E, bias=False), both gates
    model = make_model(ModelConfig(**CFG))
    ffn = model.blocks[1].ffn
    for moe, e in ((ffn.token_moe, 6), (ffn.task_moe, 4)):
        params = nnx.state(moe.router, nnx.Param)
        shapes = {k: v[...].shape for k, v in params.items() if k != "w_noise"}
        assert shapes == {"w1": (16, e), "w2": (e, e)}


def test_cv_squared_uses_the_unbiased_variance():
    # moe.py cv_squared: x.float().var() / (x.float().mean() ** 2 + eps)
    assert float(cv_squared(jnp.array([1.0, 3.0]))) == pytest.approx(0.5)
    x = np.random.default_rng(0).random(6).astype(np.float32)
    expected = x.var(ddof=1) / x.mean() ** 2
    assert float(cv_squared(jnp.asarray(x))) == pytest.approx(expected, rel=1e-5)


def test_contrast_scores_each_half_against_the_other_halfs_keys():
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, 8, 4)).astype(np.float32)
    w = rng.normal(size=(4, 4)).astype(np.float32)
    task_id = jnp.repeat(jnp.arange(4), 2)  # pairs of rows, distinct tasks
    ours = contrastive_loss(jnp.asarray(q), jnp.asarray(k), jnp.asarray(w), task_id)
    expected = _reference_contrast(_halves(q), _halves(k), w)
    assert float(ours) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("softmax", [True, False])
def test_contrast_reads_softmax_or_logits_as_the_experiment_says(softmax):
    # moe.py forward: add_softmax -> F.softmax(logits_gate) per token, then
    # contrastive_loss averages over the tokens
    model = make_model(ModelConfig(**CFG), seed=1)
    obs = jnp.asarray(np.random.default_rng(1).integers(0, 5, (4, 6)))
    out = nnx.jit(lambda m: m(obs, obs % 3, jnp.ones((4, 6))))(model)
    ema = jax.tree.map(lambda x: x * 0.5, init_ema_router(model))
    batch = {"task_id": jnp.array([0, 0, 1, 1])}
    got = t2mir_terms(model, out, batch, ema, 0, softmax)[1]
    x = out.aux["task_router_input"]
    online = nnx.state(model.task_router, nnx.Param)
    feats = [router_logits(p, x) for p in (online, ema)]
    if softmax:
        feats = [jax.nn.softmax(f, -1) for f in feats]
    q, k = (_halves(f.mean(1)) for f in feats)
    expected = _reference_contrast(q, k, np.asarray(model.contrastive_w[...]))
    assert float(got) == pytest.approx(expected, rel=1e-4)


def test_experiments_set_add_softmax_as_their_reference_configs():
    # args_darkroom_v0.yaml / args_cheetah_vel_v0.yaml (AD): add_softmax True;
    # args_point_robot_v0.yaml (AD), T2MIR-DPT args_darkroom_v0.yaml: False
    expected = {
        "t2mir_ad_darkroom": True,
        "t2mir_ad_halfcheetah_vel": True,
        "t2mir_ad_point_robot": False,
        "t2mir_dpt_darkroom": False,
    }
    for name, softmax in expected.items():
        for preset in load_module(name).PRESETS:
            algo = load_experiment(name, preset).algo
            assert algo.contrast_softmax is softmax, (name, preset)


def test_bilinear_w_starts_standard_normal():
    # transformers_moe.py: self.W = nn.Parameter(torch.randn(E, E))
    cfg = ModelConfig(
        **{**CFG, "num_layers": 1, "moe_layers": (0,), "task_experts": 12}
    )
    w = np.asarray(DecisionModel(cfg, rngs=nnx.Rngs(0)).contrastive_w[...])
    assert w.shape == (12, 12)
    assert abs(w.mean()) < 0.3 and 0.8 < w.std() < 1.2
    assert np.abs(w[~np.eye(12, dtype=bool)]).mean() > 0.5  # not eye(E)


def test_load_estimator_asks_whether_the_noisy_logit_is_in_the_top_k():
    # Shazeer et al.'s estimator, kept deliberately: T2MIR's moe.py line 166
    # compares the noise term alone (logits_noise) with the threshold, which
    # would call expert 0 "out" here and give it cdf((2 - 2.1) / std)
    clean = jnp.array([[2.0, 1.0, 0.0]])
    noisy = clean + 0.1
    std = jnp.full_like(clean, 0.5)
    p = _prob_in_top_k(clean, noisy, std, 1)
    cdf = jax.scipy.stats.norm.cdf
    np.testing.assert_allclose(p[0, 0], cdf((2.0 - 1.1) / 0.5), rtol=1e-6)
    np.testing.assert_allclose(p[0, 1:], cdf((clean[0, 1:] - 2.1) / 0.5), rtol=1e-6)
