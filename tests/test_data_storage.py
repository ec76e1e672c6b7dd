"""TFDS ArrayRecord datasets: round trip, determinism, atomicity, tamper checks."""

import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs
from agentrl.cli import main as cli_main
from agentrl.data import DatasetIntegrityError, open_dataset, plan_tasks, write_dataset
from agentrl.sources import source_histories
from agentrl.sources.registry import generate

ENV_ARGS = {"size": 5, "horizon": 6}
ENV = envs.make("darkroom", **ENV_ARGS)  # one object: jit caches by env identity


def _write(path, seed=0, **kw):
    env = ENV
    kw = {"chunk_size": 8, **kw}
    return write_dataset(
        path,
        env,
        source_histories("q_learning", env),
        20,
        5,
        seed,
        env_name="darkroom",
        env_overrides=ENV_ARGS,
        **kw,
    )


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("d") / "dr")


def test_round_trip_matches_generate(dataset):
    ds = open_dataset(dataset)
    env = ENV
    m = ds.metadata
    assert m["env"] == {"name": "darkroom", "overrides": ENV_ARGS}
    assert m["source"]["name"] == "q_learning"
    assert m["source"]["settings"]["learning_rate"] == 0.8
    assert m["seed"] == 0 and m["agentrl_version"]
    split = m["split"]  # train / validation / test, disjoint, all 25 tasks
    held = set(split["validation"]) | set(split["test"])
    assert set(split["train"]) | held == set(range(25)) and split["validation"]
    assert len(held) == len(split["validation"]) + len(split["test"])
    assert not held & set(split["train"])
    ids = ds.task_ids("train")
    assert len(ids) == 20 and set(ids) <= set(m["split"]["train"])
    h = ds.load_history("train")
    assert h.obs.shape == (20, 30) and h.reward.dtype == np.float32
    np.testing.assert_array_equal(h.task_id, ids)
    np.testing.assert_array_equal(
        h.params.goal, jax.vmap(env.params_for_task)(ids).goal
    )
    # record i is exactly the i-th history of the same chunked computation
    key_run = jax.random.split(jax.random.key(0))[1]
    params = jax.vmap(env.params_for_task)(jnp.asarray(ids[:8]))
    key = jax.random.fold_in(jax.random.fold_in(key_run, 0), 0)
    direct = generate("q_learning", env, params, key, 5, jnp.asarray(ids[:8]))
    np.testing.assert_array_equal(h.action[:8], direct.action)
    np.testing.assert_array_equal(h.obs[:8], direct.obs)
    np.testing.assert_array_equal(h.optimal_action[:8], direct.optimal_action)


def test_same_seed_identical_arrays(dataset, tmp_path):
    again = open_dataset(_write(tmp_path / "again")).load_history("train")
    other = open_dataset(_write(tmp_path / "other", seed=1)).load_history("train")
    first = open_dataset(dataset).load_history("train")
    for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(again), strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first.action, other.action)


def test_continuous_tasks_get_train_and_test_splits(tmp_path):
    env = envs.make("gaussian_bandit", horizon=20)
    thompson = source_histories("thompson", env)
    out = write_dataset(tmp_path / "b", env, thompson, 10, 2, 3, chunk_size=4)
    ds = open_dataset(out)
    assert ds.splits == ["train", "test"]
    assert ds.num_records("train") == 8 and ds.num_records("test") == 2
    h = ds.load_history("test")
    assert h.params.means.shape == (2, 5)
    plan = plan_tasks(env, 10, 0.8, 3)
    np.testing.assert_array_equal(h.task_id, plan.task_ids["test"])
    assert ds.metadata["stateless_obs"] is True


def test_interrupted_write_leaves_nothing(tmp_path):
    def boom(n):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _write(tmp_path / "x", progress=boom)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(FileNotFoundError):
        open_dataset(tmp_path / "x")


def test_existing_out_needs_overwrite(dataset):
    with pytest.raises(ValueError, match="already exists"):
        _write(dataset)


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_truncated_or_tampered_files_fail_on_open(dataset, tmp_path):
    shard = next(p.name for p in Path(dataset).iterdir() if "array_record" in p.name)
    bad = _copy(dataset, tmp_path / "trunc")
    data = (bad / shard).read_bytes()
    (bad / shard).write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetIntegrityError, match=f"{shard}: size"):
        open_dataset(bad)
    bad = _copy(dataset, tmp_path / "flip")
    data = bytearray((bad / shard).read_bytes())
    data[len(data) // 3] ^= 0xFF
    (bad / shard).write_bytes(bytes(data))
    open_dataset(bad, verify="size")  # same size: only the checksum sees it
    with pytest.raises(DatasetIntegrityError, match=f"{shard}: SHA-256"):
        open_dataset(bad)
    bad = _copy(dataset, tmp_path / "nometa")
    (bad / "agentrl.json").unlink()
    with pytest.raises(DatasetIntegrityError, match="agentrl.json: missing"):
        open_dataset(bad)
    bad = _copy(dataset, tmp_path / "gone")
    (bad / "features.json").unlink()
    with pytest.raises(DatasetIntegrityError, match="features.json: missing"):
        open_dataset(bad)


def test_reading_does_not_import_tensorflow(dataset):
    code = (
        "import sys\n"
        "from agentrl.data import open_dataset, ADSampler\n"
        f"ds = open_dataset({str(dataset)!r})\n"
        "h = ds.load_history('train')\n"
        "b = ADSampler(ds, 4, num_episodes=2).batch(0)\n"
        "assert h.obs.shape[0] == 20 and b['obs'].shape == (4, 12)\n"
        "assert not [m for m in sys.modules if m.startswith('agentrl.sources')]\n"
        "print('TF' if 'tensorflow' in sys.modules else 'NO-TF')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().endswith("NO-TF"), out.stdout + out.stderr


def test_cli_generate_and_info(tmp_path, capsys):
    out = tmp_path / "cli"
    argv = [
        "data",
        "generate",
        "--env",
        "gaussian_bandit",
        "--env-arg",
        "horizon=10",
        "--source",
        "ucb",
        "--source-arg",
        "c=0.5",
        "--tasks",
        "6",
        "--episodes",
        "2",
        "--seed",
        "0",
        "--out",
        str(out),
        "--chunk-size",
        "4",
    ]
    assert cli_main(argv) == 0
    meta = json.loads((out / "agentrl.json").read_text())
    assert meta["env"]["overrides"] == {"horizon": 10}
    assert meta["source"] == {"name": "ucb", "settings": {"c": 0.5}}
    assert cli_main(["data", "info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "gaussian_bandit" in text and "steps_per_history: 20" in text
    bad = argv[:6] + ["--source", "q_learning"] + argv[8:]
    bad[bad.index(str(out))] = str(tmp_path / "bad")
    assert cli_main(bad) == 2
    assert "does not apply to GaussianBandit" in capsys.readouterr().err


def test_any_histories_callable_with_its_source_metadata(tmp_path):
    q = source_histories("q_learning", ENV, discount=0.5)
    calls = []

    def histories(params, key, num_episodes, task_id):
        calls.append(task_id.shape)
        return q(params, key, num_episodes, task_id)

    meta = {"name": "mine", "settings": {"discount": 0.5}}
    out = write_dataset(
        tmp_path / "c", ENV, histories, 6, 2, 0, source=meta, chunk_size=4
    )
    ds = open_dataset(out)
    assert ds.metadata["source"] == meta
    assert calls == [(4,), (4,)]  # padded chunks: one compiled shape
    with_q = open_dataset(write_dataset(tmp_path / "q", ENV, q, 6, 2, 0, chunk_size=4))
    assert with_q.metadata["source"] == q.source
    for a, b in zip(
        jax.tree.leaves(ds.load_history("train")),
        jax.tree.leaves(with_q.load_history("train")),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)


def test_bad_source_metadata_or_history_length(tmp_path):
    q = source_histories("q_learning", ENV)

    def never(*args):
        raise AssertionError("called before the checks")

    with pytest.raises(ValueError, match="plain JSON values"):
        write_dataset(
            tmp_path / "x",
            ENV,
            never,
            4,
            2,
            source={"name": "n", "settings": {"f": never}},
        )
    with pytest.raises(ValueError, match="keys 'name' and 'settings'"):
        write_dataset(tmp_path / "x", ENV, never, 4, 2, source={"name": "n"})
    with pytest.raises(ValueError, match="`episodes` must be an integer"):
        write_dataset(tmp_path / "x", ENV, never, 4, 0)

    def short(params, key, num_episodes, task_id):
        return q(params, key, num_episodes - 1, task_id)

    with pytest.raises(ValueError, match="gave 6 steps per task.*needs 12"):
        write_dataset(tmp_path / "x", ENV, short, 4, 2)
    assert list(tmp_path.iterdir()) == []


def test_check_history_names_the_misshapen_field(tmp_path):
    from agentrl.history import History, check_history

    task, step = 3, 5
    good = History(
        obs=np.zeros((task, step, 2), np.int32),
        action=np.zeros((task, step), np.int32),
        reward=np.zeros((task, step), np.float32),
        terminated=np.zeros((task, step), bool),
        truncated=np.zeros((task, step), bool),
        episode=np.zeros((task, step), np.int32),
        optimal_action=None,
        task_id=np.arange(task, dtype=np.int32),
        params={"goal": np.zeros((task, 2), np.int32)},
    )
    assert check_history(good) is good
    for field, value in [
        ("reward", np.zeros((task,), np.float32)),
        ("truncated", np.zeros((task, step + 1), bool)),
        ("obs", {"pos": np.zeros((task, step - 1, 2))}),
        ("optimal_action", np.zeros((task, 1), np.int32)),
        ("task_id", np.zeros((task + 1,), np.int32)),
        ("params", {"goal": np.zeros((task - 1, 2))}),
    ]:
        with pytest.raises(AssertionError, match=f"History.{field}"):
            check_history(good.replace(**{field: value}))

    # write_dataset checks every chunk: nothing is written.
    q = source_histories("q_learning", ENV)

    def misshapen(params, key, num_episodes, task_id):
        history = q(params, key, num_episodes, task_id)
        return history.replace(episode=history.episode[:, :-1])

    with pytest.raises(AssertionError, match="History.episode"):
        write_dataset(tmp_path / "x", ENV, misshapen, 4, 2)
    assert list(tmp_path.iterdir()) == []


def test_data_modules_do_not_import_sources():
    """data/ knows the History schema, not the sources (docs/design.md)."""
    import ast

    import agentrl.data

    def imports(tree):
        for node in tree:
            if isinstance(node, ast.Import):
                yield from (a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                yield node.module
                yield from (f"{node.module}.{a.name}" for a in node.names)

    folder = Path(agentrl.data.__file__).parent
    files = sorted(folder.glob("*.py"))
    assert {"writer.py", "features.py", "cli.py"} <= {f.name for f in files}
    for path in files:
        tree = ast.parse(path.read_text())
        # the command line builds the source callable inside its command, so
        # importing any data module (cli included) never imports sources
        nodes = tree.body if path.name == "cli.py" else list(ast.walk(tree))
        names = list(imports(nodes))
        bad = [n for n in names if n == "agentrl.sources" or "sources." in n]
        assert not bad, f"{path.name} imports {bad}"
