"""ReLIC's per-episode positions (``ModelConfig.positions="episode"``).

- the embedding: at every episode's first step the start vector replaces
  the previous action and reward (ReLIC's start action and reward input 0
  after a reset), and every token gets the learned embedding of its step in
  the episode;
- attention: queries and keys are rotated by the episode's index, the mask
  and the window still count tokens;
- the cached paths (``decode`` with a rolling window, ``prefill``) equal the
  full pass, and transformer PPO's acting and chunked passes equal its
  whole-trial forward;
- the default (``"token"``) model has none of it; bad settings are named,
  and only transformer PPO (whose trials are whole episodes of the env's
  horizon) may use it, with ``episode_steps`` filled from the horizon.
"""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from test_models_prefill import make as make_model
from test_online_rl2 import FlipBandit, hp
from test_online_transformer import (
    forward_logp,
    full_forward,
    make_trainer,
    random_buffer,
)

from agentrl.algos import AD, TransformerPPO
from agentrl.models import DecisionModel, ModelConfig
from agentrl.models.attention import rope
from agentrl.models.config import complete_model_config

B, E = 3, 4  # batch, steps per episode


def make(max_steps: int = 3 * E, **kw) -> DecisionModel:
    """test_models_prefill's tiny model with episode positions."""
    fields = {"attention_block": 4, "positions": "episode", "episode_steps": E}
    return make_model(max_steps, **{**fields, **kw})


def compiled(model: DecisionModel, method: str, **static):
    """``model.method(*args, **static)`` as one compiled program (run op by
    op, a model's pass compiles each operation on its own)."""
    graphdef, state = nnx.split(model)

    @jax.jit
    def call(state, *args):
        return getattr(nnx.merge(graphdef, state), method)(*args, **static)

    return lambda *args: call(state, *args)


def inputs(t: int, seed: int = 1):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    obs = jax.random.randint(k1, (B, t), 0, 5)
    act = jax.random.randint(k2, (B, t), 0, 3)
    return obs, act, jax.random.normal(k3, (B, t))


def test_an_episodes_first_token_ignores_the_previous_step_and_knows_its_step():
    model = make()
    obs, act, rew = inputs(3 * E)
    tokens = model.embed.steps(obs, act, rew)
    # another previous action and reward at every step
    other = model.embed.steps(obs, (act + 1) % 3, rew + 1.0)
    t = np.arange(3 * E)
    same = np.all(np.isclose(tokens, other), axis=(0, 2))
    np.testing.assert_array_equal(same, t % E == 0)
    # each token: its observation, the start vector at an episode's first
    # step (else the previous action and reward), its row of the table
    start = model.embed.start[...] + model.embed.obs(obs[:, 0])
    table = model.embed.episode_step.embedding[...]
    np.testing.assert_allclose(tokens[:, 0], start + table[0], rtol=1e-6)
    np.testing.assert_allclose(
        tokens[:, E],
        model.embed.obs(obs[:, E]) + model.embed.start[...] + table[0],
        rtol=1e-6,
    )
    prev = model.embed._act(act[:, 1]) + model.embed._rew(rew[:, 1])
    np.testing.assert_allclose(
        tokens[:, 2], model.embed.obs(obs[:, 2]) + prev + table[2], rtol=1e-5
    )


def test_queries_and_keys_turn_by_the_episode_index():
    model = make()
    attn = model.blocks[0].attn
    assert attn.rope_period == E
    x = jax.random.normal(jax.random.key(3), (B, 3 * E, 16))
    pos = jnp.arange(3 * E, dtype=jnp.int32)
    q, k, _ = attn._project(x, pos)
    raw_q, raw_k, _ = jnp.split(attn.qkv(x), 3, axis=-1)
    shape = (B, 3 * E, 2, 8)
    want_k = rope(raw_k.reshape(shape), pos // E, attn.rope_base)
    np.testing.assert_allclose(k, want_k, rtol=1e-5, atol=1e-6)
    want_q = rope(raw_q.reshape(shape), pos // E, attn.rope_base) / np.sqrt(8)
    np.testing.assert_allclose(q, want_q, rtol=1e-5, atol=1e-6)
    # and not by the token position (steps 1..3 of episode 0 differ from 0's)
    by_token = rope(raw_k.reshape(shape), pos, attn.rope_base)
    assert not np.allclose(k[:, 1:E], by_token[:, 1:E], atol=1e-4)


@pytest.mark.parametrize("sink", [False, True])
def test_rolling_decode_and_prefill_equal_the_full_pass(sink):
    """Four episodes through a window of two and a half: the full pass with
    that window, a rolling cache decoded step by step, and prefill agree."""
    t, window = 4 * E, 10
    model = make(max_steps=t, attention_sink=sink)
    obs, act, rew = inputs(t)
    full = compiled(model, "__call__", window=window)(obs, act, rew).action
    graphdef, state = nnx.split(model)

    @jax.jit
    def step(cache, o, a, r):
        return nnx.merge(graphdef, state).decode(cache, o, a, r)

    cache = model.init_cache(B, window)
    outs = []
    for i in range(t):
        prev_a = act[:, i - 1] if i else jnp.zeros(B, jnp.int32)
        prev_r = rew[:, i - 1] if i else jnp.zeros(B)
        out, cache = step(cache, obs[:, i], prev_a, prev_r)
        outs.append(out.action)
    np.testing.assert_allclose(jnp.stack(outs, 1), full, rtol=1e-4, atol=1e-5)
    whole = compiled(model, "__call__")(obs, act, rew).action
    prefill = compiled(model, "prefill", piece=E)
    for upto in (E + 1, 3 * E):
        pre, _ = prefill(obs, act, rew, upto)
        np.testing.assert_allclose(pre[:, :upto], whole[:, :upto], rtol=1e-4, atol=1e-5)


def test_default_models_have_no_episode_parameters():
    def names(model):
        leaves = jax.tree.leaves_with_path(nnx.state(model, nnx.Param))
        return " ".join(jax.tree_util.keystr(p) for p, _ in leaves)

    token = make(positions="token", episode_steps=None)
    assert "episode_step" not in names(token)
    assert token.blocks[0].attn.rope_period == 1
    assert "episode_step" in names(make())


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"positions": "trial"}, "ModelConfig.positions"),
        ({"token_layout": "sar"}, "token_layout='step'"),
        ({"episode_steps": 0}, "ModelConfig.episode_steps"),
        ({"episode_steps": 2.5}, "ModelConfig.episode_steps"),
    ],
)
def test_bad_settings_are_named(fields, named):
    base = {"positions": "episode", "episode_steps": E, "max_steps": 8}
    with pytest.raises(ValueError, match=named):
        ModelConfig(**{**base, **fields})


def test_a_model_needs_its_episode_length():
    config = ModelConfig(positions="episode", max_steps=8)
    with pytest.raises(ValueError, match="episode_steps is None"):
        DecisionModel(config, rngs=nnx.Rngs(0))


def test_only_transformer_ppo_takes_episode_positions_with_the_horizon():
    env = FlipBandit(num_arms=2, horizon=5)
    config = ModelConfig(positions="episode")
    done = complete_model_config(config, env, TransformerPPO(trial_episodes=2))
    assert done.episode_steps == 5 and done.max_steps == 10
    mismatch = ModelConfig(positions="episode", episode_steps=4)
    with pytest.raises(ValueError, match="model.episode_steps must be"):
        complete_model_config(mismatch, env, TransformerPPO())
    with pytest.raises(ValueError, match="model.positions='episode'"):
        AD().check(types.SimpleNamespace(model=config))
    TransformerPPO().check(types.SimpleNamespace(model=config))


def test_transformer_ppo_chunks_equal_the_whole_trial_forward():
    """Chunks of 4 over episodes of 6: a chunk attending to the prefix cache
    gives the full forward's outputs."""
    trainer = make_trainer(4, trial=12, sink=True, model={"positions": "episode"})
    assert trainer.config.episode_steps == 6
    actor = trainer._init_params(jax.random.key(1))
    buf = random_buffer(jax.random.key(2), 8, 12)
    full = full_forward(trainer, actor, buf)
    encode = jax.jit(trainer._encode)
    chunk = jax.jit(trainer.chunk_forward, static_argnums=4)
    for start in (4, 8):
        prefix = encode(actor, buf, start)
        part = chunk(actor, prefix, buf, start, 4)
        np.testing.assert_allclose(
            part, full[:, start : start + 4], rtol=1e-4, atol=1e-5
        )


@pytest.mark.long
def test_transformer_ppo_acting_equals_the_whole_trial_forward():
    """The trial's logged log-probabilities are the full forward's of the
    weights that acted, in each of its 3 chunks (the fast guard of acting
    with these positions: the shuffle test's last chunk,
    ``test_online_transformer_shuffle.py``)."""
    trainer = make_trainer(4, trial=12, sink=True, model={"positions": "episode"})
    state = trainer.init(jax.random.key(0), hp(lr=1e-2))
    _, metrics, buf, acting = jax.jit(trainer.run_trial)(state, hp(lr=1e-2))
    for c in range(3):
        actor = jax.tree.map(lambda x, c=c: x[c], acting)
        part = slice(4 * c, 4 * c + 4)
        lp = forward_logp(trainer, actor, buf)
        np.testing.assert_allclose(
            buf["logp"][:, part], lp[:, part], rtol=1e-4, atol=1e-5
        )
    assert np.isfinite(float(metrics["loss"]))
