"""T2MIR mixture of experts: routing, balance loss, dispatch, contrastive loss."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from model_factory import make_model

from agentrl.models import (
    ModelConfig,
    Router,
    balance_loss,
    contrastive_loss,
    ema_update,
    router_logits,
    task_router_logits,
    top_k_gates,
)
from agentrl.models.moe import MoE


def test_top_k_gates_sum_to_one_and_pick_the_largest():
    logits = jax.random.normal(jax.random.key(0), (64, 6))
    gates, idx, w = top_k_gates(logits, 2)
    np.testing.assert_allclose(gates.sum(-1), 1.0, atol=1e-6)
    assert ((gates > 0).sum(-1) == 2).all()
    best2 = np.argsort(-np.asarray(logits), axis=-1)[:, :2]
    np.testing.assert_array_equal(np.sort(idx, -1), np.sort(best2, -1))
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-6)
    # the larger logit gets the larger weight
    assert (w[:, 0] >= w[:, 1]).all()


@pytest.mark.long
def test_noisy_router_probabilities_and_smooth_load():
    router = Router(8, 6, noisy=True, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(1), (128, 8))
    gates, idx, w, load, _ = router.route(x, 2, deterministic=False)
    np.testing.assert_allclose(gates.sum(-1), 1.0, atol=1e-6)
    assert load.shape == (6,) and (load > 0).all()
    # expected load sums to about k tokens per token
    assert abs(float(load.sum()) / 128 - 2.0) < 0.5
    g1 = router.route(x, 2, deterministic=True)[0]
    g2 = router.route(x, 2, deterministic=True)[0]
    np.testing.assert_array_equal(g1, g2)  # no noise when deterministic


def test_balance_loss_is_minimal_for_uniform_routing():
    n, e = 60, 6
    uniform = jnp.full((n, e), 1.0 / e)
    assert float(balance_loss(uniform, jnp.full((e,), n / e))) < 1e-8
    skewed_logits = jax.random.normal(jax.random.key(0), (n, e)) + jnp.arange(e)
    gates, *_ = top_k_gates(skewed_logits, 2)
    load = (gates > 0).sum(0).astype(jnp.float32)
    assert float(balance_loss(gates, load)) > 0.1
    # balanced top-2 (each expert equally often) is also at the minimum
    idx = jnp.stack([jnp.arange(n) % e, (jnp.arange(n) + 1) % e], -1)
    bal = jnp.zeros((n, e)).at[jnp.arange(n)[:, None], idx].set(0.5)
    assert float(balance_loss(bal, (bal > 0).sum(0).astype(jnp.float32))) < 1e-8


@pytest.mark.long
def test_sorted_dispatch_equals_dense_dispatch():
    moe = MoE(8, 4, 16, 6, 2, False, "sorted", rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(1), (50, 8))
    y_sorted, gates, *_ = moe(x, x, True)
    y_dense = moe.experts.dense(x, gates)
    np.testing.assert_allclose(y_sorted, y_dense, atol=1e-5)

    def loss(m, dispatch):
        m.dispatch = dispatch
        return (m(x, x, True)[0] ** 2).sum()

    g_s = nnx.grad(lambda m: loss(m, "sorted"))(moe)
    g_d = nnx.grad(lambda m: loss(m, "dense"))(moe)
    for a, b in zip(jax.tree.leaves(g_s), jax.tree.leaves(g_d), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-4)


@pytest.mark.parametrize(
    "n, experts, skew",
    [
        (50, 6, 0.0),  # 16-row blocks, several per expert
        pytest.param(700, 12, 0.0, marks=pytest.mark.long),  # 128-row blocks
        # skewed router: uneven groups, empty experts
        pytest.param(300, 6, 4.0, marks=pytest.mark.long),
    ],
)
def test_blocked_dispatch_equals_sorted_dispatch(n, experts, skew):
    moe = MoE(8, 4, 16, experts, 2, False, "blocked", rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(1), (n, 8))
    if skew:  # hidden unit 0 saturates at 1 on x[:, 0] = 1 and lifts two
        # experts' logits by `skew`: most tokens pick them
        r = moe.router
        x = x.at[:, 0].set(1.0)
        r.w1[...] = r.w1[...].at[:, 0].set(jnp.zeros(8).at[0].set(10.0))
        r.w2[...] = r.w2[...].at[0].set(jnp.zeros(experts).at[:2].set(skew))

    def loss(m, dispatch):
        m.dispatch = dispatch
        y = m(x, x, True)[0]
        return (y**2).sum(), y

    (_, y_b), g_b = nnx.value_and_grad(lambda m: loss(m, "blocked"), has_aux=True)(moe)
    (_, y_s), g_s = nnx.value_and_grad(lambda m: loss(m, "sorted"), has_aux=True)(moe)
    np.testing.assert_allclose(y_b, y_s, atol=1e-5)
    for a, b in zip(jax.tree.leaves(g_b), jax.tree.leaves(g_s), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-4, rtol=1e-4)


def test_ema_update_moves_target_by_tau():
    target = {"w": jnp.zeros(3)}
    online = {"w": jnp.ones(3)}
    new = ema_update(target, online, tau=0.25)
    np.testing.assert_allclose(new["w"], 0.25)
    router = Router(4, 3, noisy=False, rngs=nnx.Rngs(0))
    other = Router(4, 3, noisy=False, rngs=nnx.Rngs(1))
    st = ema_update(nnx.state(other, nnx.Param), nnx.state(router, nnx.Param), 1.0)
    x = jnp.ones((2, 7, 4))
    np.testing.assert_allclose(task_router_logits(st, x), router(x).mean(1), atol=1e-6)


def test_aux_router_logits_match_task_router_logits_helper():
    cfg = ModelConfig(
        obs_size=5, action_size=3, num_layers=2, num_heads=2, d_model=16, d_ff=32,
        max_steps=8, moe_layers=(1,), task_routing="sequence", task_experts=4,
    )  # fmt: skip
    model = make_model(cfg)
    obs = jnp.zeros((3, 6), jnp.int32)
    out = nnx.jit(lambda m: m(obs, obs, jnp.zeros((3, 6))))(model)
    params = nnx.state(model.task_router, nnx.Param)
    key = task_router_logits(params, out.aux["task_router_input"])
    np.testing.assert_allclose(key, out.aux["task_router_logits"], atol=1e-6)
    assert model.contrastive_w[...].shape == (4, 4)


@pytest.mark.long
def test_contrastive_loss_falls_on_a_toy_two_task_problem():
    # segments of task 0 and task 1 have different mean features; the router
    # must learn logits that identify the task of a segment
    e, d, t = 4, 6, 5
    keys = jax.random.split(jax.random.key(0), 3)
    centers = jax.random.normal(keys[0], (2, d))
    task_id = jnp.array([0, 0, 1, 1, 0, 0, 1, 1])
    x = centers[task_id][:, None, :] + 0.5 * jax.random.normal(keys[1], (8, t, d))
    router = Router(d, e, noisy=False, rngs=nnx.Rngs(2))
    router.w2[...] = 0.01 * router.w2[...]  # start near chance
    params = {"router": nnx.state(router, nnx.Param), "w": jnp.eye(e)}
    target = params["router"]

    def loss_fn(p, target):
        q = router_logits(p["router"], x).mean(1)
        k = task_router_logits(target, x)
        return contrastive_loss(q, k, p["w"], task_id)

    opt = optax.adam(3e-2)
    state = opt.init(params)
    first = float(loss_fn(params, target))

    @jax.jit
    def step(params, state, target):
        g = jax.grad(loss_fn)(params, target)
        upd, state = opt.update(g, state)
        params = optax.apply_updates(params, upd)
        return params, state, ema_update(target, params["router"], tau=0.1)

    for _ in range(60):
        params, state, target = step(params, state, target)
    last = float(loss_fn(params, target))
    # the other half's 4 keys per row, 2 of them positives: chance log 4,
    # optimum log 2
    assert first > 0.8 * np.log(4)
    assert last < np.log(2) + 0.1
    assert first - last > 0.5


def test_contrastive_loss_prefers_matching_tasks():
    q = jnp.array([[5.0, 0.0], [5.0, 0.0], [0.0, 5.0], [0.0, 5.0]])
    ids = jnp.array([0, 0, 1, 1])  # pairs (0, 1) and (2, 3)
    good = contrastive_loss(q, q, jnp.eye(2), ids)
    swapped = q[jnp.array([0, 2, 1, 3])]  # each pair's rows now disagree
    bad = contrastive_loss(swapped, swapped, jnp.eye(2), ids)
    assert float(good) < 0.01 < float(bad)


# Mutants the tests above let through (session 56's mutation pass).


def test_balance_loss_by_hand():
    # top-1 gates of 3 tokens over 2 experts: importance (summed gates per
    # expert) [2, 1]; load given as [3, 1]. CV^2 with the unbiased variance:
    # importance: mean 1.5, var (0.25 + 0.25) / 1 = 0.5 -> 0.5 / 2.25 = 2/9;
    # load: mean 2, var (1 + 1) / 1 = 2 -> 2 / 4 = 1/2. Sum 13/18.
    gates = jnp.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    got = float(balance_loss(gates, jnp.array([3.0, 1.0])))
    assert got == pytest.approx(2 / 9 + 1 / 2, rel=1e-5)


def test_deterministic_load_counts_the_tokens_each_expert_takes():
    # without noise the load is the count of tokens routed to each expert
    # (integers summing to N k = 10 x 2 = 20), not the summed gates (which
    # would sum to N = 10)
    router = Router(8, 6, noisy=False, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(1), (10, 8))
    gates, idx, _, load, _ = router.route(x, 2, deterministic=True)
    np.testing.assert_array_equal(
        load, np.bincount(np.asarray(idx).ravel(), minlength=6)
    )
    assert float(load.sum()) == 20.0


@pytest.mark.long
def test_token_router_is_noisy_in_training_only():
    # token_noise (default on): the training pass (deterministic=False, no
    # dropout) routes on noisy logits, so some token's top-k gates differ
    # from the deterministic pass's; two deterministic passes agree
    cfg = ModelConfig(
        obs_size=5, action_size=3, num_layers=2, num_heads=2, d_model=16, d_ff=32,
        max_steps=8, moe_layers=(1,), token_experts=6, dropout=0.0,
    )  # fmt: skip
    assert cfg.token_noise
    model = make_model(cfg, seed=2)
    obs = jnp.asarray(np.random.default_rng(0).integers(0, 5, (4, 8)))
    run = lambda det: model(obs, obs % 3, jnp.ones((4, 8)), deterministic=det)  # noqa: E731
    noisy, plain, again = run(False), run(True), run(True)
    g_noisy, g_plain = (np.asarray(o.aux["token_gates"][-1]) for o in (noisy, plain))
    np.testing.assert_array_equal(g_plain, np.asarray(again.aux["token_gates"][-1]))
    assert np.abs(g_noisy - g_plain).max() > 1e-3
