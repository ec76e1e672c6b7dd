"""Return against the task parameter: the final episode, sorted, every run recorded."""

import numpy as np

from agentrl.evaluate import EvalResult
from agentrl.evaluate.task_parameter import (
    final_returns_by_parameter,
    has_task_parameter,
)


def _run(values, returns):
    meta = {"task_parameter": {"name": "goal angle", "values": list(values)}}
    return EvalResult("m", np.asarray(returns, float), metadata=meta)


def test_final_episode_returns_are_pooled_and_sorted_by_the_parameter():
    runs = [
        _run([0.5, -1.0], [[9.0, 1.0], [9.0, 2.0]]),
        _run([0.0], [[9.0, 3.0]]),
    ]
    x, y = final_returns_by_parameter(runs)
    np.testing.assert_array_equal(x, [-1.0, 0.0, 0.5])
    np.testing.assert_array_equal(y, [2.0, 3.0, 1.0])


def test_the_plot_needs_every_run_to_record_the_parameter():
    recorded = _run([0.5], [[1.0]])
    bare = EvalResult("m", np.ones((1, 1)))
    assert has_task_parameter({"a": [recorded], "b": [recorded]})
    assert not has_task_parameter({"a": [recorded], "b": [recorded, bare]})
