"""DPT's uniform roll-in: independent uniform transitions, stored successors."""

import jax
import numpy as np
import pytest

from agentrl import envs
from agentrl.data import DPTSampler, open_dataset, write_dataset
from agentrl.envs import grid
from agentrl.sources import generate, source_histories

SIZE, HORIZON = 5, 8
ROOM = envs.make("darkroom", size=SIZE, horizon=HORIZON)


def _tasks(n):
    ids = jax.numpy.arange(n) % ROOM.num_tasks
    return jax.vmap(ROOM.params_for_task)(ids), ids


@pytest.mark.long
def test_transitions_start_uniformly_and_are_labelled_by_the_oracle():
    params, ids = _tasks(4)
    h = generate(
        "dpt_rollin", ROOM, params, jax.random.key(0), 50, ids, rollin="uniform"
    )
    assert h.next_obs is not None and h.next_obs.shape == h.obs.shape == (4, 400)
    obs, nxt = np.asarray(h.obs), np.asarray(h.next_obs)
    # the next step does not continue from the successor: not a trajectory
    assert np.mean(obs[:, 1:] == nxt[:, :-1]) < 0.3
    counts = np.bincount(obs.ravel(), minlength=SIZE * SIZE)
    assert counts.min() > 0.5 * counts.mean()  # every cell, roughly uniformly
    for task in range(4):
        goal = grid.cell_pos(ids[task], SIZE)
        for t in range(0, 400, 7):
            pos = grid.cell_pos(obs[task, t], SIZE)
            moved = grid.move(pos, h.action[task, t], SIZE)
            assert int(grid.cell_id(moved, SIZE)) == nxt[task, t]
            assert float(h.reward[task, t]) == float((moved == goal).all())
            assert int(h.optimal_action[task, t]) == int(grid.steer(pos, goal))
    assert not np.asarray(h.terminated).any()
    ends = np.asarray(h.truncated)[0]
    assert ends.sum() == 50 and ends[HORIZON - 1] and ends[-1]
    assert np.asarray(h.episode)[0, -1] == 49


@pytest.mark.long
def test_dataset_keeps_successors_and_contexts_use_every_step(tmp_path):
    uniform = source_histories("dpt_rollin", ROOM, rollin="uniform")
    path = write_dataset(tmp_path / "u", ROOM, uniform, 12, 2, 0, chunk_size=12)
    ds = open_dataset(path)
    assert ds.metadata["has_next_obs"] and ds.metadata["source"]["settings"] == {
        "concentration": 1.0,
        "rollin": "uniform",
    }
    # every step has a stored successor, so the context may span all 16 steps
    s = DPTSampler(ds, 6, context_size=2 * HORIZON, seed=1)
    b = s.batch(0)
    stored = ds.load_history("train")
    ids = list(ds.task_ids("train"))
    for row in range(6):
        record = ids.index(int(b["task_id"][row]))
        want_obs, want_next = stored.obs[record], stored.next_obs[record]
        np.testing.assert_array_equal(b["context_obs"][row], want_obs)
        np.testing.assert_array_equal(b["context_next_obs"][row], want_next)
    # a trajectory dataset of the same size holds one successor less per episode
    trajectory = source_histories("dpt_rollin", ROOM)
    traj = write_dataset(tmp_path / "t", ROOM, trajectory, 12, 2, 0, chunk_size=12)
    with pytest.raises(ValueError, match=r"must be an integer in \[1, 14\]"):
        DPTSampler(open_dataset(traj), 6, context_size=2 * HORIZON)


@pytest.mark.parametrize(
    "env, match",
    [
        (envs.make("gaussian_bandit", horizon=10), "must be 'trajectory' on bandits"),
        (envs.make("dark_key_to_door"), "needs an environment with `uniform_state`"),
    ],
)
def test_uniform_rollin_is_refused_where_it_does_not_apply(env, match):
    params = jax.tree.map(lambda x: x[None], env.default_params)
    with pytest.raises(ValueError, match=match):
        generate("dpt_rollin", env, params, jax.random.key(0), 1, rollin="uniform")


def test_unknown_rollin_is_refused():
    params, ids = _tasks(1)
    with pytest.raises(ValueError, match="`rollin` must be one of"):
        generate("dpt_rollin", ROOM, params, jax.random.key(0), 1, ids, rollin="walk")
