"""The dataset format: byte-identical rewrites, public readers, streaming writes."""

import json
import subprocess
import sys
import weakref

import jax
import numpy as np

from agentrl import envs
from agentrl.data import open_dataset, write_dataset
from agentrl.sources import source_histories

ENV_ARGS = {"size": 5, "horizon": 6}
ENV = envs.make("darkroom", **ENV_ARGS)


def _write(path, seed=0, **kw):
    return write_dataset(
        path,
        ENV,
        kw.pop("histories", source_histories("q_learning", ENV)),
        20,
        5,
        seed,
        env_name="darkroom",
        env_overrides=ENV_ARGS,
        chunk_size=kw.pop("chunk_size", 8),
        **kw,
    )


def test_same_seed_gives_byte_identical_files(tmp_path):
    a, b = _write(tmp_path / "a"), _write(tmp_path / "b")
    c = _write(tmp_path / "c", seed=1)
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    assert {"dataset_info.json", "features.json", "agentrl.json"} <= set(names)
    for name in names:
        if name != "agentrl.json":
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
    meta_a, meta_b = (json.loads((d / "agentrl.json").read_text()) for d in (a, b))
    meta_a.pop("created"), meta_b.pop("created")
    assert meta_a == meta_b
    shard = next(n for n in names if "array_record" in n)
    assert (a / shard).read_bytes() != (c / shard).read_bytes()


def test_tfds_and_grain_read_it_without_tensorflow(tmp_path):
    path = _write(tmp_path / "d")
    code = f"""
import sys
import grain
import tensorflow_datasets as tfds
from agentrl.data import open_dataset

builder = tfds.builder_from_directory({str(path)!r})
source = builder.as_data_source(split="train")
assert len(source) == 20, len(source)
ds = open_dataset({str(path)!r})
record = ds.record("train", 3)
loader = grain.MapDataset.source(source).map(lambda r: r["task_id"])
ids = list(loader)
assert ids == [int(i) for i in ds.task_ids("train")], ids
assert (source[3]["action"] == record["action"]).all()
print("TF" if "tensorflow" in sys.modules else "NO-TF")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("NO-TF"), out.stdout


def test_writing_holds_one_chunk_at_a_time(tmp_path):
    inner = source_histories("q_learning", ENV)
    alive = []
    seen = []

    def histories(params, key, num_episodes, task_id):
        # chunks before the previous one must be gone when the next is made
        seen.append(sum(r() is not None for r in alive[:-1]))
        history = inner(params, key, num_episodes, task_id)
        alive.append(weakref.ref(history.reward))
        return history

    path = _write(tmp_path / "s", histories=histories, chunk_size=4)
    assert len(seen) == 5 and max(seen) == 0, seen
    assert open_dataset(path).num_records("train") == 20
    np.testing.assert_array_equal(
        open_dataset(path).task_ids("train"),
        jax.device_get(open_dataset(_write(tmp_path / "t")).task_ids("train")),
    )
