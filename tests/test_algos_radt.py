"""RA-DT: retrieval returns the true nearest pieces, the rescoring is the
paper's, training batches hold honest retrievals, the loss falls, and the
agent acts in context from its own memory."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import configtools, envs
from agentrl.algos.radt import (
    EMPTY,
    PIECE,
    RADT,
    RetrievalSampler,
    build_memory,
    piece_keys,
    piece_starts,
    retrieve_for_training,
)
from agentrl.data.retrieval import FrozenEncoder, min_max, reweight, search


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


# ----------------------------------------------------------------- search
def test_search_returns_the_true_top_k_of_the_allowed_entries():
    rng = np.random.default_rng(0)
    keys = _unit(rng.normal(size=(300, 16))).astype(np.float32)
    query = _unit(rng.normal(size=(6, 16))).astype(np.float32)
    allowed = rng.random((6, 300)) < 0.7
    sim, idx = jax.device_get(search(query, keys, allowed, 10))
    brute = np.where(allowed, query @ keys.T, -np.inf)
    want = np.argsort(-brute, axis=1)[:, :10]
    np.testing.assert_array_equal(idx, want)
    np.testing.assert_allclose(sim, np.take_along_axis(brute, want, 1), rtol=1e-5)
    assert allowed[np.arange(6)[:, None], idx].all()


def test_search_skips_near_duplicates_and_takes_one_memory_per_query():
    rng = np.random.default_rng(1)
    keys = _unit(rng.normal(size=(3, 50, 8))).astype(np.float32)
    query = keys[:, 7].copy()  # each query's own entry 7 is a perfect match
    allowed = np.ones((3, 50), bool)
    _, idx = jax.device_get(search(query, keys, allowed, 5))
    assert (idx[:, 0] == 7).all()
    _, cut = jax.device_get(search(query, keys, allowed, 5, max_similarity=0.98))
    assert not (cut == 7).any()
    brute = np.einsum("bd,bnd->bn", query, keys)
    brute[brute > 0.98] = -np.inf
    np.testing.assert_array_equal(cut, np.argsort(-brute, 1)[:, :5])


# -------------------------------------------------------------- rescoring
def test_reweight_is_relevance_plus_utility_by_hand():
    sim = jnp.array([[0.9, 0.5, 0.8, -jnp.inf]])
    task_match = jnp.array([[0.0, 1.0, 1.0, 1.0]])
    # min-max of the valid similarities: (0.9, 0.5, 0.8) -> (1, 0, 0.75);
    # plus 0.5 x same task: (1.0, 0.5, 1.25); the blocked slot never wins
    score, slot, found = jax.device_get(reweight(sim, task_match, 0.5, 2))
    np.testing.assert_array_equal(slot, [[2, 0]])
    np.testing.assert_allclose(score, [[1.25, 1.0]], atol=1e-6)
    assert found.all()
    _, slot4, found4 = jax.device_get(reweight(sim, task_match, 0.5, 4))
    np.testing.assert_array_equal(slot4[0, :3], [2, 0, 1])
    np.testing.assert_array_equal(found4, [[True, True, True, False]])
    # more slots than candidates: the extra slots are empty
    _, _, found6 = jax.device_get(reweight(sim, task_match, 0.5, 6))
    np.testing.assert_array_equal(found6[0, 3:], False)


def test_min_max_scales_valid_entries_to_unit_interval():
    x = jnp.array([[2.0, 4.0, 3.0, 100.0]])
    valid = jnp.array([[True, True, True, False]])
    np.testing.assert_allclose(min_max(x, valid), [[0.0, 1.0, 0.5, 0.0]], atol=1e-6)


# ----------------------------------------------------------------- memory
def test_memory_keys_embed_each_pieces_first_steps():
    algo = RADT(context_len=4, piece_len=6, query_len=3, piece_stride=2, key_dim=8)
    enc = FrozenEncoder.create(0, 25, 5, 16, 8)
    rng = np.random.default_rng(2)
    arrays = {
        "obs": rng.integers(0, 25, (3, 20)).astype(np.int32),
        "action": rng.integers(0, 5, (3, 20)).astype(np.int32),
        "reward": rng.integers(0, 2, (3, 20)).astype(np.float32),
        "task_id": np.array([4, 4, 9], np.int32),
    }
    mem = build_memory(algo, enc, arrays, chunk=2)
    starts = piece_starts(20, 6, 2)
    assert len(mem["keys"]) == 3 * len(starts) == len(mem["row"])
    for n in (0, 5, len(mem["row"]) - 1):
        r, s = mem["row"][n], mem["start"][n]
        prev_a = np.r_[0, arrays["action"][r]][s : s + 3]  # a_{t-1}, zero first
        prev_r = np.r_[0.0, arrays["reward"][r]][s : s + 3]
        feats = enc.features(
            jnp.asarray(arrays["obs"][r, s : s + 3]),
            jnp.asarray(prev_a),
            jnp.asarray(prev_r, jnp.float32),
        )
        np.testing.assert_allclose(mem["keys"][n], enc.pool(feats), atol=1e-5)
        assert mem["ret"][n] == arrays["reward"][r, s : s + 6].sum()
        assert mem["task"][n] == arrays["task_id"][r]


# ------------------------------------------------------------ training
@pytest.fixture(scope="module")
def radt_config(tiny_ad_config):
    config = configtools.override(tiny_ad_config(steps=30), {"algo": "radt"})
    return configtools.override(
        config,
        {
            "model.obs_encoding": "grid",
            "train.lr": 3e-3,
            "train.batch_size": 8,
            "context_len": 6,
            "piece_len": 8,
            "query_len": 3,
            "piece_stride": 4,
        },
    )


def _sampler(config, **changes):
    from agentrl.data import open_dataset

    algo = dataclasses.replace(config.algo, **changes)
    dataset = open_dataset(config.data.path)
    return RetrievalSampler(algo, dataset, 8, seed=0).device_sampler(), algo


@pytest.mark.long
def test_training_batches_retrieve_other_steps_of_the_same_task(radt_config):
    # a large task weight and every piece a candidate: the kept piece is of
    # the window's task and never overlaps the window in its own history
    device, algo = _sampler(radt_config, task_weight=10.0, top_k=10_000, empty_prob=0.0)
    data = device.data
    num_obs = device.num_obs
    pieces = algo.num_retrieved * algo.piece_len
    for step in range(3):
        batch = device.batch(step)
        obs = batch["obs"]
        assert obs.shape == (8, pieces + algo.context_len)
        assert not batch["mask"][:, :pieces].any() and batch["mask"][:, pieces:].all()
        # the piece's cells are in the piece block, the window's in block 0
        assert (obs[:, :pieces] // num_obs == PIECE).all()
        assert (obs[:, pieces:] < num_obs).all()
    # recompute one step's retrieval by brute force over the memory
    from agentrl.data.device_sampler import batch_key, draw_index

    index = jax.device_get(draw_index(device.spec, data, batch_key(0, 0)))
    mem = jax.device_get(data["memory"])
    batch = device.batch(0)
    obs = np.asarray(data["obs"])
    for b in range(8):
        row, lo = index["rows"][b], index["idx"][b, 0]
        piece = batch["obs"][b, :pieces] - PIECE * num_obs
        hits = [
            n
            for n, (r, s) in enumerate(zip(mem["row"], mem["start"], strict=True))
            if (obs[r, s : s + algo.piece_len] == piece).all()
        ]
        assert hits, "the retrieved piece is a memory entry"
        ok = [
            mem["task"][n] == np.asarray(data["task_id"])[row]
            and not (
                mem["row"][n] == row
                and mem["start"][n] < lo + algo.context_len
                and mem["start"][n] + algo.piece_len > lo
            )
            for n in hits
        ]
        assert any(ok)


def test_training_never_retrieves_its_own_history_from_the_window_on(radt_config):
    """At evaluation the memory is the agent's finished past: in training a
    piece of the window's own history that overlaps the window or comes after
    it (its future) is never retrieved, however similar or same-task."""
    from agentrl.data.device_sampler import batch_key, draw_index

    device, algo = _sampler(radt_config, task_weight=10.0, top_k=10_000, empty_prob=0.0)
    data = device.data
    mem = jax.device_get(data["memory"])
    own_earlier = 0
    for step in range(20):
        index = draw_index(device.spec, data, batch_key(0, step))
        entries, found = retrieve_for_training(algo, data, index, jax.random.key(step))
        index, entries, found = jax.device_get((index, entries, found))
        row, lo = index["rows"][:, None], index["idx"][:, :1]
        same = mem["row"][entries] == row
        assert not (found & same & (mem["start"][entries] + algo.piece_len > lo)).any()
        own_earlier += int((found & same).sum())
    assert own_earlier > 0  # its own earlier pieces stay candidates


def test_empty_slots_are_marked_as_such(radt_config):
    device, algo = _sampler(radt_config, empty_prob=0.999)
    batch = device.batch(0)
    pieces = algo.piece_len
    assert (batch["obs"][:, :pieces] == EMPTY * device.num_obs).all()
    assert (batch["action"][:, :pieces] == 0).all()


@pytest.mark.long  # a whole fit (compile, checkpoints, evaluation): ~15 s
def test_loss_is_finite_and_falls_on_tiny_data(radt_config, tmp_path):
    from agentrl.train.logger import read_metrics
    from agentrl.train.loop import fit

    config = configtools.override(
        radt_config,
        {"train.steps": 40, "train.log_every": 1, "train.checkpoint_every": 40},
    )
    metrics = read_metrics(fit(config, tmp_path / "run", progress=False))
    losses = np.array([m["loss"] for m in metrics])
    assert len(losses) >= 20 and np.isfinite(losses).all()
    assert losses[-5:].mean() < losses[:5].mean(), losses


# ------------------------------------------------------------ evaluation
@pytest.mark.long
def test_agent_retrieves_from_its_own_finished_episodes(radt_config):
    from flax import nnx

    from agentrl.evaluate import run_batched_agent
    from agentrl.models import DecisionModel
    from agentrl.train.config import complete_config

    env = envs.make("darkroom", size=5, horizon=6)
    small = {"data.env_args": "(('size', 5), ('horizon', 6))", "eval.acting": "greedy"}
    config = complete_config(configtools.override(radt_config, small), env)
    algo = config.algo
    model = DecisionModel(config.model, rngs=nnx.Rngs(1))
    steps = 5 * env.horizon
    params = jax.vmap(env.params_for_task)(jnp.array([3, 12, 20]))
    agent = algo.make_agent(model, env, steps, config)
    history, state = run_batched_agent(env, agent, params, jax.random.key(0), steps)
    np.testing.assert_array_equal(state.count, steps)
    np.testing.assert_array_equal(state.completed, steps)
    np.testing.assert_array_equal(state.action[:, :steps], history.action)
    np.testing.assert_array_equal(state.reward[:, :steps], history.reward)

    enc = agent.encoder
    # the memory's keys, written one piece at a time, are those of the
    # whole history embedded at once (every piece's query steps are written)
    whole = piece_keys(
        enc, state.obs, state.action, state.reward, agent.starts, algo.query_len
    )
    written = agent.starts + algo.query_len - 1 <= steps
    assert written.all() and np.abs(np.asarray(state.keys)).sum(-1).all()
    np.testing.assert_allclose(state.keys, whole, atol=1e-5)
    query = enc.pool(
        enc.features(state.obs[:, 1:4], state.action[:, :3], state.reward[:, :3])
    )
    # an empty memory before the first episode ends: nothing is found
    fresh = agent.init(jax.random.split(jax.random.key(1), 3), params)
    fresh = fresh._replace(count=fresh.count + env.horizon - 1)
    retrieve = jax.jit(agent.retrieve)
    assert not np.asarray(retrieve(fresh, query)[1]).any()
    # after it: the best piece by similarity + return, from finished steps
    starts, found, rets = jax.device_get(retrieve(state, query))
    assert found.all() and (starts + algo.piece_len <= steps).all()
    reward = np.asarray(state.reward)
    for b in range(3):
        s = starts[b, 0]
        assert rets[b, 0] == reward[b, s : s + algo.piece_len].sum()
    # and the model reads the piece: the scores differ with an empty memory
    now = state._replace(count=state.count - 1)
    obs = state.obs[jnp.arange(3), now.count]
    scores = jax.jit(lambda state: agent.scores(state, obs, None, None))
    with_memory = scores(now)
    without = scores(now._replace(completed=now.completed * 0))
    assert with_memory.shape == (3, env.action_space(None).n)
    assert not np.allclose(with_memory, without)
