"""A source run as a baseline: its length, converged tenth, settings, stored entry."""

from __future__ import annotations

import json
import types

import jax
import numpy as np

from agentrl.envs.point_robot import PointRobot
from agentrl.evaluate.evaluate import evaluate_methods
from agentrl.evaluate.run import baseline_agent
from agentrl.evaluate.source_cache import cached_returns
from agentrl.evaluate.source_runs import SOURCE_SALT, add_source_runs, source_run
from agentrl.sources.registry import generate

ENV = PointRobot(horizon=3, goals="uniform")


class NoOracle(PointRobot):
    @property
    def has_oracle(self) -> bool:
        return False


def _params(env, seed):
    return jax.vmap(env.sample_params)(jax.random.split(jax.random.key(seed), 2))


def _data(source, num_episodes, **settings):
    return types.SimpleNamespace(
        source=source, source_args=tuple(settings.items()), num_episodes=num_episodes
    )


def test_the_run_covers_the_evaluation_and_converged_is_at_least_one_episode():
    """Evaluated for 5 episodes on data of 3: the run lasts 5, and its last
    tenth (0.5, rounded to 0) is its last episode."""
    params, key = _params(ENV, 0), jax.random.key(1)
    returns, converged = source_run(ENV, _data("random", 3), "random", params, key, 5)
    own = generate("random", ENV, params, jax.random.fold_in(key, SOURCE_SALT), 5)
    episodes = np.asarray(own.episode_returns(5))
    np.testing.assert_allclose(returns, episodes, rtol=1e-6)
    np.testing.assert_allclose(converged, episodes[:, -1], rtol=1e-6)


def test_only_the_datas_source_gets_the_datas_settings():
    params, key = _params(ENV, 2), jax.random.key(3)
    data = _data("ppo", 2, lr=0.01)  # no setting of `random`'s
    returns, _ = source_run(ENV, data, "random", params, key, 2)
    own = generate("random", ENV, params, jax.random.fold_in(key, SOURCE_SALT), 2)
    np.testing.assert_allclose(returns, own.episode_returns(2), rtol=1e-6)


def test_another_sources_converged_return_is_no_oracle():
    """Without an oracle only the data's source stands in for one."""
    env = NoOracle(horizon=3, goals="uniform")
    params, key = _params(env, 4), jax.random.key(5)
    methods = {"rand": baseline_agent("random", env, 2)}
    results = evaluate_methods(env, methods, params, key, 2)
    add_source_runs(results, env, _data("ppo", 2), ["random"], params, key, 2)
    assert set(results) == {"rand", "random"}
    for result in results.values():
        assert result.oracle_return is None and "oracle" not in result.metadata


def test_a_stored_entry_that_is_no_task_by_episode_table_is_recomputed(tmp_path):
    fields = {"source": "s", "num_episodes": 2}
    calls = []

    def compute():
        calls.append(1)
        return np.array([[1.0, 2.0], [3.0, 4.0]])

    cached_returns(tmp_path, fields, compute)
    (entry,) = tmp_path.glob("s-*.json")
    stored = json.loads(entry.read_text())
    entry.write_text(json.dumps({**stored, "returns": [1.0, 2.0]}))  # 1-D
    got = cached_returns(tmp_path, fields, compute)
    assert len(calls) == 2
    np.testing.assert_array_equal(got, [[1.0, 2.0], [3.0, 4.0]])
