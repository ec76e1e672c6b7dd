"""Return against the task parameter (agentrl.evaluate.task_parameter).

- Point-Robot exposes the optional protocol: the goal angle on the half
  circle, the goal's distance from the origin for uniform goals;
- an evaluation records the tasks' values in every result's metadata, and
  ``write_results`` draws ``return_vs_task.png`` from them beside the other
  plots (final-episode return per task, one line per method);
- a family without the protocol gets no such plot.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl.envs.point_robot import PointRobot
from agentrl.evaluate.evaluate import EvalResult, evaluate_methods
from agentrl.evaluate.report import write_results
from agentrl.evaluate.run import baseline_agent
from agentrl.evaluate.task_parameter import (
    final_returns_by_parameter,
    task_parameter,
)


def test_point_robot_task_parameter():
    circle = PointRobot(num_goals=4)
    name, angles = task_parameter(
        circle, jax.vmap(circle.params_for_task)(jnp.arange(4))
    )
    assert "angle" in name
    np.testing.assert_allclose(angles, np.pi * (np.arange(4) + 0.5) / 4, rtol=1e-5)
    square = PointRobot(goals="uniform")
    params = jax.vmap(square.sample_params)(jax.random.split(jax.random.key(0), 5))
    name, dist = task_parameter(square, params)
    assert "distance" in name
    np.testing.assert_allclose(dist, np.linalg.norm(params.goal, axis=-1), rtol=1e-5)


@pytest.mark.long
def test_evaluation_writes_return_vs_task(tmp_path):
    env = PointRobot(horizon=5, goals="uniform")
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(1), 6))
    methods = {name: baseline_agent(name, env, 2) for name in ("random", "oracle")}
    results = evaluate_methods(env, methods, params, jax.random.key(2), 2)
    expected = np.linalg.norm(np.asarray(params.goal), axis=-1)
    for result in results.values():
        recorded = result.metadata["task_parameter"]
        assert "distance" in recorded["name"]
        np.testing.assert_allclose(recorded["values"], expected, rtol=1e-5)
    x, y = final_returns_by_parameter([results["oracle"]])
    assert np.all(np.diff(x) >= 0)  # sorted by the parameter
    order = np.argsort(expected, kind="stable")
    np.testing.assert_allclose(y, results["oracle"].returns[order, -1])
    paths = write_results(results, tmp_path)
    png = paths["return_vs_task"]
    assert png == tmp_path / "return_vs_task.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "return_vs_task.png" in paths["markdown"].read_text()


def test_no_plot_without_the_protocol(tmp_path):
    result = EvalResult(name="random", returns=np.zeros((3, 2)))
    paths = write_results({"random": result}, tmp_path)
    assert "return_vs_task" not in paths
    assert not (tmp_path / "return_vs_task.png").exists()
