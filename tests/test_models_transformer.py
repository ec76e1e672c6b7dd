"""Decision model: config validation, causality, cached == full decoding, DPT."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from model_factory import make_model

from agentrl.models import DecisionModel, ModelConfig, log_prob

B, T = 2, 9


def small(**kw) -> ModelConfig:
    base = dict(
        obs_size=7,
        action_size=4,
        num_layers=2,
        num_heads=2,
        d_model=16,
        d_ff=32,
        max_steps=16,
        token_experts=4,
        task_experts=4,
    )
    return ModelConfig(**{**base, **kw})


def inputs(cfg: ModelConfig, t: int = T, seed: int = 1):
    k = jax.random.split(jax.random.key(seed), 3)
    if cfg.obs_kind == "discrete":
        obs = jax.random.randint(k[0], (B, t), 0, cfg.obs_size)
    else:
        obs = jax.random.normal(k[0], (B, t, cfg.obs_size))
    if cfg.action_kind == "discrete":
        act = jax.random.randint(k[1], (B, t), 0, cfg.action_size)
    else:
        act = jax.random.normal(k[1], (B, t, cfg.action_size))
    return obs, act, jax.random.normal(k[2], (B, t))


@pytest.mark.parametrize(
    "kw, field",
    [
        (dict(obs_kind="image"), "obs_kind"),
        (dict(token_layout="tokens"), "token_layout"),
        (dict(head="gaussian"), "head"),
        (dict(d_model=18, num_heads=2), "d_model"),
        (dict(moe_layers=(5,)), "moe_layers"),
        (dict(moe_layers=(1,), token_top_k=9), "token_top_k"),
        (dict(task_routing="episode"), "task_routing"),
        (dict(obs_encoding="onehot"), "obs_encoding"),
        (dict(obs_encoding="grid", grid_size=1), "grid_size"),
        (dict(obs_encoding="grid", grid_size=2), "obs_size"),
        (dict(obs_encoding="grid", obs_kind="continuous", grid_size=2), "obs_kind"),
    ],
)
def test_config_errors_name_the_field(kw, field):
    with pytest.raises(ValueError, match=f"ModelConfig.{field}"):
        small(**kw)


@pytest.mark.parametrize(
    "layout, moe", [("step", ()), pytest.param("sar", (1,), marks=pytest.mark.long)]
)
def test_causal_future_inputs_do_not_change_past(layout, moe):
    cfg = small(token_layout=layout, moe_layers=moe, task_routing="sequence")
    model = make_model(cfg)
    obs, act, rew = inputs(cfg)
    out = forward(model, obs, act, rew).action
    assert out.shape == (B, T, cfg.action_size)
    t = 5
    # change obs_{t+1..}, action_{t..}, reward_{t..}: predictions <= t unchanged
    obs2 = obs.at[:, t + 1 :].set((obs[:, t + 1 :] + 1) % cfg.obs_size)
    act2 = act.at[:, t:].set((act[:, t:] + 1) % cfg.action_size)
    out2 = forward(model, obs2, act2, rew.at[:, t:].add(3.0)).action
    np.testing.assert_allclose(out2[:, : t + 1], out[:, : t + 1], atol=1e-6)
    assert np.abs(out2[:, t + 1 :] - out[:, t + 1 :]).max() > 1e-4
    # obs_t itself is seen at t
    out3 = forward(
        model, obs.at[:, t].set((obs[:, t] + 1) % cfg.obs_size), act, rew
    ).action
    assert np.abs(out3[:, t] - out[:, t]).max() > 1e-4


@nnx.jit(static_argnames="window")
def _forward(model, obs, act, rew, window):
    return model(obs, act, rew, window=window)


def forward(model, obs, act, rew, window=None):
    """Jitted full pass (eager NNX compiles every op separately: slow)."""
    return _forward(model, obs, act, rew, window)


_decode = nnx.jit(lambda m, c, o, a, r: m.decode(c, o, a, r))


def run_decode(model, cfg, obs, act, rew, steps):
    cache = model.init_cache(B, steps)
    outs = []
    for t in range(obs.shape[1]):
        prev_a = act[:, t - 1] if t else jnp.zeros_like(act[:, 0])
        prev_r = rew[:, t - 1] if t else jnp.zeros_like(rew[:, 0])
        out, cache = _decode(model, cache, obs[:, t], prev_a, prev_r)
        outs.append(out.action)
    return jnp.stack(outs, axis=1), cache


@pytest.mark.parametrize("layout", ["step", "sar"])
def test_a_full_pass_over_one_step_is_its_first_decode(layout):
    # the "step" layout's start token was once cut away at T = 1 (no tokens)
    cfg = small(token_layout=layout)
    model = make_model(cfg)
    obs, act, rew = (x[:, :1] for x in inputs(cfg))
    full = forward(model, obs, act, rew).action
    cached, _ = run_decode(model, cfg, obs, act, rew, steps=4)
    assert full.shape == cached.shape == (B, 1, cfg.action_size)
    np.testing.assert_allclose(cached, full, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "layout, moe, routing, steps",
    [
        ("step", (), "token", T),
        ("sar", (), "token", 4),
        pytest.param("step", (0, 1), "token", T, marks=pytest.mark.long),
        pytest.param("sar", (0, 1), "token", T, marks=pytest.mark.long),
        pytest.param("step", (1,), "sequence", 4, marks=pytest.mark.long),
        pytest.param("sar", (1,), "sequence", 4, marks=pytest.mark.long),
        pytest.param("step", (), "grid", 4, marks=pytest.mark.long),
    ],
)
def test_cached_decoding_equals_full_pass(layout, moe, routing, steps):
    """Within the window (steps = T) and rolling (4-step cache, 9 steps)."""
    grid = dict(obs_encoding="grid", grid_size=3, obs_size=18)
    cfg = small(
        token_layout=layout,
        moe_layers=moe,
        **(grid if routing == "grid" else dict(task_routing=routing)),
    )
    model = make_model(cfg)
    obs, act, rew = inputs(cfg)
    full = forward(model, obs, act, rew, window=steps).action
    cached, cache = run_decode(model, cfg, obs, act, rew, steps=steps)
    np.testing.assert_allclose(cached, full, atol=1e-5, rtol=0)
    assert int(cache.next_pos) == T * cfg.tokens_per_step
    if steps < T:  # the window matters: the unbounded pass differs late on
        unbounded = forward(model, obs, act, rew).action
        assert np.abs(unbounded[:, -1] - full[:, -1]).max() > 1e-4


@pytest.mark.long
def test_continuous_gaussian_and_training_mode():
    cfg = small(
        obs_kind="continuous",
        obs_size=3,
        action_kind="continuous",
        action_size=2,
        head="gaussian",
        dropout=0.1,
        moe_layers=(1,),
    )
    model = make_model(cfg)
    obs, act, rew = inputs(cfg)
    out = forward(model, obs, act, rew)
    assert out.action.shape == out.log_std.shape == (B, T, 2)
    assert out.aux["task_router_logits"].shape == (B, cfg.task_experts)
    assert float(out.aux["balance_loss"]) >= 0.0
    train = nnx.jit(lambda m: m(obs, act, rew, deterministic=False).action)
    train1, train2 = train(model), train(model)
    assert np.abs(train1 - train2).max() > 1e-6  # fresh noise
    assert np.isfinite(log_prob(cfg.head, out, act)).all()
    cached, _ = run_decode(model, cfg, obs, act, rew, steps=T)
    np.testing.assert_allclose(cached, out.action, atol=1e-5, rtol=0)


@pytest.mark.long
def test_dense_model_has_zero_balance_loss_and_gradients_flow():
    cfg = small()
    model = DecisionModel(cfg, rngs=nnx.Rngs(0))
    obs, act, rew = inputs(cfg)
    assert float(forward(model, obs, act, rew).aux["balance_loss"]) == 0.0

    def loss(m):
        return -log_prob(cfg.head, m(obs, act, rew), act).mean()

    grads = nnx.jit(nnx.grad(loss))(model)
    norms = [float(jnp.abs(g).sum()) for g in jax.tree.leaves(grads)]
    assert all(n > 0 for n in norms)


@pytest.mark.long
@pytest.mark.parametrize("moe", [(), pytest.param((1,), marks=pytest.mark.long)])
def test_dpt_prefixes_and_cached_transitions(moe):
    cfg = small(token_layout="transition", moe_layers=moe, max_steps=8)
    model = make_model(cfg)
    n = 6
    obs, act, rew = inputs(cfg, t=n)
    nxt = (obs + 1) % cfg.obs_size
    query = obs[:, 0]
    pq = nnx.jit(lambda m, *a: m.predict_query(*a).action)
    out = pq(model, query, obs, act, rew, nxt)
    assert out.shape == (B, n + 1, cfg.action_size)
    # position i sees only the first i transitions
    out2 = pq(model, query, obs, act.at[:, 3:].set(0), rew, nxt)
    np.testing.assert_allclose(out2[:, :4], out[:, :4], atol=1e-6)
    o, cache = model.decode_query(model.init_cache(B), query)
    outs = [o.action]
    step = nnx.jit(lambda m, c, *x: m.decode_transition(c, *x))
    for i in range(n):
        o, cache = step(model, cache, obs[:, i], act[:, i], rew[:, i], nxt[:, i])
        outs.append(o.action)
    np.testing.assert_allclose(jnp.stack(outs, 1), out, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="max_steps"):
        obs9, act9, rew9 = inputs(cfg, t=9)
        model.predict_query(query, obs9, act9, rew9, obs9)


def test_grid_encoding_factorises_cells_into_rows_columns_and_layers():
    """Cell id ``layer * n**2 + y * n + x`` -> E_x[x] + E_y[y] + W(x, y)/n + E_l."""
    from agentrl.models.embedding import GridCellEmbed

    embed = GridCellEmbed(3, 2, 8, nnx.Rngs(0))
    ids = jnp.arange(18)
    out = np.asarray(embed(ids))
    x, y, layer = ids % 3, (ids % 9) // 3, ids // 9
    xy = jnp.stack([x, y], -1) / 3.0
    expected = embed.x(x) + embed.y(y) + embed.coords(xy) + embed.layer(layer)
    np.testing.assert_allclose(out, expected, atol=1e-6)
    # a cell's embedding is the sum of parts shared with its row and column
    # mates: e(x=2,y=1) - e(x=0,y=1) == e(x=2,y=0) - e(x=0,y=0)
    np.testing.assert_allclose(out[5] - out[3], out[2] - out[0], atol=1e-5)
    assert np.abs(out[9] - out[0]).max() > 1e-3  # the layer (has-key) matters


def test_grid_encoding_takes_grid_size_from_the_environment():
    from agentrl.algos import AD
    from agentrl.envs import make
    from agentrl.models.config import complete_model_config

    cfg = complete_model_config(
        ModelConfig(obs_encoding="grid"), make("darkroom"), AD()
    )
    assert (cfg.grid_size, cfg.obs_size, cfg.grid_layers) == (9, 81, 1)
    kd = complete_model_config(
        ModelConfig(obs_encoding="grid"), make("dark_key_to_door"), AD()
    )
    assert kd.grid_layers * kd.grid_size**2 == kd.obs_size
    with pytest.raises(ValueError, match="obs_encoding='grid'"):
        complete_model_config(
            ModelConfig(obs_encoding="grid"), make("bernoulli_bandit"), AD()
        )


def test_the_feed_forward_is_gpt2s_tanh_gelu_between_two_linears():
    # GPT-2's MLP (the DPT reference's model; HF's "gelu_new" is GELU's tanh
    # form): fc2(gelu(fc1(h))), not ReLU's, not the erf form's
    from agentrl.models.transformer import MLP

    mlp = MLP(4, 8, rngs=nnx.Rngs(0))
    h = 2.0 * jax.random.normal(jax.random.key(1), (3, 4))
    hidden = mlp.fc1(h)
    tanh_form = jnp.tanh(np.sqrt(2 / np.pi) * (hidden + 0.044715 * hidden**3))
    want = mlp.fc2(0.5 * hidden * (1 + tanh_form))
    np.testing.assert_allclose(mlp(h), want, atol=1e-5)
    for other in (jax.nn.relu(hidden), jax.nn.gelu(hidden, approximate=False)):
        assert np.abs(np.asarray(mlp.fc2(other) - want)).max() > 1e-4
