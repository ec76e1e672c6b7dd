"""The PPO source's GRU core (``core="gru"``) against a recomputation apart
from it: a plain ``lax.scan`` GRU with PyTorch's gate equations, NumPy GAE,
PPO's loss written out, and XLand-100B's collector's reset rule (the hidden
state and the previous action are never reset after the stream's start:
``collection/training/nn.py`` line 18, ``train.py`` lines 227-267, 448)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl.envs import grid, make
from agentrl.prng import key_scan
from agentrl.rl.ppo import Learner
from agentrl.sources.ppo import generate_ppo, make_config
from agentrl.sources.ppo_gru import GRUActing, GRUTaskRun

ROOM = make("darkroom", size=3, horizon=4)  # 9 cells, 5 actions, start at 4
T, CHUNKS, H = 12, 3, 4  # 3 episodes of 4 steps, chunks of 4 steps


def _run(**settings) -> GRUTaskRun:
    config = make_config(
        ROOM,
        3,
        core="gru",
        core_hidden=H,
        steps_per_update=T,
        num_minibatches=CHUNKS,
        **settings,
    )
    return GRUTaskRun(ROOM, config, ROOM.params_for_task(jnp.int32(2)))


# ------------------------------------------------ the recomputation, by hand
def _inputs(obs, action):
    """``[T, 9 + 5]``: one-hot cell, one-hot previous action (0 first)."""
    prev = np.concatenate([[0], np.asarray(action)[:-1]])
    return jnp.concatenate([jax.nn.one_hot(obs, 9), jax.nn.one_hot(prev, 5)], -1)


def _gru(w, h, x):
    """PyTorch's GRU cell (gates r, z, n) after a relu input layer."""
    e = jax.nn.relu(x @ w["embed"]["w"] + w["embed"]["b"])
    g = w["gru"]
    xi, hh = e @ g["wi"] + g["bi"], h @ g["wh"] + g["bh"]
    r = jax.nn.sigmoid(xi[..., :H] + hh[..., :H])
    z = jax.nn.sigmoid(xi[..., H : 2 * H] + hh[..., H : 2 * H])
    n = jnp.tanh(xi[..., 2 * H :] + r * hh[..., 2 * H :])
    return (1 - z) * n + z * h


def _head(layers, h):
    return (
        jnp.tanh(h @ layers[0]["w"] + layers[0]["b"]) @ layers[1]["w"] + layers[1]["b"]
    )


def _scan(w, h0, xs, resets=None):
    """``(states after each step [T, H], logits [T, 5], values [T])``."""
    resets = jnp.zeros(xs.shape[0], bool) if resets is None else resets

    def body(h, inp):
        x, reset = inp
        h = _gru(w, jnp.where(reset, 0.0, h), x)
        return h, h

    _, hs = jax.lax.scan(body, h0, (xs, resets))
    return hs, _head(w["actor"], hs), _head(w["critic"], hs)[:, 0]


def _rollout(run, seed=0):
    k = jax.random.split(jax.random.key(seed), 3)
    weights = run.init_weights(k[0])
    obs, env_state = ROOM.reset(k[1], run.params)
    start = run.start(None, obs, env_state)
    carry = GRUActing(weights, obs, env_state, start.hidden, start.prev_action)
    _, (record, learn) = key_scan(run.env_step, carry, jax.random.split(k[2], T))
    return weights, record, learn


def _numpy_gae(reward, value, next_value, terminated, done, gamma, lam):
    adv, acc = np.zeros(len(reward)), 0.0
    for t in reversed(range(len(reward))):
        delta = reward[t] + gamma * (1 - terminated[t]) * next_value[t] - value[t]
        acc = delta + gamma * lam * (1 - done[t]) * acc
        adv[t] = acc
    return adv


# --------------------------------------------------------------------- tests
def test_hidden_state_and_previous_action_carry_over_episode_ends():
    """Three episodes in one rollout: the acting core's states are the
    plain GRU's over the whole stream from zero with no reset, and differ
    from a GRU reset at each episode's start (so the check can fail)."""
    run = _run()
    weights, record, learn = _rollout(run)
    obs, action = np.asarray(record["obs"]), np.asarray(record["action"])
    assert np.asarray(record["truncated"]).nonzero()[0].tolist() == [3, 7, 11]
    xs = _inputs(obs, action)
    prev = np.concatenate([[0], action[:-1]])  # not reset at episode starts
    np.testing.assert_array_equal(learn["prev_action"], prev)
    hs, logits, values = _scan(weights, jnp.zeros(H), xs)
    np.testing.assert_allclose(learn["h"], hs, atol=1e-6)
    np.testing.assert_allclose(learn["value"], values, atol=1e-6)
    logp = jax.nn.log_softmax(logits)[jnp.arange(T), action]
    np.testing.assert_allclose(learn["logp"], logp, atol=1e-6)
    episode_starts = jnp.asarray(np.arange(T) % 4 == 0)
    reset_hs, _, _ = _scan(weights, jnp.zeros(H), xs, episode_starts)
    assert np.abs(np.asarray(reset_hs[4:]) - np.asarray(hs[4:])).max() > 1e-3


def test_update_carries_the_state_over_the_rollout_boundary():
    """After an update the carry holds the last step's state of the plain
    GRU over the rollout from the state the update started with (no reset
    at the rollout's boundary either), and the last action taken."""
    run = _run()
    k = jax.random.split(jax.random.key(5), 4)
    weights = run.init_weights(k[0])
    obs, env_state = ROOM.reset(k[1], run.params)
    h0 = jax.random.normal(k[2], (H,))
    learner = Learner(weights, run.tx.init(weights))
    carry = run.start(learner, obs, env_state)
    carry = carry._replace(hidden=h0, prev_action=jnp.int32(3))
    new, record = run.update(carry, k[3])
    prev = np.concatenate([[3], np.asarray(record["action"])[:-1]])
    xs = jnp.concatenate(
        [jax.nn.one_hot(record["obs"], 9), jax.nn.one_hot(prev, 5)], -1
    )
    hs, _, _ = _scan(weights, h0, xs)
    np.testing.assert_allclose(new.hidden, hs[-1], atol=1e-6)
    assert int(new.prev_action) == int(record["action"][-1])


@pytest.mark.long
def test_chunk_loss_and_gradient_equal_a_plain_scan_and_numpy_gae():
    """PPO's loss on the second 4-step chunk of a 12-step rollout, at
    weights other than the acting ones: replayed from the acting state at
    step 4, GAE with the successor's value read from the state after the
    step (the true next cell at each episode's cut); the loss and its
    gradient (through the hand-written GRU backward pass) equal autodiff of
    the plain recomputation."""
    gamma, lam, clip, vf, ent = 0.9, 0.8, 0.2, 0.5, 0.01
    run = _run(gamma=gamma, gae_lambda=lam, clip_eps=clip, vf_coef=vf, ent_coef=ent)
    weights, record, learn = _rollout(run, seed=1)
    batch = run.batch(weights, learn["h"][0] * 0.0, record, learn)
    obs, action = np.asarray(record["obs"]), np.asarray(record["action"])
    xs = _inputs(obs, action)
    hs, logits, values = _scan(weights, jnp.zeros(H), xs)
    final = [
        int(grid.cell_id(grid.move(grid.cell_pos(o, 3), a, 3), 3))
        for o, a in zip(obs, action, strict=True)
    ]
    next_x = jnp.concatenate([jax.nn.one_hot(final, 9), jax.nn.one_hot(action, 5)], -1)
    next_value = _head(weights["critic"], _gru(weights, hs, next_x))[:, 0]
    term = np.asarray(record["terminated"])
    done = term | np.asarray(record["truncated"])
    adv = _numpy_gae(
        np.asarray(record["reward"], np.float64),
        np.asarray(values, np.float64),
        np.asarray(next_value, np.float64),
        term,
        done,
        gamma,
        lam,
    )
    np.testing.assert_allclose(batch["adv"], adv, rtol=1e-5, atol=1e-6)
    old_logp = np.asarray(jax.nn.log_softmax(logits)[jnp.arange(T), action])
    leaves, tree = jax.tree.flatten(weights)
    noise = jax.random.split(jax.random.key(9), len(leaves))
    moved = [
        a + 0.3 * jax.random.normal(k, a.shape)
        for a, k in zip(leaves, noise, strict=True)
    ]
    other = jax.tree.unflatten(tree, moved)
    steps = slice(4, 8)
    a = adv[steps]
    a_norm = (a - a.mean()) / (a.std() + 1e-8)
    target = adv[steps] + np.asarray(values)[steps]

    def by_hand(w):
        _, lg, v = _scan(w, hs[3], xs[steps])
        lp = jax.nn.log_softmax(lg)
        ratio = jnp.exp(lp[jnp.arange(4), action[steps]] - old_logp[steps])
        pg = -jnp.minimum(ratio * a_norm, jnp.clip(ratio, 1 - clip, 1 + clip) * a_norm)
        entropy = -(jnp.exp(lp) * lp).sum(-1)
        value_loss = 0.5 * jnp.square(v - target)
        return pg.mean() + vf * value_loss.mean() - ent * entropy.mean()

    chunk = run.chunk(batch, jnp.int32(1))
    loss, grads = jax.value_and_grad(lambda w: run.loss(w, chunk)[0])(other)
    want, want_grads = jax.value_and_grad(by_hand)(other)
    assert abs(float(want)) > 1e-3
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-6)
    for got, exp in zip(
        jax.tree.leaves(grads), jax.tree.leaves(want_grads), strict=True
    ):
        np.testing.assert_allclose(got, exp, rtol=1e-4, atol=1e-6)


def test_each_epoch_visits_every_chunk_once_in_a_fresh_order():
    run = _run(num_epochs=3)
    order = np.asarray(run.chunk_order(jax.random.key(0))).reshape(3, CHUNKS)
    for epoch in order:
        assert sorted(epoch.tolist()) == list(range(CHUNKS))


def test_final_policy_labels_replay_the_stream_from_a_zero_state():
    """``"final_policy"`` labels: the argmax of the final weights' actor at
    each step, its memory the recorded stream from zero (no resets)."""
    run = _run(labels="final_policy")
    weights, record, _ = _rollout(run, seed=2)
    labels = run.greedy_actions(weights, record)
    _, logits, _ = _scan(
        weights, jnp.zeros(H), _inputs(record["obs"], record["action"])
    )
    np.testing.assert_array_equal(labels, np.argmax(np.asarray(logits), -1))


@pytest.mark.long
def test_gru_histories_have_the_sources_shapes_and_differ_from_the_mlps():
    params = jax.vmap(ROOM.params_for_task)(jnp.arange(2))
    key = jax.random.key(3)
    # the same settings but the core: a run that ignored ``core`` would match
    settings = dict(steps_per_update=T, num_minibatches=CHUNKS, hidden=8)
    gru = generate_ppo(ROOM, params, key, 3, core="gru", core_hidden=H, **settings)
    mlp = generate_ppo(ROOM, params, jax.random.clone(key), 3, **settings)
    assert gru.action.shape == mlp.action.shape == (2, T)
    assert gru.action.dtype == mlp.action.dtype
    assert not np.array_equal(gru.action, mlp.action)


def test_mlp_core_is_the_default():
    params = jax.vmap(ROOM.params_for_task)(jnp.arange(2))
    key = jax.random.key(4)
    default = generate_ppo(ROOM, params, key, 3, hidden=8)
    same = jax.random.clone(key)  # the same key on purpose
    mlp = generate_ppo(ROOM, params, same, 3, hidden=8, core="mlp", core_hidden=7)
    for a, b in zip(jax.tree.leaves(default), jax.tree.leaves(mlp), strict=True):
        np.testing.assert_array_equal(a, b)
    assert make_config(ROOM, 3).core == "mlp"


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"core": "lstm"}, r"core must be one of \('mlp', 'gru'\), got 'lstm'"),
        ({"core": "gru", "core_hidden": 0}, "core_hidden must be an int >= 1, got 0"),
        ({"core_hidden": -3}, "core_hidden must be an int >= 1"),
        ({"core_hidden": 2.5}, "core_hidden must be an int >= 1, got 2.5"),
        ({"core_hidden": True}, "core_hidden must be an int >= 1, got True"),
    ],
)
def test_bad_core_settings_are_refused_naming_the_field(settings, message):
    with pytest.raises(ValueError, match=f"^ppo: {message}"):
        make_config(ROOM, 3, **settings)


# ------------------------------------------------------- the cell encoder
def _conv_by_hand(x, w, b):
    """A 2x2 VALID convolution as the sum of four shifted matmuls."""
    h, v = x.shape[0] - 1, x.shape[1] - 1
    out = sum(x[i : i + h, j : j + v] @ w[i, j] for i in (0, 1) for j in (0, 1))
    return jax.nn.relu(out + b)


def _cells_by_hand(w, obs):
    ids = jnp.asarray(obs, jnp.int32)
    y = jnp.concatenate([w["tile"][ids[..., 0]], w["colour"][ids[..., 1]]], -1)
    for layer in w["conv"]:
        y = _conv_by_hand(y, layer["w"], layer["b"])
    return y.reshape(-1)


def test_cell_encoder_is_embeddings_under_three_valid_convolutions():
    """nn.py lines 100-160: 16-unit tile and colour embeddings per cell,
    2x2 VALID convolutions of 16, 32, 64 channels with ReLUs: a 5x5 view
    gives 2 x 2 x 64 = 256 features, here against a NumPy loop."""
    from agentrl.envs.spaces import Box
    from agentrl.sources.ppo_gru import encode_cells, init_cells

    space = Box(0, 12, (5, 5, 2), jnp.uint8)
    k = jax.random.split(jax.random.key(0), 3)
    w = init_cells(k[0], space)
    assert w["tile"].shape == w["colour"].shape == (13, 16)
    assert [c["w"].shape for c in w["conv"]] == [
        (2, 2, 32, 16),
        (2, 2, 16, 32),
        (2, 2, 32, 64),
    ]
    w["conv"] = [  # non-zero biases, so that a dropped bias shows
        {**c, "b": 0.1 * jax.random.normal(kk, c["b"].shape)}
        for c, kk in zip(w["conv"], jax.random.split(k[1], 3), strict=True)
    ]
    obs = np.asarray(jax.random.randint(k[2], (5, 5, 2), 0, 13), np.int64)
    y = np.concatenate(
        [np.asarray(w["tile"])[obs[..., 0]], np.asarray(w["colour"])[obs[..., 1]]],
        -1,
    ).astype(np.float64)
    for layer in w["conv"]:
        kernel, bias = np.asarray(layer["w"], np.float64), np.asarray(layer["b"])
        out = np.zeros((y.shape[0] - 1, y.shape[1] - 1, kernel.shape[-1]))
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                patch = y[i : i + 2, j : j + 2]  # [2, 2, in]
                out[i, j] = np.einsum("abc,abco->o", patch, kernel) + bias
        y = np.maximum(out, 0.0)
    got = encode_cells(w, jnp.asarray(obs, jnp.uint8))
    assert got.shape == (256,)
    assert np.abs(y).max() > 1e-3
    np.testing.assert_allclose(got, y.reshape(-1), rtol=1e-5, atol=1e-6)


@pytest.mark.long  # XLand's env compiles: ~25 s on 2 cores
def test_cell_encoder_learns_in_the_chunk_loss_on_xland():
    """On XLand with ``obs_encoder="cells"``: the chunk's loss, and its
    gradient in every weight (the encoder's included), equal autodiff of
    the plain GRU over inputs from the hand-written encoder (GAE and the
    acting log-probs taken from the batch: checked on Dark Room above)."""
    env = make("xland", num_rulesets=4, ruleset_seed=0, horizon=4)
    config = make_config(
        env,
        2,
        core="gru",
        core_hidden=H,
        obs_encoder="cells",
        steps_per_update=8,
        num_minibatches=2,
    )
    run = GRUTaskRun(env, config, env.params_for_task(jnp.int32(1)))
    k = jax.random.split(jax.random.key(6), 4)
    weights = run.init_weights(k[0])
    obs, env_state = env.reset(k[1], run.params)
    start = run.start(None, obs, env_state)
    carry = GRUActing(weights, obs, env_state, start.hidden, start.prev_action)
    _, (record, learn) = key_scan(run.env_step, carry, jax.random.split(k[2], 8))
    batch = run.batch(weights, start.hidden, record, learn)
    action = np.asarray(record["action"])
    prev = jax.nn.one_hot(np.concatenate([[0], action[:-1]]), 6)

    def inputs(w):
        cells = jax.vmap(lambda o: _cells_by_hand(w["cells"], o))(record["obs"])
        return jnp.concatenate([cells, prev], -1)

    hs, _, _ = _scan(weights, jnp.zeros(H), inputs(weights))
    np.testing.assert_allclose(learn["h"], hs, atol=1e-5)
    leaves, tree = jax.tree.flatten(weights)
    noise = jax.random.split(k[3], len(leaves))
    other = jax.tree.unflatten(
        tree,
        [
            a + 0.1 * jax.random.normal(n, a.shape)
            for a, n in zip(leaves, noise, strict=True)
        ],
    )
    chunk = run.chunk(batch, jnp.int32(1))
    a = np.asarray(chunk["adv"])
    a_norm = (a - a.mean()) / (a.std() + 1e-8)

    def by_hand(w):
        _, lg, v = _scan(w, hs[3], inputs(w)[4:])
        lp = jax.nn.log_softmax(lg)
        ratio = jnp.exp(lp[jnp.arange(4), action[4:]] - chunk["logp"])
        clipped = jnp.clip(ratio, 0.8, 1.2)
        pg = -jnp.minimum(ratio * a_norm, clipped * a_norm).mean()
        entropy = -(jnp.exp(lp) * lp).sum(-1).mean()
        vf = 0.5 * jnp.square(v - chunk["target"]).mean()
        return pg + 0.5 * vf - 0.01 * entropy

    loss, grads = jax.value_and_grad(lambda w: run.loss(w, chunk)[0])(other)
    want, want_grads = jax.value_and_grad(by_hand)(other)
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-6)
    assert np.abs(np.asarray(grads["cells"]["conv"][0]["w"])).max() > 1e-6
    for got, exp in zip(
        jax.tree.leaves(grads), jax.tree.leaves(want_grads), strict=True
    ):
        np.testing.assert_allclose(got, exp, rtol=1e-4, atol=1e-6)
    # and the whole source runs with it, under its one jit
    params = jax.vmap(env.params_for_task)(jnp.arange(2))
    settings = {**dataclasses.asdict(config), "labels": "final_policy"}
    history = generate_ppo(env, params, jax.random.key(8), 2, **settings)
    assert history.action.shape == history.optimal_action.shape == (2, 8)
    assert ((history.action >= 0) & (history.action < 6)).all()


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"core": "gru", "obs_encoder": "conv"}, r"obs_encoder must be one of"),
        ({"obs_encoder": "cells"}, r"obs_encoder='cells' needs core='gru'"),
        (
            {"core": "gru", "obs_encoder": "cells"},
            r"obs_encoder='cells' cannot be used: it needs \[h, w, 2\]",
        ),
    ],
)
def test_bad_encoder_settings_are_refused_naming_the_field(settings, message):
    with pytest.raises(ValueError, match=f"^ppo: {message}"):
        make_config(ROOM, 3, **settings)
