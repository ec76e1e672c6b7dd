"""The host sampler: distinct batches per seed and step; DPT queries span histories."""

import numpy as np

from agentrl.data import ADSampler, DPTSampler, open_dataset
from agentrl.data.writer import write_histories
from agentrl.history import History


def test_seed_and_step_are_not_interchangeable(darkroom_dataset):
    """Seed 0's batch of step 1 is not seed 1's batch of step 0 (two seeds of
    a sweep would otherwise train on the same batches one step apart)."""
    dataset = open_dataset(darkroom_dataset)

    def window_index(seed, step):
        sampler = ADSampler(dataset, 8, num_episodes=2, seed=seed)
        return sampler.window_index(step)

    for a, b in [((0, 1), (1, 0)), ((2, 3), (3, 2)), ((1, 4), (4, 1))]:
        rows_a, idx_a, _ = window_index(*a)
        rows_b, idx_b, _ = window_index(*b)
        assert not (np.array_equal(rows_a, rows_b) and np.array_equal(idx_a, idx_b))


def test_a_history_query_is_drawn_from_every_step(tmp_path):
    """``query="history"``: uniform over the whole history, its last
    ``context_size`` steps included (labels here are the step index)."""
    steps, context = 6, 4
    s = np.broadcast_to(np.arange(steps), (2, steps))
    zeros = np.zeros((2, steps), np.int32)
    history = History(
        obs=zeros,
        action=zeros,
        reward=np.zeros((2, steps), np.float32),
        terminated=zeros.astype(bool),
        truncated=np.ones((2, steps), bool),
        episode=s.astype(np.int32),
        optimal_action=s.astype(np.int32),
        task_id=np.array([0, 1], np.int32),
        params={"means": np.zeros((2, 3), np.float32)},
    )
    meta = {
        "env": {"name": "gaussian_bandit", "overrides": {"horizon": 1}},
        "source": {"name": "hand", "settings": {}},
        **{"seed": 0, "num_tasks": 2, "num_episodes": steps, "horizon": 1},
        **{"num_steps": steps, "stateless_obs": True, "task_space": "continuous"},
        "task_ids": {"train": [0, 1]},
        "split": {"train": [], "validation": [], "test": [], "seed": 0},
    }
    meta["split"]["train_fraction"] = 0.8
    dataset = open_dataset(write_histories(tmp_path / "d", {"train": [history]}, meta))
    sampler = DPTSampler(dataset, 16, context, seed=0)
    labels = np.concatenate([sampler.batch(step)["label"] for step in range(4)])
    assert set(labels.tolist()) == set(range(steps))
