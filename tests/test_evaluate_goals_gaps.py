"""Per-goal scores: the last episodes' normalized score, tasks without one left out."""

import numpy as np

from agentrl import envs
from agentrl.evaluate import EvalResult
from agentrl.evaluate.goals import by_distance, goal_grid, per_goal

NAN = np.nan
# two seeds' tasks: goals (5, 4), (0, 0), (8, 8) and (8, 8), (5, 4), (0, 0)
IDS = [[4 * 9 + 5, 0, 80], [80, 4 * 9 + 5, 0]]
NORMALIZED = [
    [[0.0, 0.2, 0.4], [0.9, 0.1, 0.3], [NAN, NAN, NAN]],
    [[0.5, 0.5, 0.5], [0.0, 0.0, 0.0], [1.0, 1.0, 0.0]],
]


def _runs():
    # returns unlike the scores: the normalized score is what is read
    return [EvalResult("m", np.full((3, 3), 7.0), np.array(n)) for n in NORMALIZED]


def test_scores_are_the_last_episodes_mean_and_nan_is_left_out():
    env = envs.make("darkroom")  # 9x9, start (4, 4)
    cells = per_goal(env, _runs(), IDS, last_k=2)
    assert set(cells) == {(5, 4), (0, 0), (8, 8)}
    np.testing.assert_allclose(cells[(5, 4)], [0.3, 0.0])
    np.testing.assert_allclose(cells[(0, 0)], [0.2, 0.5])
    np.testing.assert_allclose(cells[(8, 8)], [NAN, 0.5])
    grid = goal_grid(9, cells)  # [y, x]; a NaN pair does not blank its cell
    np.testing.assert_allclose([grid[4, 5], grid[0, 0], grid[8, 8]], [0.15, 0.35, 0.5])
    rows = by_distance(env, _runs(), IDS, last_k=2)
    # Manhattan distances from (4, 4): 1 for (5, 4), 8 for the corners
    assert [(r["distance"], r["pairs"]) for r in rows] == [(1, 2), (8, 3)]
    np.testing.assert_allclose([r["mean"] for r in rows], [0.15, 0.4])
