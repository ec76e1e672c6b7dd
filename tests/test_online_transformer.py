"""Transformer PPO over trials (agentrl.online.transformer, algo transformer_ppo).

- acting with the KV cache equals the training forward pass: every logged
  log-probability is the one the whole-trial forward gives the weights that
  acted (so the PPO ratio starts at exactly 1);
- what ReLIC's partial updates change: with ``update_every = K < L`` the
  trial's later chunks are acted by weights updated inside the trial, over
  the carried context; with ``K = L`` one set of weights acts the whole
  trial;
- a partial update's chunk attending to the (fixed) cache of the earlier
  steps gives the whole-trial forward's outputs (bounded training memory);
- Sink-KV (``model.attention_sink``): acting with the cache still equals
  the forward pass, the sink is trained, and attention can go nowhere;
- fit / resume / load_run / evaluation go through the same run directory;
- the transformer solves the flip bandit.

The trainer tests compile KV-cache acting, cache re-encoding and the
chunked forward/backward nested in scans: about a minute together on the
2-core CPU with a warm compilation cache.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_online_rl2 import FlipBandit, hp

from agentrl.algos import TransformerPPO
from agentrl.models import ModelConfig
from agentrl.models.config import complete_model_config
from agentrl.online.transformer import TransformerPPO as Trainer
from agentrl.online.transformer import TransformerShape
from agentrl.train import fit
from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig
from agentrl.train.experiments import online_train_config
from agentrl.train.rundir import load_run


def make_trainer(
    update_every: int,
    num_updates: int = 1,
    trial: int = 8,
    sink: bool = False,
    horizon: int | None = None,
    model: dict | None = None,
    **shape,
):
    """A tiny trainer on the flip bandit (episodes of ``horizon``, default
    half the trial); ``model``: more ModelConfig fields, ``shape``:
    TransformerShape fields to change."""
    env = FlipBandit(num_arms=2, horizon=horizon or trial // 2)
    cfg = ModelConfig(
        num_layers=1,
        num_heads=2,
        d_model=16,
        d_ff=32,
        dropout=0.0,
        max_steps=trial,
        attention_sink=sink,
        **(model or {}),
    )
    cfg = complete_model_config(cfg, env, TransformerPPO())
    fields = dict(
        num_envs=8,
        trial_steps=trial,
        update_every=update_every,
        num_epochs=2,
        num_minibatches=2,
        num_updates=num_updates,
        grad_clip=0.5,
    )
    return Trainer(env, TransformerShape(**{**fields, **shape}), cfg, env.sample_params)


@functools.partial(jax.jit, static_argnums=0)
def full_forward(trainer, params, buf):
    """``[B, L, A]``: ``trainer``'s model of ``params`` over the whole token
    buffer (one compiled program per trainer, not one per operation)."""
    return trainer.forward(params, buf["obs"], buf["action"], buf["reward"])


@functools.partial(jax.jit, static_argnums=0)
def forward_logp(trainer, actor, buf):
    """``[B, L]`` log-probabilities of the buffer's actions under ``actor``."""
    logp = jax.nn.log_softmax(full_forward(trainer, actor, buf))
    return jnp.take_along_axis(logp, buf["action"][..., None], -1)[..., 0]


LONG = pytest.mark.long


@pytest.mark.long
@pytest.mark.parametrize(
    ("update_every", "sink"),
    [pytest.param(8, False, marks=LONG), pytest.param(4, False, marks=LONG), (4, True)],
)
def test_partial_updates_act_with_weights_updated_inside_the_trial(update_every, sink):
    trainer = make_trainer(update_every, sink=sink)
    state = trainer.init(jax.random.key(0), hp(lr=1e-2))
    run = jax.jit(trainer.run_trial)
    new, metrics, buf, acting = run(state, hp(lr=1e-2))
    chunks = 8 // update_every
    assert jax.tree.leaves(acting)[0].shape[0] == chunks
    for c in range(chunks):
        actor = jax.tree.map(lambda x, c=c: x[c], acting)
        lp = forward_logp(trainer, actor, buf)
        part = slice(c * update_every, (c + 1) * update_every)
        # the cache (re-encoded after each partial update) = the forward pass
        np.testing.assert_allclose(
            buf["logp"][:, part], lp[:, part], rtol=1e-4, atol=1e-5
        )
    first = jax.tree.map(lambda x: x[0], acting)
    same = jax.tree.map(np.array_equal, first, state.actor)
    assert all(jax.tree.leaves(same))  # chunk 0 acts with the trial's weights
    if chunks > 1:
        # the second half of the trial is acted by weights updated inside it
        second = jax.tree.map(lambda x: x[1], acting)
        moved = [
            not np.array_equal(a, b)
            for a, b in zip(
                jax.tree.leaves(first), jax.tree.leaves(second), strict=True
            )
        ]
        assert any(moved)
        lp0 = forward_logp(trainer, first, buf)
        assert not np.allclose(buf["logp"][:, 4:], lp0[:, 4:], atol=1e-6)
    assert np.isfinite(float(metrics["loss"]))
    if sink:  # the sink key / value are trained by the PPO update
        names = [
            jax.tree_util.keystr(p) for p, _ in jax.tree.leaves_with_path(new.actor)
        ]
        assert any("sink_key" in n for n in names)
        old = dict(jax.tree.leaves_with_path(state.actor))
        for p, leaf in jax.tree.leaves_with_path(new.actor):
            if "sink" in jax.tree_util.keystr(p):
                assert not np.array_equal(leaf, old[p])


def random_buffer(key, n, length, num_obs=1, num_actions=2):
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        "obs": jax.random.randint(k1, (n, length), 0, num_obs),
        "action": jax.random.randint(k2, (n, length), 0, num_actions),
        "reward": jax.random.bernoulli(k3, 0.5, (n, length)).astype(jnp.float32),
    }


@pytest.mark.long
@pytest.mark.parametrize("sink", [pytest.param(False, marks=LONG), True])
def test_chunk_over_the_prefix_cache_equals_the_full_forward(sink):
    """What partial updates train on: a chunk's K steps attending to the cache
    of the steps before it give the whole-trial forward's outputs there; the
    re-encoded prefix cache equals the one step-by-step decoding builds."""
    trainer = make_trainer(update_every=4, trial=12, sink=sink)
    actor = trainer._init_params(jax.random.key(1))
    buf = random_buffer(jax.random.key(2), 8, 12)
    full = full_forward(trainer, actor, buf)
    model = trainer.model(actor)
    stepwise = model.init_cache(8, 12)
    caches = [stepwise]
    for t in range(12):
        prev = (
            (buf["action"][:, t - 1], buf["reward"][:, t - 1])
            if t
            else (
                jnp.zeros(8, jnp.int32),
                jnp.zeros(8),
            )
        )
        _, stepwise = model.decode(stepwise, buf["obs"][:, t], *prev)
        caches.append(stepwise)
    encode = jax.jit(trainer._encode)
    for start in (0, 4, 8):
        prefix = encode(actor, buf, start)
        assert int((prefix.slot_pos >= 0).sum()) == start
        for mine, ref in zip(
            (*prefix.keys, *prefix.values),
            (*caches[start].keys, *caches[start].values),
            strict=True,
        ):
            axis = 3 if mine.shape[-1] == 12 else 2
            np.testing.assert_allclose(
                jnp.take(mine, jnp.arange(start), axis),
                jnp.take(ref, jnp.arange(start), axis),
                rtol=1e-4,
                atol=1e-5,
            )
        part = trainer.chunk_forward(actor, prefix, buf, start, 4)
        np.testing.assert_allclose(
            part, full[:, start : start + 4], rtol=1e-4, atol=1e-5
        )
        # the critic's pass: the chunk's values and the bootstrap's
        values = trainer._chunk_values(actor, prefix, buf, start)
        upto = min(start + 5, 12)
        np.testing.assert_allclose(
            values[:, : upto - start], full[:, start:upto, 0], rtol=1e-4, atol=1e-5
        )


@pytest.mark.parametrize("update_every", [pytest.param(u, marks=LONG) for u in (4, 12)])
def test_trial_update_copies_no_whole_cache_inside_its_loops(update_every):
    """The compiled one-trial update (acting scan, re-encodings, partial
    updates) never copies a whole KV cache inside a loop: acting reads the
    cache once a step and writes in place; the training prefix is the
    acting cache itself; the critic's chunk pass drops its writes. (The
    version before this test copied 14 caches per partial update.) With
    ``K = L`` (one update per trial) neither: the cache-shaped copies its
    program has are once-per-call layout copies of the critic's whole-trial
    attention keys (XLA inlines the one-chunk loop into ENTRY), not in a
    loop."""
    from hlo_tools import cache_shapes, count_copies

    trainer = make_trainer(update_every=update_every, trial=12)
    state = trainer.init(jax.random.key(0), hp())
    hlo = jax.jit(trainer.update).lower(state, hp()).compile().as_text()
    shapes = cache_shapes(trainer.model(state.actor).init_cache(8, 12))
    assert count_copies(hlo, shapes) == 0


def test_the_copy_counter_sees_a_cache_copied_in_a_loop():
    """A chunk loop that keeps the cache from before its acting scan (as the
    training prefix once did) copies it once per chunk: counted."""
    from hlo_tools import cache_shapes, count_copies

    trainer = make_trainer(update_every=4, trial=12)
    state = trainer.init(jax.random.key(0), hp())
    shapes = cache_shapes(trainer.model(state.actor).init_cache(8, 12))

    def keep(actor, cache):
        model = trainer.model(actor)
        zero = jnp.zeros(8, jnp.int32)

        def act(c, t):
            return model.decode(c, zero, zero, jnp.zeros(8))[1], None

        def chunk(c, _):
            new = jax.lax.scan(act, c, jnp.arange(4))[0]
            keys = jax.tree.map(jnp.add, c.keys, new.keys)
            return new._replace(keys=keys), None

        return jax.lax.scan(chunk, cache, jnp.arange(3))[0]

    cache = trainer.model(state.actor).init_cache(8, 12)
    hlo = jax.jit(keep).lower(state.actor, cache).compile().as_text()
    assert count_copies(hlo, shapes) > 0


#: A copy in a fusion run once (from ENTRY) and one in a loop body.
_TWO_COPIES = """HloModule m

%fused_once (p.0: f32[2,3]) -> f32[2,3] {
  %p.0 = f32[2,3]{1,0} parameter(0)
  ROOT %copy.1 = f32[2,3]{1,0} copy(%p.0)
}

%fused_step (p.1: f32[2,3]) -> f32[2,3] {
  %p.1 = f32[2,3]{1,0} parameter(0)
  ROOT %copy.2 = f32[2,3]{1,0} copy(%p.1)
}

%body (t.0: (s32[], f32[2,3])) -> (s32[], f32[2,3]) {
  %t.0 = (s32[], f32[2,3]{1,0}) parameter(0)
  %x.0 = f32[2,3]{1,0} get-tuple-element(%t.0), index=1
  %y.0 = f32[2,3]{1,0} fusion(%x.0), kind=kLoop, calls=%fused_step
  %i.0 = s32[] get-tuple-element(%t.0), index=0
  ROOT %r.0 = (s32[], f32[2,3]{1,0}) tuple(%i.0, %y.0)
}

%cond (t.1: (s32[], f32[2,3])) -> pred[] {
  %t.1 = (s32[], f32[2,3]{1,0}) parameter(0)
  ROOT %c.0 = pred[] constant(true)
}

ENTRY %main (x.1: f32[2,3]) -> (s32[], f32[2,3]) {
  %x.1 = f32[2,3]{1,0} parameter(0)
  %once = f32[2,3]{1,0} fusion(%x.1), kind=kLoop, calls=%fused_once
  %i.1 = s32[] constant(0)
  %t.2 = (s32[], f32[2,3]{1,0}) tuple(%i.1, %once)
  ROOT %w = (s32[], f32[2,3]{1,0}) while(%t.2), condition=%cond, body=%body
}
"""


def test_copy_counter_counts_copies_inside_loops_only():
    """Copies that run once per call (in ENTRY, or in a fusion ENTRY calls:
    XLA inlines a one-trip loop there) are not loop copies; one in a fusion
    a loop body calls is."""
    from hlo_tools import count_copies

    assert count_copies(_TWO_COPIES, [(2, 3)]) == 1
    assert count_copies(_TWO_COPIES, [(2, 3)], loops_only=False) == 2
    assert count_copies(_TWO_COPIES, [(3, 2)], loops_only=False) == 0


def attention_to_tokens(model, buf):
    """Layer 0's attention weight on real tokens, summed per query: ``[B, H, T]``."""
    from agentrl.models.attention import _sink_scores, window_mask

    attn = model.blocks[0].attn
    x = model.embed.steps(buf["obs"], buf["action"], buf["reward"])
    pos = jnp.arange(x.shape[1])
    q, k, _ = attn._project(model.blocks[0].ln1(x), pos)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k)
    s = jnp.where(window_mask(pos, pos, x.shape[1]), s, -jnp.inf)
    if attn.has_sink:
        s = jnp.concatenate([s, _sink_scores(q, attn.sink_key[...])], -1)
    return jax.nn.softmax(s, -1)[..., : x.shape[1]].sum(-1)


@pytest.mark.long
def test_attention_sink_lets_a_head_attend_nowhere():
    """Sink-KV (model.attention_sink): with the sink, attention weight on the
    real tokens sums to less than 1 (the rest goes to the learned sink), so
    a head can add (almost) nothing; without it every head's output is a
    convex combination of the tokens' values. Same other weights: the
    policies differ."""
    from flax import nnx

    plain = make_trainer(update_every=8)
    sunk = make_trainer(update_every=8, sink=True)
    buf = random_buffer(jax.random.key(3), 4, 8)
    m_plain = plain.model(plain._init_params(jax.random.key(4)))
    m_sink = sunk.model(sunk._init_params(jax.random.key(5)))
    nnx.update(m_sink, nnx.state(m_plain, nnx.Param))  # all but the sink shared
    np.testing.assert_allclose(attention_to_tokens(m_plain, buf), 1.0, rtol=1e-6)
    mass = attention_to_tokens(m_sink, buf)
    assert float(mass.max()) < 1.0 - 1e-3
    args = (buf["obs"], buf["action"], buf["reward"])
    assert not np.allclose(m_plain(*args).action, m_sink(*args).action, atol=1e-4)
    # a sink key aligned with the queries takes (almost) all the weight: the
    # head attends nowhere and outputs its sink value, whatever the context
    attn = m_sink.blocks[0].attn
    x = m_sink.embed.steps(*args)
    q, _, _ = attn._project(m_sink.blocks[0].ln1(x), jnp.arange(8))
    attn.sink_key[...] = 1e3 * q.mean((0, 1))
    assert float(attention_to_tokens(m_sink, buf).max()) < 1e-3


def tiny_config(update_every=0):
    return ExperimentConfig(
        name="tppo-tiny",
        algo=TransformerPPO(
            trial_episodes=2,
            num_envs=4,
            num_epochs=1,
            num_minibatches=2,
            update_every=update_every,
        ),
        data=DataConfig(
            env="bernoulli_bandit",
            env_args=(("num_arms", 2), ("horizon", 3)),
            source="random",
        ),
        model=ModelConfig(num_layers=1, num_heads=2, d_model=16, d_ff=32, dropout=0.0),
        train=online_train_config(
            steps=4,
            lr=1e-3,
            schedule="constant",
            log_every=2,
            checkpoint_every=2,
        ),
        eval=EvalConfig(num_tasks=3, num_episodes=2),
    )


@pytest.mark.long
def test_fit_resume_exact_and_evaluation(tmp_path):
    from agentrl.evaluate.run import run_results

    config = tiny_config(update_every=3)
    fit(config, tmp_path / "a", progress=False)
    fit(config, tmp_path / "b", progress=False, stop_at_step=2)
    fit(config, tmp_path / "b", progress=False)
    a, b = load_run(tmp_path / "a"), load_run(tmp_path / "b")
    assert a.step == b.step == 4
    assert a.config.model.max_steps == 6  # the trial: 2 episodes of 3 steps
    from flax import nnx

    def arrays(model):
        return [
            jax.random.key_data(x)
            if jnp.issubdtype(x.dtype, jax.dtypes.prng_key)
            else x
            for x in jax.tree.leaves(nnx.state(model))
        ]

    for x, y in zip(arrays(a.model), arrays(b.model), strict=True):
        np.testing.assert_array_equal(x, y)
    results, _ = run_results(tmp_path / "a", baselines=["random"])
    assert results["transformer_ppo"].returns.shape == (3, 2)
    # a context control beside it; expert distillation does not apply
    import json

    from agentrl.evaluate.run import evaluate_run

    paths = evaluate_run(tmp_path / "a", baselines=[], control="zero_rewards")
    verdict = json.loads(paths["verdict"].read_text())
    assert set(verdict["controls"]) == {"zero_rewards"}
    assert verdict["not_applicable"] == ["expert_distillation"]
    assert verdict["missing"] == ["shuffle_rewards", "empty_context"]


def test_bad_fields_are_named():
    with pytest.raises(ValueError, match="algo.update_every"):
        TransformerPPO(update_every=-1)
    from agentrl.envs import make as make_env

    config = dataclasses.replace(tiny_config(), algo=TransformerPPO(update_every=5))
    env = make_env("bernoulli_bandit", num_arms=2, horizon=3)
    with pytest.raises(ValueError, match="algo.update_every=5 must divide"):
        config.algo.make_online_train(config, env)
    short = dataclasses.replace(
        tiny_config(), model=dataclasses.replace(tiny_config().model, max_steps=4)
    )
    with pytest.raises(ValueError, match="model.max_steps=4 must be >= its 6 steps"):
        short.algo.make_online_train(short, env)


@pytest.mark.long
def test_transformer_solves_the_flip_bandit():
    trainer = make_trainer(update_every=10, num_updates=40, trial=10)
    _, metrics = jax.jit(trainer)(jax.random.key(0), hp())
    assert np.asarray(metrics["trial_return"])[-5:].mean() > 8.5  # chance: 5


def test_families_whose_episodes_end_early_are_refused():
    """A trial is ``trial_episodes x horizon`` steps: on Key-to-Door (the
    door ends an episode) it held up to ~37 episodes, not 4, so it is
    refused before anything compiles; Dark Room (fixed length) is not."""
    from agentrl import envs
    from agentrl.configtools import override
    from agentrl.train.experiments import load_experiment

    config = load_experiment("transformer_ppo_darkroom", "smoke")
    room = envs.make(config.data.env, **dict(config.data.env_args))
    assert not room.episodes_end_early
    k2d = override(config, {"data.env": "dark_key_to_door", "data.env_args": "()"})
    env = envs.make("dark_key_to_door")
    assert env.episodes_end_early and envs.make("darkroom_hard").episodes_end_early
    with pytest.raises(ValueError, match="episodes can end early"):
        k2d.algo.make_online_train(k2d, env)


def reference_advantages(value, reward, ends, gamma, lam, chunk):
    """Per-chunk GAE in numpy, one step at a time: ``value``/``reward``
    ``[B, L]``, ``ends [L]`` where advantages stop (the trial's last step
    always); a chunk ending inside the run bootstraps from the next step."""
    b, length = value.shape
    out = np.zeros((b, length))
    for start in range(0, length, chunk):
        acc = np.zeros(b)
        for t in reversed(range(start, start + chunk)):
            last = t + 1 == start + chunk
            stop = ends[t] or t + 1 == length
            following = 0.0 if stop else value[:, t + 1]
            delta = reward[:, t] + gamma * following - value[:, t]
            acc = delta + (0.0 if stop or last else gamma * lam) * acc
            out[:, t] = acc
    return out


@pytest.mark.parametrize(
    ("scope", "update_every"),
    [("episode", 4), ("trial", 4), pytest.param("episode", 12, marks=LONG)],
)
@pytest.mark.long
def test_advantages_stop_where_the_scope_says(scope, update_every):
    """At lr 0 with one epoch of one minibatch, the logged value loss is
    0.5 x mean(advantage²) over the chunks: it equals a numpy GAE that stops
    at every episode's end (ReLIC's scope) or only at the trial's (RL²'s).
    Episodes of 6 steps, chunks of 4: a chunk straddles an episode's end; a
    3x3 room, so the random walks are paid and ``reward_scale`` counts."""
    from agentrl.envs import make as make_env
    from agentrl.online.ppo import trial_hparams

    env = make_env("darkroom", size=3, horizon=6)
    algo = TransformerPPO(trial_episodes=2, advantage_scope=scope)
    cfg = ModelConfig(
        num_layers=1, num_heads=2, d_model=16, d_ff=32, dropout=0.0, max_steps=12
    )
    cfg = complete_model_config(cfg, env, algo)
    shape = TransformerShape(
        num_envs=4, trial_steps=12, update_every=update_every, num_epochs=1,
        num_minibatches=1, num_updates=1, grad_clip=0.5,
        episode_steps=6 if scope == "episode" else 0,
    )  # fmt: skip
    trainer = Trainer(env, shape, cfg, env.sample_params)
    hp = trial_hparams(lr=0.0, reward_scale=0.5, gamma=0.9, gae_lambda=0.8)
    state = trainer.init(jax.random.key(1), hp)
    _, metrics, buf, _ = jax.jit(trainer.run_trial)(state, hp)
    value = np.asarray(full_forward(trainer, state.critic, buf)[..., 0])
    episode_ends = (np.arange(12) + 1) % 6 == 0
    ends, other_ends = (
        (episode_ends, np.zeros(12, bool))
        if scope == "episode"
        else (np.zeros(12, bool), episode_ends)
    )
    assert np.asarray(buf["reward"]).sum() > 0  # else the scale pins nothing
    reward = np.asarray(buf["reward"]) * 0.5
    adv = reference_advantages(value, reward, ends, 0.9, 0.8, update_every)
    other = reference_advantages(value, reward, other_ends, 0.9, 0.8, update_every)
    assert np.abs(adv - other).max() > 1e-3  # the two scopes are told apart
    chunks = adv.reshape(4, -1, update_every)
    expected = np.mean(
        [0.5 * np.mean(chunks[:, c] ** 2) for c in range(chunks.shape[1])]
    )
    np.testing.assert_allclose(float(metrics["vf_loss"]), expected, rtol=2e-5)


@pytest.mark.parametrize(("scope", "steps"), [("trial", 0), ("episode", "horizon")])
def test_the_advantage_scope_reaches_the_trainer(scope, steps):
    from agentrl import envs
    from agentrl.configtools import override
    from agentrl.train.config import complete_config
    from agentrl.train.experiments import load_experiment

    config = load_experiment("transformer_ppo_darkroom", "smoke")
    config = override(config, {"algo.advantage_scope": scope})
    env = envs.make(config.data.env, **dict(config.data.env_args))
    full = complete_config(config, env)
    shape = full.algo.make_online_train(full, env).trainer.shape
    assert shape.episode_steps == (env.horizon if steps == "horizon" else 0)
    with pytest.raises(ValueError, match="algo.advantage_scope must be one of"):
        TransformerPPO(advantage_scope="step")
