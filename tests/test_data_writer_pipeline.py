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

    real_columns = features.history_columns

    def slow_columns(history):
        if not waited:
            waited.append(second_asked.wait(timeout=20))
        return real_columns(history)

    monkeypatch.setattr(features, "history_columns", slow_columns)
    path = _write(tmp_path / "p", histories)
    assert waited == [True]
    assert len(calls) == 3
    ds = open_dataset(path)
    assert ds.num_records("train") == 12


def test_an_error_while_writing_stops_the_write(tmp_path, monkeypatch):
    def broken(history):
        raise RuntimeError("cannot encode")

    monkeypatch.setattr(features, "history_columns", broken)
    with pytest.raises(RuntimeError, match="cannot encode"):
        _write(tmp_path / "e")
    assert list(tmp_path.iterdir()) == []


def _failing_source(at_call: int):
    """Q-learning histories that raise at the ``at_call``-th chunk."""
    inner = source_histories("q_learning", ENV)
    calls = []

    def failing(params, key, num_episodes, task_id):
        calls.append(1)
        if len(calls) == at_call:
            raise RuntimeError("source failed")
        return inner(params, key, num_episodes, task_id)

    return failing


def test_an_error_while_generating_stops_the_write(tmp_path):
    with pytest.raises(RuntimeError, match="source failed"):
        _write(tmp_path / "g", _failing_source(at_call=2))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("dict_obs", [False, True])
def test_chunk_serializer_writes_the_record_serializers_bytes(dict_obs):
    """A chunk's records encoded at once (no loop over records) are the
    bytes of each record encoded alone: negative, large and small integer
    scalars (varints of 1 to 10 bytes), dict observations, bools."""
    import numpy as np

    history = _history(np.random.default_rng(2), dict_obs)
    records = _records(history)
    spec = features.feature_spec(records[0])
    one = features.record_serializer(spec)
    chunk = features.records_serializer(spec)(features.history_columns(history))
    assert chunk == [one(record) for record in records]
    columns = features.history_columns(history)
    with pytest.raises(ValueError, match="'reward'"):
        features.records_serializer(spec)(
            {**columns, "reward": columns["reward"].astype(np.float64)}
        )


def _old_shard(path, history):
    """The shard the writer wrote before chunks were encoded at once: one
    record at a time, each encoded alone."""
    from array_record.python.array_record_module import ArrayRecordWriter

    records = _records(history)
    serialize = features.record_serializer(features.feature_spec(records[0]))
    writer = ArrayRecordWriter(str(path), "group_size:1")
    for record in records:
        writer.write(serialize(record))
    writer.close()
    return path.read_bytes()


def _box_history(num_tasks, seed):
    """Host histories with Box (float) observations and continuous actions."""
    import numpy as np

    from agentrl.history import History

    rng = np.random.default_rng(seed)
    steps = 10
    obs = rng.normal(size=(num_tasks, steps, 3)).astype(np.float32)
    return History(
        obs=obs,
        action=rng.normal(size=(num_tasks, steps, 2)).astype(np.float32),
        reward=rng.normal(size=(num_tasks, steps)).astype(np.float32),
        terminated=np.zeros((num_tasks, steps), bool),
        truncated=np.tile(np.arange(steps) % 5 == 4, (num_tasks, 1)),
        episode=np.tile(np.arange(steps, dtype=np.int32) // 5, (num_tasks, 1)),
        optimal_action=None,
        task_id=np.arange(num_tasks, dtype=np.int32) * 37,
        params={"goal": rng.normal(size=(num_tasks, 2)).astype(np.float32)},
        next_obs=obs + 1,
    )


def _write_box(path, num_tasks=30, chunk=7):
    from agentrl.data import write_histories

    histories = _box_history(num_tasks, 0)
    chunks = [
        jax_tree_slice(histories, s, min(s + chunk, num_tasks))
        for s in range(0, num_tasks, chunk)
    ]
    meta = {"task_ids": {"train": list(range(num_tasks))}}
    return write_histories(path, {"train": chunks}, meta), histories


def jax_tree_slice(tree, lo, hi):
    import jax

    return jax.tree.map(lambda x: x[lo:hi], tree)


def _shards(path):
    return {
        p.name: p.read_bytes()
        for p in sorted(path.iterdir())
        if "array_record" in p.name
    }


def _read_records(shard_files):
    """``{split: [record bytes]}`` of shard files ``{name: bytes}``, in order."""
    import tempfile

    from array_record.python.array_record_module import ArrayRecordReader

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in sorted(shard_files.items()):
            path = Path(tmp) / name
            path.write_bytes(data)
            reader = ArrayRecordReader(str(path))
            split = name.split("-")[1].split(".")[0]
            out.setdefault(split, []).extend(reader.read_all())
            reader.close()
    return out


def _bandit(path, **kw):
    env = envs.make("gaussian_bandit", num_arms=5, horizon=20)
    histories = source_histories("dpt_rollin", env)
    return write_dataset(
        path, env, histories, 24, 1, 0, env_name="gaussian_bandit", chunk_size=5, **kw
    )


def test_one_shard_has_the_bytes_of_a_record_by_record_write(tmp_path):
    """A split that fits in one shard: the same file as the writer wrote when
    it encoded one record at a time (Box observations here; the bandit's
    discrete ones in test_sharded_splits_decode_equal_...)."""
    path, histories = _write_box(tmp_path / "box")
    (name,) = _shards(path)
    assert name.endswith("-00000-of-00001")
    assert (path / name).read_bytes() == _old_shard(tmp_path / "old", histories)


@pytest.mark.parametrize("write", [_bandit, _write_box], ids=["bandit", "box"])
def test_sharded_splits_decode_equal_and_do_not_depend_on_the_workers(
    tmp_path, monkeypatch, write
):
    """A split larger than SHARD_BYTES is cut into shards: the decoded
    dataset is the one-shard dataset's, and the files are the same whether
    this thread writes them or a pool of processes does."""
    import jax
    import numpy as np

    import agentrl.data.shards as shards

    one = write(tmp_path / "one")
    one = one[0] if isinstance(one, tuple) else one
    monkeypatch.setattr(shards, "SHARD_BYTES", 2000)
    files = {}
    for workers in (1, 3):
        monkeypatch.setattr(shards, "shard_workers", lambda w=workers: w)
        out = write(tmp_path / f"w{workers}")
        out = out[0] if isinstance(out, tuple) else out
        files[workers] = _shards(out)
        assert len(files[workers]) > 3
    assert files[1] == files[3]
    # the same records, in the same order, as the one shard holds
    assert _read_records(_shards(one)) == _read_records(files[1])
    if write is _bandit:
        a, b = open_dataset(one), open_dataset(out)
        assert a.splits == b.splits
        for split in a.splits:
            jax.tree.map(
                np.testing.assert_array_equal,
                a.load_history(split),
                b.load_history(split),
            )
    if write is _bandit:  # one shard: the record-by-record write's bytes
        for split in a.splits:
            (name,) = [n for n in _shards(one) if f"-{split}." in n]
            history = a.load_history(split)
            assert (one / name).read_bytes() == _old_shard(tmp_path / split, history)


def test_an_error_while_generating_stops_the_shard_processes(tmp_path, monkeypatch):
    """Sharded and written by processes: a failing source still leaves
    nothing behind (the processes stop before the directory goes)."""
    import agentrl.data.shards as shards

    monkeypatch.setattr(shards, "SHARD_BYTES", 500)
    monkeypatch.setattr(shards, "shard_workers", lambda: 2)
    with pytest.raises(RuntimeError, match="source failed"):
        _write(tmp_path / "g", _failing_source(at_call=3))
    assert list(tmp_path.iterdir()) == []


_THREAD_IMPORT_PROBE = """
import sys, threading
from agentrl import envs
from agentrl.data import write_dataset
from agentrl.sources import source_histories
assert "tensorflow_datasets" not in sys.modules, "imported before the write"
seen = []
real_start = threading.Thread.start
def start(thread):
    if thread.name.startswith("agentrl-shards"):
        seen.append("tensorflow_datasets" in sys.modules)
    real_start(thread)
threading.Thread.start = start
env = envs.make("darkroom", size=5, horizon=6)
write_dataset(sys.argv[1], env, source_histories("q_learning", env), 4, 2, 0,
              env_name="darkroom", env_overrides={"size": 5, "horizon": 6})
print("seen", seen)
"""


def test_tfds_is_imported_before_the_shard_thread_starts(tmp_path):
    """TFDS imports itself under etils' ``lazy_imports``, which swaps
    ``builtins.__import__`` for every thread: imported first inside the
    shard thread, it handed the generating thread's JAX imports lazy
    stand-ins (a GPU run failed so). A fresh process: TFDS is loaded before
    each shard thread starts."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-c", _THREAD_IMPORT_PROBE, str(tmp_path / "d")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = proc.stdout.strip().splitlines()[-1]
    assert seen.startswith("seen [True"), seen
    assert "False" not in seen, seen
