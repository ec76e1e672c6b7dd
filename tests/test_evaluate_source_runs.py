"""The data's source learning online on held-out tasks (agentrl.evaluate.source_runs).

- PPO and SAC (learning sources that only run whole) are history sources and
  default baselines; agent sources are not;
- a history source's result is its own learning run on the tasks, from a key
  of its own: the first episodes as the method, the last tenth as its
  converged return, with the other methods' references;
- on a family without an oracle, the data source's converged return becomes
  every result's oracle (normalized scores random 0, converged source 1);
  on one with an oracle, nothing else changes.
"""

from __future__ import annotations

import types

import jax
import numpy as np
import pytest

from agentrl.envs.point_robot import PointRobot
from agentrl.evaluate.evaluate import EvalResult, evaluate_methods
from agentrl.evaluate.report import write_results
from agentrl.evaluate.run import baseline_agent, default_baselines
from agentrl.evaluate.source_runs import (
    SOURCE_SALT,
    add_source_runs,
    is_history_source,
    share_stand_in_oracle,
)
from agentrl.sources import registry
from agentrl.sources.registry import generate

SOURCE = "whole_run_for_test"


class NoOraclePointRobot(PointRobot):
    """Point-Robot whose oracle is hidden, as a MuJoCo family's is missing."""

    @property
    def has_oracle(self) -> bool:
        return False


@pytest.fixture
def whole_run_source():
    """A learning source with no agent: random play, run whole."""

    def histories(env, params, key, num_episodes, task_id, **settings):
        return generate("random", env, params, key, num_episodes, task_id)

    registry.register_source(
        SOURCE, description="test", defaults=None, histories=histories, learns=True
    )
    yield SOURCE
    registry.SOURCES.unregister(SOURCE)


def test_whole_run_learners_are_history_sources(whole_run_source):
    assert is_history_source("ppo") and is_history_source("sac")
    assert is_history_source(whole_run_source)
    assert not is_history_source("q_learning")  # an agent: the driver runs it
    assert not is_history_source("random")  # learns nothing
    assert not is_history_source("no_such_source")
    assert "ppo" in default_baselines(PointRobot(), "ppo")


@pytest.mark.parametrize("env_class", [PointRobot, NoOraclePointRobot])
@pytest.mark.long
def test_source_run_and_its_converged_return(whole_run_source, env_class, tmp_path):
    env = env_class(horizon=5, goals="uniform")
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 3))
    key = jax.random.key(1)
    results = evaluate_methods(
        env, {"random": baseline_agent("random", env, 4)}, params, key, 4
    )
    before = results["random"]
    data = types.SimpleNamespace(source=SOURCE, source_args=(), num_episodes=20)
    add_source_runs(results, env, data, [SOURCE], params, key, 4)

    own = generate("random", env, params, jax.random.fold_in(key, SOURCE_SALT), 20)
    episodes = np.asarray(own.episode_returns(20))
    got = results[SOURCE]
    np.testing.assert_allclose(got.returns, episodes[:, :4], rtol=1e-6)
    converged = episodes[:, -2:].mean(axis=1)  # the last tenth of 20 episodes
    np.testing.assert_allclose(got.metadata["converged_return"], converged, rtol=1e-6)
    np.testing.assert_array_equal(got.random_return, before.random_return)

    if env.has_oracle:  # the env's oracle stays every result's reference
        np.testing.assert_array_equal(got.oracle_return, before.oracle_return)
        assert results["random"] is before and "oracle" not in before.metadata
        return
    for result in results.values():
        assert result.metadata["oracle"] == f"{SOURCE} converged"
        np.testing.assert_allclose(result.oracle_return, converged, rtol=1e-6)
        random = result.random_return[:, None]
        expected = (result.returns - random) / (converged[:, None] - random)
        np.testing.assert_allclose(result.normalized, expected, rtol=1e-5)
    report = write_results(results, tmp_path)["markdown"].read_text()
    assert f"random = 0, {SOURCE} converged = 1" in report  # names its oracle


def _result(returns, oracle=None, label=None, tasks=(3, 5)):
    returns = np.asarray(returns, float)
    metadata = {"task_ids": list(tasks), **({"oracle": label} if label else {})}
    return EvalResult(
        name="m",
        returns=returns,
        random_return=np.zeros(len(returns)),
        oracle_return=None if oracle is None else np.asarray(oracle, float),
        metadata=metadata,
    )


def test_a_method_evaluated_apart_gets_the_stand_in_oracle():
    """The expert-distillation control is evaluated without baselines; on a
    family without an oracle it takes the seed's stand-in, on the same tasks
    only, so its normalized score shares the others' scale."""
    seed = {
        "ad": _result([[1.0, 2.0], [3.0, 4.0]], [4.0, 8.0], "sac converged"),
        "ad/expert_distillation": _result([[2.0, 2.0], [4.0, 4.0]]),
        "elsewhere": _result([[1.0, 1.0], [1.0, 1.0]], tasks=(7, 9)),
    }
    shared = share_stand_in_oracle(seed)
    ed = shared["ad/expert_distillation"]
    assert ed.metadata["oracle"] == "sac converged"
    np.testing.assert_allclose(ed.normalized, [[0.5, 0.5], [0.5, 0.5]])
    assert shared["elsewhere"].oracle_return is None  # other tasks: untouched
    assert shared["ad"] is seed["ad"]
    plain = {"ad": _result([[1.0]], [2.0]), "x": _result([[1.0]])}
    assert share_stand_in_oracle(plain) is plain  # a real oracle: nothing shared
