"""RA-DT's algorithm side (pass 10 of the mutation passes): what is retrieved,
where it sits in the model input, the rescoring at evaluation and the
agent's bookkeeping, on hand-made memories and a stand-in model (no
transformer is compiled)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs
from agentrl.agents.agent import Step
from agentrl.algos.radt import (
    EMPTY,
    PIECE,
    RADT,
    RADTAgent,
    build_memory,
    by_return,
    model_input,
    piece_keys,
    piece_starts,
    retrieve_for_training,
)
from agentrl.data.retrieval import FrozenEncoder
from agentrl.models.heads import ModelOutput

NUM_OBS = 25  # Dark Room 5x5


@pytest.fixture(scope="module")
def env():
    return envs.make("darkroom", size=5, horizon=6)


def test_an_empty_slot_reads_the_empty_block_and_no_action_or_reward():
    pieces = {
        "obs": jnp.array([[[3, 4]], [[5, 6]]]),
        "action": jnp.array([[[1, 2]], [[3, 4]]]),
        "reward": jnp.array([[[1.0, 1.0]], [[1.0, 1.0]]]),
    }
    window = {"obs": jnp.array([[7], [8]]), "action": jnp.array([[0], [1]])}
    window["reward"] = jnp.array([[0.5], [0.5]])
    batch = model_input(pieces, jnp.array([[True], [False]]), window, NUM_OBS)
    np.testing.assert_array_equal(batch["obs"], [[28, 29, 7], [50, 50, 8]])
    assert PIECE * NUM_OBS == 25 and EMPTY * NUM_OBS == 50
    np.testing.assert_array_equal(batch["action"], [[1, 2, 0], [0, 0, 1]])
    np.testing.assert_array_equal(batch["reward"], [[1, 1, 0.5], [0, 0, 0.5]])
    np.testing.assert_array_equal(batch["mask"], [[0, 0, 1], [0, 0, 1]])


def test_pieces_start_every_stride_up_to_the_last_whole_piece():
    np.testing.assert_array_equal(piece_starts(20, 6, 2), [0, 2, 4, 6, 8, 10, 12, 14])
    np.testing.assert_array_equal(piece_starts(10, 10, 5), [0])
    np.testing.assert_array_equal(piece_starts(4, 10, 5), [0])  # one slot at least


def test_pieces_are_ordered_by_ascending_return_empty_slots_first():
    pieces = {"obs": jnp.array([[[1, 1], [2, 2], [3, 3]]])}
    found = jnp.array([[True, False, True]])
    ordered, found = by_return(pieces, found, jnp.array([[5.0, 9.0, 1.0]]))
    np.testing.assert_array_equal(ordered["obs"][0, :, 0], [2, 3, 1])
    np.testing.assert_array_equal(found, [[False, True, True]])


def test_context_steps_hold_every_retrieved_piece_and_the_window(env):
    algo = RADT(num_retrieved=2, piece_len=4, context_len=3, query_len=2, top_k=5)
    assert algo.context_steps(env) == 2 * 4 + 3


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="algo.query_len must be <="):
        RADT(query_len=6, piece_len=10, context_len=4)
    with pytest.raises(ValueError, match="algo.max_similarity must be in"):
        RADT(max_similarity=0.0)


# ---------------------------------------------------------------- training
def _training_setup(lo):
    """Two histories of task 0, a memory of their pieces, a window of
    history 1 starting at ``lo``."""
    algo = RADT(
        context_len=6, piece_len=4, query_len=3, piece_stride=2, top_k=1000,
        task_weight=0.0, max_similarity=None, query_dropout=0.0, empty_prob=0.0,
        encoder_hidden=16, key_dim=8,
    )  # fmt: skip
    enc = FrozenEncoder.create(0, NUM_OBS, 5, 16, 8)
    rng = np.random.default_rng(3)
    arrays = {
        "obs": rng.integers(0, NUM_OBS, (2, 24)).astype(np.int32),
        "action": rng.integers(0, 5, (2, 24)).astype(np.int32),
        "reward": rng.integers(0, 2, (2, 24)).astype(np.float32),
        "task_id": np.array([0, 0], np.int32),
    }
    memory = build_memory(algo, enc, arrays)
    data = {**{k: jnp.asarray(v) for k, v in arrays.items()}, "encoder": enc}
    data["memory"] = {k: jnp.asarray(v) for k, v in memory.items()}
    index = {"rows": jnp.array([1]), "idx": lo + jnp.arange(6)[None]}
    return algo, enc, arrays, memory, data, index


def _query(enc, arrays, steps):
    """The key of history 1's steps ``steps`` (previous action and reward)."""
    a = np.r_[0, arrays["action"][1]]
    r = np.r_[0.0, arrays["reward"][1]]
    feats = enc.features(
        jnp.asarray(arrays["obs"][1, steps]),
        jnp.asarray(a[steps]),
        jnp.asarray(r[steps], jnp.float32),
    )
    return np.asarray(enc.pool(feats))


@pytest.mark.long
def test_training_retrieves_by_the_windows_last_steps_from_other_histories_too():
    lo = 8
    algo, enc, arrays, mem, data, index = _training_setup(lo)
    entries, found = retrieve_for_training(algo, data, index, jax.random.key(0))
    # by hand: the query is the window's last 3 steps (11, 12, 13); history
    # 1's own pieces only if they end before the window; history 0's all
    query = _query(enc, arrays, np.arange(lo + 3, lo + 6))
    allowed = (mem["row"] != 1) | (mem["start"] + algo.piece_len <= lo)
    sim = np.where(allowed, mem["keys"] @ query, -np.inf)
    best = int(np.argmax(sim))
    assert found[0, 0] and int(entries[0, 0]) == best
    # the case tells the rules apart: the best piece is history 0's, after
    # the window's start; the window's first steps would pick another
    assert mem["row"][best] == 0 and mem["start"][best] + algo.piece_len > lo
    first = _query(enc, arrays, np.arange(lo, lo + 3))
    assert int(np.argmax(np.where(allowed, mem["keys"] @ first, -np.inf))) != best
    assert best != int(np.flatnonzero(allowed)[0])  # not the first candidate


# -------------------------------------------------------------- evaluation
def _agent(env, **changes):
    settings = dict(
        context_len=3, piece_len=4, query_len=2, piece_stride=2, top_k=50,
        encoder_hidden=16, key_dim=4,
    )  # fmt: skip
    return RADTAgent(RADT(**{**settings, **changes}), None, env, 12)


def test_the_agents_query_is_its_last_steps_and_skips_steps_before_the_history(env):
    agent = _agent(env)
    enc = agent.encoder
    state = agent.init(jax.random.split(jax.random.key(0), 1), None)
    state = state._replace(
        obs=state.obs.at[0, :4].set(jnp.array([3, 7, 11, 2])),
        action=state.action.at[0, :4].set(jnp.array([1, 4, 2, 0])),
        reward=state.reward.at[0, :4].set(jnp.array([0.0, 1.0, 0.0, 1.0])),
    )
    # steps 2, 3 with their previous actions and rewards (those of 1, 2)
    want = enc.pool(
        enc.features(jnp.array([11, 2]), jnp.array([4, 2]), jnp.array([1.0, 0.0]))
    )
    np.testing.assert_allclose(agent._query(state, jnp.array([3]))[0], want, atol=1e-6)
    # at step 0 only step 0 itself (no zero-padded step before the history)
    first = enc.pool(enc.features(jnp.array([3]), jnp.array([0]), jnp.array([0.0])))
    np.testing.assert_allclose(agent._query(state, jnp.array([0]))[0], first, atol=1e-6)


def _play(agent, obs, actions, rewards, dones):
    """The agent's state after ``start`` and one ``update`` per step."""
    state = agent.init(jax.random.split(jax.random.key(0), 1), None)
    state = agent.start(state, jnp.array([obs[0]]))
    for t in range(len(actions)):
        step = Step(
            jnp.array([obs[t]]),
            jnp.array([actions[t]]),
            jnp.array([rewards[t]], jnp.float32),
            jnp.array([obs[t + 1]]),
            jnp.array([dones[t]]),
            jnp.array([False]),
            jnp.array([obs[t + 1]]),
        )
        state = agent.update(state, step)
    return state


def test_the_agent_writes_its_history_and_each_pieces_key_once_its_steps_are(env):
    agent = _agent(env)
    obs = [3, 7, 11, 2, 9, 14, 5, 6, 1]
    actions = [1, 4, 2, 0, 3, 3, 1, 2]
    rewards = [0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0]
    dones = [False, False, True, False, False, True, False, False]
    state = _play(agent, obs, actions, rewards, dones)
    assert int(state.count[0]) == 8 and int(state.completed[0]) == 6
    np.testing.assert_array_equal(state.obs[0, :9], obs)
    np.testing.assert_array_equal(state.action[0, :8], actions)
    np.testing.assert_array_equal(state.reward[0, :8], rewards)
    # pieces start at 0, 2, ..; one's key needs its 2 query steps, so keys of
    # pieces starting at 0 .. 6 are written (step 8 is observed), 8 not yet
    whole = piece_keys(
        agent.encoder, state.obs, state.action, state.reward, agent.starts, 2
    )
    written = np.asarray(agent.starts) + 1 <= 8
    np.testing.assert_allclose(state.keys[0, written], whole[0, written], atol=1e-6)
    np.testing.assert_array_equal(state.keys[0, ~written], 0.0)


def _memory_state(agent, keys, reward, completed):
    """A state whose first pieces (starts 0, 2, 4) have ``keys``, with the
    history's rewards ``reward`` (from step 0)."""
    state = agent.init(jax.random.split(jax.random.key(0), 1), None)
    r = np.zeros(state.reward.shape[1], np.float32)
    r[: len(reward)] = reward
    k = np.zeros(state.keys.shape, np.float32)
    k[0, : len(keys)] = keys
    return state._replace(
        reward=jnp.asarray(r)[None],
        keys=jnp.asarray(k),
        completed=jnp.array([completed]),
        count=jnp.array([completed]),
    )


def test_evaluation_rescores_by_min_maxed_similarity_plus_min_maxed_return(env):
    # pieces [0, 4), [2, 6), [4, 8) of 8 finished steps; the near-duplicate
    # cutoff is training's only (the first key is the query itself)
    agent = _agent(env, return_weight=1.0, task_weight=0.0, max_similarity=0.5)
    query = jnp.array([[1.0, 0.0, 0.0, 0.0]])
    keys = [[1.0, 0.0, 0.0, 0.0], [0.9, np.sqrt(0.19), 0, 0], [0.0, 1.0, 0, 0]]
    state = _memory_state(agent, keys, [0.2, 0, 0, 0, 0, 0.25], completed=8)
    rets = np.array([0.2, 0.25, 0.25])  # the rewards inside each piece
    sim = np.array([1.0, 0.9, 0.0])
    mm = lambda x: (x - x.min()) / (x.max() - x.min())  # noqa: E731
    score = mm(sim) + 1.0 * mm(rets)  # [1.0, 1.9, 1.0]: the second piece
    # (raw returns, or similarity alone, would pick the first)
    assert int(np.argmax(score)) == 1
    starts, found, got_rets = agent.retrieve(state, query)
    assert found[0, 0] and int(starts[0, 0]) == 2
    np.testing.assert_allclose(got_rets[0, 0], 0.25, rtol=1e-6)


def test_evaluation_retrieves_only_pieces_of_finished_episodes(env):
    agent = _agent(env)
    keys = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0, 0], [0.0, 0.0, 1.0, 0]]
    state = _memory_state(agent, keys, [1.0] * 8, completed=6)
    state = state._replace(count=jnp.array([9]))  # 9 steps, 6 finished
    starts, found, _ = agent.retrieve(state, jnp.array([[0.0, 0.0, 1.0, 0.0]]))
    # the piece [4, 8) matches best but is not finished: [0, 4) or [2, 6)
    assert found[0, 0] and int(starts[0, 0]) + 4 <= 6


class _Positions:
    """A stand-in model: logit 0 of position t is t; keeps its input."""

    def __call__(self, obs, action, reward):
        self.seen = (obs, action, reward)
        t = jnp.arange(obs.shape[1], dtype=jnp.float32)
        logits = jnp.zeros(obs.shape + (5,)).at[..., 0].set(t)
        return ModelOutput(logits, None, {})


def test_the_agent_reads_the_current_step_after_the_pieces(env):
    model = _Positions()
    algo = RADT(context_len=3, piece_len=4, query_len=2, piece_stride=2, top_k=50,
                encoder_hidden=16, key_dim=4)  # fmt: skip
    agent = RADTAgent(algo, model, env, 12)
    state = agent.init(jax.random.split(jax.random.key(0), 2), None)
    obs = jnp.arange(13)[None].repeat(2, 0) % NUM_OBS
    state = state._replace(obs=obs, count=jnp.array([1, 6]))
    now = obs[jnp.arange(2), jnp.array([1, 6])]
    scores, seen = jax.jit(
        lambda state: (agent.scores(state, now, None, None), model.seen[0])
    )(state)
    # 4 piece steps, then the window: steps 0, 1 (, 2 unused) for count 1;
    # steps 4, 5, 6 for count 6: the current step sits at 4 + 1 and 4 + 2
    np.testing.assert_array_equal(scores[:, 0], [5.0, 6.0])
    window = np.asarray(seen[:, 4:])
    np.testing.assert_array_equal(window[1], [4, 5, 6])
    np.testing.assert_array_equal(window[0, :2], [0, 1])
