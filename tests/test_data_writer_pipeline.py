"""The dataset writer's thread and its bytes: same seed, same bytes in two
processes; the next chunk is generated while the last is written; an error
on either side stops the write and leaves nothing behind."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import agentrl.data.features as features
from agentrl import envs
from agentrl.data import open_dataset, write_dataset
from agentrl.sources import source_histories

ENV_ARGS = {"size": 5, "horizon": 6}
ENV = envs.make("darkroom", **ENV_ARGS)
ROOT = Path(__file__).resolve().parent.parent


def _write(path, histories=None, chunk_size=4, num_tasks=12):
    return write_dataset(
        path,
        ENV,
        histories or source_histories("q_learning", ENV),
        num_tasks,
        3,
        0,
        env_name="darkroom",
        env_overrides=ENV_ARGS,
        chunk_size=chunk_size,
    )


def _generate(out: Path, hash_seed: str) -> subprocess.Popen:
    """The issue's command in a process of its own (its own hash seeds)."""
    cmd = [sys.executable, "-m", "agentrl.cli", "data", "generate"]
    cmd += ["--env", "darkroom", "--source", "q_learning", "--tasks", "32"]
    cmd += ["--episodes", "20", "--seed", "0", "--out", str(out)]
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "JAX_PLATFORMS": "cpu"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.Popen(
        cmd, env=env, cwd=out.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


@pytest.mark.long
def test_same_seed_gives_the_same_bytes_in_two_processes(tmp_path):
    """Protobuf's map order is seeded per process: records are serialized
    deterministically, so two processes write the same shard bytes."""
    a, b = tmp_path / "a", tmp_path / "b"
    procs = [_generate(a, "1"), _generate(b, "2")]  # in parallel: half the wait
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out.decode()[-3000:]
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    shards = [n for n in names if "array_record" in n]
    assert shards
    for name in names:
        if name != "agentrl.json":
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
    meta_a, meta_b = (json.loads((d / "agentrl.json").read_text()) for d in (a, b))
    meta_a.pop("created"), meta_b.pop("created")
    assert meta_a == meta_b


def _records(history):
    return list(features.history_records(history))


def _history(rng, dict_obs: bool):
    """Host histories of every feature kind the writer meets: int and float
    arrays, dict observations, bools as uint8, negative and large scalars,
    scalar and array params, optimal actions and stored successors."""
    import numpy as np

    from agentrl.history import History

    tasks, steps = 3, 7
    if dict_obs:
        obs = {
            "image": rng.integers(0, 255, (tasks, steps, 3, 3)).astype(np.uint8),
            "pos": rng.normal(size=(tasks, steps, 2)).astype(np.float32),
        }
    else:
        obs = rng.integers(0, 81, (tasks, steps)).astype(np.int32)
    action = rng.normal(size=(tasks, steps, 2)).astype(np.float32)
    return History(
        obs=obs,
        action=action,
        reward=rng.normal(size=(tasks, steps)).astype(np.float32),
        terminated=rng.random((tasks, steps)) < 0.3,
        truncated=rng.random((tasks, steps)) < 0.3,
        episode=np.repeat(np.arange(steps, dtype=np.int32)[None], tasks, 0),
        optimal_action=action[:, ::-1].copy(),
        task_id=np.array([-1, 2**31 - 1, 300], np.int32),
        params={
            "goal": rng.integers(-5, 5, (tasks, 2)).astype(np.int32),
            "noise": rng.random(tasks).astype(np.float32),
            "arms": np.array([3, 200, -7], np.int32),
        },
        next_obs=obs if dict_obs else None,
    )


@pytest.mark.parametrize("dict_obs", [False, True])
def test_wire_serializer_writes_tfds_bytes(dict_obs):
    """The fast serializer's bytes are TFDS's deterministic serialization's,
    and TFDS decodes them back to the record."""
    import numpy as np

    records = _records(_history(np.random.default_rng(0), dict_obs))
    spec = features.feature_spec(records[0])
    fast, reference = features.record_serializer(spec), features.tfds_serializer(spec)
    for record in records:
        data = fast(record)
        assert data == reference(record)
        decoded = spec.deserialize_example_np(data)
        np.testing.assert_array_equal(decoded["action"], record["action"])
        assert int(decoded["task_id"]) == int(record["task_id"])
        # TFDS's own (hash-ordered) bytes hold the same fields, reordered
        assert sorted(spec.serialize_example(record)) == sorted(data)


def test_wire_serializer_checks_dtypes_and_fields():
    import numpy as np

    record = _records(_history(np.random.default_rng(1), False))[0]
    serialize = features.record_serializer(features.feature_spec(record))
    with pytest.raises(ValueError, match="'reward'"):
        serialize({**record, "reward": record["reward"].astype(np.float64)})
    with pytest.raises(ValueError, match="'action'"):
        serialize({**record, "action": record["action"][:3]})
    with pytest.raises(ValueError, match="differ from the spec"):
        serialize({k: v for k, v in record.items() if k != "episode"})


def test_next_chunk_is_generated_while_the_last_is_written(tmp_path, monkeypatch):
    """The first chunk's encoding waits until the second chunk is asked for:
    a writer that encodes in the generating thread would wait in vain."""
    import threading

    inner = source_histories("q_learning", ENV)
    second_asked = threading.Event()
    calls, waited = [], []

    def histories(params, key, num_episodes, task_id):
        calls.append(threading.get_ident())
        if len(calls) == 2:
            second_asked.set()
        return inner(params, key, num_episodes, task_id)

    real_records = features.history_records

    def slow_records(history):
        if not waited:
            waited.append(second_asked.wait(timeout=20))
        yield from real_records(history)

    monkeypatch.setattr(features, "history_records", slow_records)
    path = _write(tmp_path / "p", histories)
    assert waited == [True]
    assert len(calls) == 3
    ds = open_dataset(path)
    assert ds.num_records("train") == 12


def test_an_error_while_writing_stops_the_write(tmp_path, monkeypatch):
    def broken(history):
        raise RuntimeError("cannot encode")
        yield

    monkeypatch.setattr(features, "history_records", broken)
    with pytest.raises(RuntimeError, match="cannot encode"):
        _write(tmp_path / "e")
    assert list(tmp_path.iterdir()) == []


def test_an_error_while_generating_stops_the_write(tmp_path):
    inner = source_histories("q_learning", ENV)
    calls = []

    def failing(params, key, num_episodes, task_id):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("source failed")
        return inner(params, key, num_episodes, task_id)

    with pytest.raises(RuntimeError, match="source failed"):
        _write(tmp_path / "g", failing)
    assert list(tmp_path.iterdir()) == []
