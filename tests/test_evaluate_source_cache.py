"""Source runs kept in a folder and read back (agentrl.evaluate.source_cache).

- a run made with a folder is stored there, and the same run asked again is
  read, not recomputed, and equals the uncached run bit for bit;
- a change to any input (key, tasks, settings, episode count, family
  arguments) is a miss, and so is a change to the code defining the source;
  a setting the source declares ``record_only`` is not an input, and PPO's
  and SAC's DPT labels are indeed no input of their runs (long);
- an unreadable entry, or one made from other inputs, is recomputed and
  replaced;
- ``agentrl eval --source-cache`` refuses a file, with exit 2.
"""

from __future__ import annotations

import importlib.util
import json
import types

import jax
import numpy as np
import pytest

from agentrl.cli import main
from agentrl.envs.point_robot import PointRobot
from agentrl.evaluate.source_runs import source_run
from agentrl.provenance import code_digest
from agentrl.sources import registry
from agentrl.sources.registry import SOURCES, generate

SOURCE = "counted_whole_run_for_test"
ENV_KEY = json.dumps(["point_robot", {"horizon": 5}])


@pytest.fixture
def counted_source():
    """A whole-run source (random play) that counts how often it runs."""
    calls = []

    def histories(env, params, key, num_episodes, task_id, **settings):
        calls.append(num_episodes)
        return generate("random", env, params, key, num_episodes, task_id)

    registry.register_source(
        SOURCE,
        description="test",
        defaults={"scale": 1.0, "note": "a"},
        histories=histories,
        learns=True,
        record_only=("note",),
    )
    yield calls
    registry.SOURCES.unregister(SOURCE)


def _inputs(num_tasks=3, seed=0):
    env = PointRobot(horizon=5, goals="uniform")
    params = jax.vmap(env.sample_params)(
        jax.random.split(jax.random.key(seed), num_tasks)
    )
    data = types.SimpleNamespace(source=SOURCE, source_args=(), num_episodes=6)
    return env, params, data


def test_a_stored_run_is_read_back_equal(counted_source, tmp_path):
    env, params, data = _inputs()
    plain = source_run(env, data, SOURCE, params, jax.random.key(1), 4)
    first = source_run(env, data, SOURCE, params, jax.random.key(1), 4,
                       (tmp_path, ENV_KEY))  # fmt: skip
    assert len(counted_source) == 2 and len(list(tmp_path.glob("*.json"))) == 1
    again = source_run(env, data, SOURCE, params, jax.random.key(1), 4,
                       (tmp_path, ENV_KEY))  # fmt: skip
    assert len(counted_source) == 2  # read, not run
    for got in (first, again):
        for a, b in zip(got, plain, strict=True):
            np.testing.assert_array_equal(a, b)
    # fewer episodes of the same run: the stored run serves them
    short = source_run(env, data, SOURCE, params, jax.random.key(1), 2,
                       (tmp_path, ENV_KEY))  # fmt: skip
    assert len(counted_source) == 2
    np.testing.assert_array_equal(short[0], plain[0][:, :2])


def test_every_input_is_part_of_the_key(counted_source, tmp_path):
    env, params, data = _inputs()
    cache = (tmp_path, ENV_KEY)
    source_run(env, data, SOURCE, params, jax.random.key(1), 4, cache)
    _, other_tasks, _ = _inputs(seed=5)
    changed = {
        "key": dict(key=jax.random.key(2)),
        "tasks": dict(params=other_tasks),
        "settings": dict(data=types.SimpleNamespace(
            source=SOURCE, source_args=(("scale", 2.0),), num_episodes=6)),
        "episodes": dict(num_episodes=9),  # longer than the data's 6
        "family": dict(cache=(tmp_path, json.dumps(["point_robot", {"horizon": 6}]))),
    }  # fmt: skip
    for n, (what, change) in enumerate(changed.items(), start=2):
        args = dict(env=env, data=data, name=SOURCE, params=params,
                    key=jax.random.key(1), num_episodes=4, cache=cache)  # fmt: skip
        source_run(**{**args, **change})
        assert len(counted_source) == n, what
    assert len(list(tmp_path.glob("*.json"))) == 1 + len(changed)
    noted = types.SimpleNamespace(
        source=SOURCE, source_args=(("note", "b"),), num_episodes=6
    )
    source_run(env, noted, SOURCE, params, jax.random.key(1), 4, cache)
    assert len(counted_source) == 1 + len(changed)  # record-only: the same run


@pytest.mark.long  # four compiles of the learners
@pytest.mark.parametrize("source", ["ppo", "sac"])
def test_dpt_labels_do_not_change_the_run(source):
    """What ``record_only=("labels",)`` claims: the run's actions and rewards
    are bit-identical whichever labels are recorded beside them."""
    assert SOURCES[source].record_only == ("labels",)
    env = PointRobot(horizon=5, goals="uniform")
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 2))
    fast = {"ppo": {}, "sac": {"hidden": 32, "batch_size": 32}}[source]
    runs = [
        generate(source, env, params, jax.random.key(1), 8, labels=labels, **fast)
        for labels in ("none", "final_policy")
    ]
    for field in ("action", "reward", "obs"):
        np.testing.assert_array_equal(
            getattr(runs[0], field), getattr(runs[1], field), err_msg=field
        )


def test_the_code_defining_a_plug_in_is_part_of_the_key(tmp_path):
    module = tmp_path / "my_source.py"

    def digest(text):
        module.write_text(text)
        spec = importlib.util.spec_from_file_location("my_source", module)
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        return code_digest([loaded.histories])

    first = digest("def histories():\n    return 1\n")
    assert digest("def histories():\n    return 1\n") == first
    assert digest("def histories():\n    return 2\n") != first
    assert code_digest([]) != first  # the plug-in's file counts


def test_a_broken_or_foreign_entry_is_recomputed(counted_source, tmp_path):
    env, params, data = _inputs()
    cache = (tmp_path, ENV_KEY)
    plain = source_run(env, data, SOURCE, params, jax.random.key(1), 4)
    source_run(env, data, SOURCE, params, jax.random.key(1), 4, cache)
    (entry,) = tmp_path.glob("*.json")
    stored = json.loads(entry.read_text())
    forged = {**stored, "fields": {**stored["fields"], "num_episodes": 99}}
    for text in ("{not json", json.dumps(forged)):
        entry.write_text(text)
        runs = len(counted_source)
        got = source_run(env, data, SOURCE, params, jax.random.key(1), 4, cache)
        assert len(counted_source) == runs + 1
        np.testing.assert_array_equal(got[0], plain[0])
        assert json.loads(entry.read_text())["fields"] == stored["fields"]


def test_eval_refuses_a_file_as_the_source_cache(tmp_path, capsys):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    code = main(["eval", str(tmp_path), "--source-cache", str(not_a_folder)])
    assert code == 2
    assert "--source-cache" in capsys.readouterr().err
