"""XLand-100B HDF5 schema: import, AD and DPT training on it, the xland_ad smoke."""

import json

import h5py
import numpy as np
import pytest

from agentrl import configtools
from agentrl.data import open_dataset
from agentrl.data import xland100b as xl
from agentrl.train.experiments import load_experiment
from agentrl.train.loop import fit

pytest.importorskip("xminigrid")

# A small env: a table of 16 rulesets written here, 10-step episodes
# (nothing is downloaded).
NUM_RULESETS, HORIZON = 16, 10
HISTORIES, STEPS = 3, 47  # 47 = 4 episodes of 10 steps + 7 (cut on import)


def _write_table(path, seed=7):
    """A ruleset table file in xminigrid's format (its ``save_bz2_pickle``),
    of agentrl's generated rulesets: another table than ``rulesets=None``'s."""
    import jax
    from xminigrid.benchmarks import save_bz2_pickle

    from agentrl.envs.xland import generate_rulesets

    arrays = generate_rulesets(jax.random.key(seed), NUM_RULESETS)
    save_bz2_pickle({k: np.asarray(v) for k, v in arrays.items()}, str(path))
    return str(path)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return _write_table(tmp_path_factory.mktemp("table") / "tiny_16_v2")


@pytest.fixture(scope="module")
def local(table):
    """The import's env overrides for the files written here."""
    return {"rulesets": table, "horizon": HORIZON}


@pytest.fixture(autouse=True)
def no_download(monkeypatch):
    """Nothing here downloads: a registered name's table is not fetched."""
    import xminigrid.benchmarks

    def refuse(*args):
        raise AssertionError(f"a test tried to download {args}")

    monkeypatch.setattr(xminigrid.benchmarks, "_download_from_hf", refuse)


def _write_published(
    path, rulesets=(2, 5, 7, 11, 13), expert=True, seed=0, benchmark="trivial-1m"
):
    """A file exactly in the published layout (README of
    dunnolab/xland-minigrid-datasets), written here with h5py alone."""
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        for g, ruleset in enumerate(rulesets):
            group = f.create_group(str(g))
            group.attrs["env-id"] = "XLand-MiniGrid-R1-9x9"
            group.attrs["benchmark-id"] = benchmark
            group.attrs["ruleset-id"] = ruleset
            tiles = rng.integers(0, 13, (HISTORIES, STEPS, 5, 5))
            colors = rng.integers(0, 12, (HISTORIES, STEPS, 5, 5))
            dones = rng.random((HISTORIES, STEPS)) < 0.15
            dones |= np.arange(STEPS) % 10 == 9  # episodes fit the horizon
            rewards = np.where(dones & (rng.random(dones.shape) < 0.5), 0.7, 0.0)
            data = {
                "states": (tiles * 12 + colors).astype(np.uint8),
                "actions": rng.integers(0, 6, (HISTORIES, STEPS)).astype(np.uint8),
                "rewards": rewards.astype(np.float16),
                "dones": dones,
            }
            if expert:
                data["expert_actions"] = rng.integers(0, 6, dones.shape).astype(
                    np.uint8
                )
            for name, value in data.items():
                group.create_dataset(name, data=value, compression="gzip")
    return path


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    return _write_published(tmp_path_factory.mktemp("xl") / "xland-tiny.hdf5")


@pytest.fixture(scope="module")
def imported(published, local, tmp_path_factory):
    out = tmp_path_factory.mktemp("xl") / "ds"
    # the file names trivial-1m: its table is the file written here
    return xl.import_hdf5(published, out, env_overrides=local, split_fraction=0.6)


def test_import_maps_every_field_of_the_schema(published, imported, local):
    ds = open_dataset(imported)
    m = ds.metadata
    assert m["env"] == {
        "name": "xland",
        "overrides": {"env_id": "XLand-MiniGrid-R1-9x9"} | local,
    }
    assert m["num_episodes"] == 4 and m["num_steps"] == 40 and m["horizon"] == 10
    split = m["split"]
    held_out = split["validation"] + split["test"]
    assert sorted(split["train"] + held_out) == [2, 5, 7, 11, 13]
    assert len(split["train"]) == 3 and m["has_optimal_action"]
    ids = ds.task_ids("train")
    assert sorted(set(ids.tolist())) == split["train"]
    assert len(ids) == 3 * HISTORIES
    history = ds.load_history("train")
    with h5py.File(published) as f:
        group = next(f[g] for g in f if f[g].attrs["ruleset-id"] == ids[0])
        states = group["states"][:, :40]
        np.testing.assert_array_equal(
            history.obs[:HISTORIES, ..., 0] * 12 + history.obs[:HISTORIES, ..., 1],
            states,
        )
        assert history.obs.shape[2:] == (5, 5, 2)
        np.testing.assert_array_equal(
            history.action[:HISTORIES], group["actions"][:, :40]
        )
        np.testing.assert_array_equal(
            history.optimal_action[:HISTORIES], group["expert_actions"][:, :40]
        )
        rewards = group["rewards"][:, :40].astype(np.float32)
        np.testing.assert_array_equal(history.reward[:HISTORIES], rewards)
        dones = group["dones"][:, :40]
    done = history.terminated[:HISTORIES] | history.truncated[:HISTORIES]
    np.testing.assert_array_equal(done, dones)
    np.testing.assert_array_equal(history.terminated[:HISTORIES], dones & (rewards > 0))
    assert not (history.terminated & history.truncated).any()
    np.testing.assert_array_equal(
        history.episode[:HISTORIES], np.cumsum(dones, 1) - dones
    )
    assert (
        history.params.ruleset.goal[:HISTORIES] == history.params.ruleset.goal[0]
    ).all()


def test_compression_is_xminigrids():
    from xminigrid.core.constants import NUM_COLORS

    assert xl.NUM_COLORS == NUM_COLORS
    obs = np.stack(np.meshgrid(np.arange(13), np.arange(12), indexing="ij"), -1)
    np.testing.assert_array_equal(xl.decompress_obs(xl.compress_obs(obs)), obs)


def test_a_file_off_the_schema_is_refused_naming_the_dataset(tmp_path, local):
    path = _write_published(tmp_path / "bad.hdf5", rulesets=(1,))
    with h5py.File(path, "a") as f:
        del f["0/rewards"]
        f["0"].create_dataset("rewards", data=np.zeros((HISTORIES, STEPS), np.float64))
    with pytest.raises(ValueError, match=r"0/rewards is float64.*float16"):
        xl.import_hdf5(path, tmp_path / "out", env_overrides=local)
    assert not (tmp_path / "out").exists()
    path = _write_published(tmp_path / "far.hdf5", rulesets=(99,))
    with pytest.raises(ValueError, match=r"ruleset ids \[99\]"):
        xl.import_hdf5(path, tmp_path / "out", env_overrides=local)


def _edit_groups(path, key, edit):
    """Replace dataset ``key`` of every group of ``path`` by ``edit`` of it."""
    with h5py.File(path, "a") as f:
        for group in f.values():
            value = edit(group[key][:])
            del group[key]
            group.create_dataset(key, data=value)


@pytest.mark.parametrize(
    ("key", "edit", "match"),
    [
        ("states", lambda x: x[..., 0, 0], r"states is uint8\[3, 47\], the schema "),
        ("states", lambda x: x[..., 0], r"states is uint8\[3, 47, 5\], the schema "),
        ("actions", lambda x: x[:, 0], r"0/actions is uint8\[3\], the schema has "),
        (
            "states",
            lambda x: x[..., :3, :3],
            r"shape \(3, 3, 2\).*observes \(5, 5, 2\)",
        ),
        ("dones", np.zeros_like, r"dones: history 0 has an episode from step 0 "),
    ],
)
def test_a_group_that_does_not_fit_the_env_is_refused(
    tmp_path, local, key, edit, match
):
    """States without view axes or with another view than the env's, 1-D
    actions and episodes longer than the env's horizon (10 steps)."""
    path = _write_published(tmp_path / "bad.hdf5")
    _edit_groups(path, key, edit)
    with pytest.raises(ValueError, match=match):
        xl.import_hdf5(path, tmp_path / "out", env_overrides=local)
    assert not (tmp_path / "out").exists()


def test_the_import_holds_validation_rulesets_out(imported):
    """A file without a recorded split gets validation rulesets, as data
    generated here does (``plan_tasks``)."""
    from agentrl.envs.tasks import DEFAULT_VALIDATION_SHARE

    split = open_dataset(imported).metadata["split"]
    parts = [set(split[k]) for k in ("train", "validation", "test")]
    assert all(parts) and set.union(*parts) == {2, 5, 7, 11, 13}
    assert sum(map(len, parts)) == 5  # disjoint
    assert split["validation_share"] == DEFAULT_VALIDATION_SHARE


# ---------------------------------------- a published file's ruleset table
@pytest.mark.parametrize(
    ("benchmark", "table", "why"),
    [
        ("medium-1m", "medium_1m_v2", "xminigrid's 'medium-1m' is another table"),
        ("trivial-1m", "trivial_1m_v2", "registers no 'trivial-1m'"),
    ],
)
def test_a_published_file_needs_the_table_it_was_collected_with(
    tmp_path, benchmark, table, why
):
    """Without ``rulesets`` the file's benchmark-id would go through the
    installed xminigrid's names: refused, naming the file, its id, the
    table it needs and both ways to pass it; nothing written."""
    path = _write_published(tmp_path / "xland-100b.hdf5", benchmark=benchmark)
    with pytest.raises(ValueError) as err:
        xl.import_hdf5(path, tmp_path / "out", env_overrides={"horizon": HORIZON})
    message = str(err.value)
    assert message.startswith(f"{path}: benchmark-id {benchmark!r}")
    assert f"'{table}'" in message and xl.TABLES_URL in message and why in message
    assert f"env_overrides={{'rulesets': '/path/to/{table}'}}" in message
    run = f"--data.env_args env_id=XLand-MiniGrid-R1-9x9 rulesets=/path/to/{table} "
    assert run in message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("rulesets", "why"),
    [
        ("medium-1m", "xminigrid's 'medium-1m' is another table"),
        ("trivial-21k", "rulesets='trivial-21k' is the installed xminigrid's table"),
        (None, "rulesets=None is agentrl's generated rulesets"),
    ],
)
def test_a_registered_name_or_none_is_refused_for_a_published_file(
    tmp_path, rulesets, why
):
    """Named explicitly, the installed xminigrid's table (or agentrl's
    generated one) is still not the collection's: the same silent error."""
    path = _write_published(tmp_path / "xland-100b.hdf5", benchmark="medium-1m")
    overrides = {"rulesets": rulesets, "horizon": HORIZON}
    with pytest.raises(ValueError, match=r"'medium_1m_v2'") as err:
        xl.import_hdf5(path, tmp_path / "out", env_overrides=overrides)
    assert why in str(err.value) and str(path) in str(err.value)
    assert not (tmp_path / "out").exists()


def test_a_table_file_gives_every_history_its_rulesets_params(tmp_path, table):
    """The path of the collection's table (here one written with xminigrid's
    ``save_bz2_pickle``, a ``pathlib.Path`` is taken too): every history's
    params are that table's ruleset of its ruleset-id, and the dataset
    records the path to rebuild the env."""
    from pathlib import Path

    from xminigrid.benchmarks import load_bz2_pickle

    path = _write_published(tmp_path / "xland-100b.hdf5", benchmark="medium-1m")
    overrides = {"rulesets": Path(table), "horizon": HORIZON}
    out = xl.import_hdf5(
        path, tmp_path / "out", env_overrides=overrides, split_fraction=0.6
    )
    ds = open_dataset(out)
    assert ds.metadata["env"]["overrides"]["rulesets"] == table
    history, ids = ds.load_history("train"), ds.task_ids("train")
    arrays = load_bz2_pickle(table)
    assert len(set(ids.tolist())) == 3  # several rulesets, each its own
    ruleset = history.params.ruleset
    np.testing.assert_array_equal(ruleset.goal, arrays["goals"][ids])
    np.testing.assert_array_equal(ruleset.rules, arrays["rules"][ids])
    np.testing.assert_array_equal(ruleset.init_tiles, arrays["init_tiles"][ids])


def test_a_table_object_is_refused_up_front(tmp_path, table):
    """A Benchmark object cannot be recorded in the dataset (JSON), which
    rebuilds the env from it: refused before the histories are read (it
    failed once they were written), saying to pass its file."""
    from xminigrid.benchmarks import load_benchmark_from_path

    path = _write_published(tmp_path / "xland-100b.hdf5", benchmark="medium-1m")
    overrides = {"rulesets": load_benchmark_from_path(table), "horizon": HORIZON}
    with pytest.raises(ValueError, match=r"\['rulesets'\] is a Benchmark, not a JSON"):
        xl.import_hdf5(path, tmp_path / "out", env_overrides=overrides)
    assert not (tmp_path / "out").exists()


def test_a_file_agentrl_wrote_keeps_its_recorded_env(tmp_path):
    """Its ``agentrl-env`` attribute rebuilds the env: no table is asked for."""
    path = _write_published(tmp_path / "own.hdf5", benchmark="agentrl")
    recorded = {"name": "xland", "overrides": {"num_rulesets": 16, "horizon": 10}}
    with h5py.File(path, "a") as f:
        f.attrs["agentrl-env"] = json.dumps(recorded)
    out = xl.import_hdf5(path, tmp_path / "out")
    assert open_dataset(out).metadata["env"] == recorded


def test_the_cli_refuses_a_published_file_in_one_line_with_exit_code_2(
    tmp_path, capsys
):
    """``agentrl train EXPERIMENT --data.path FILE``: the refusal is bad
    input (one line, exit code 2), and names the run's flag."""
    from agentrl.cli import main

    path = _write_published(tmp_path / "xland-100b.hdf5", benchmark="medium-1m")
    argv = ["train", "xland_ad", "--preset", "smoke", "--data.path", str(path)]
    assert main([*argv, "--run-dir", str(tmp_path / "run")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()  # the import's bar first
    errors = [line for line in lines if line.startswith("agentrl train: error: ")]
    assert errors == lines[-1:] and "Traceback" not in "".join(lines)
    assert errors[0].endswith("for a run whose data.path is the file")
    assert f"error: {path}: benchmark-id 'medium-1m'" in errors[0]
    run = "env_args env_id=XLand-MiniGrid-R1-9x9 rulesets=/path/to/medium_1m_v2"
    assert run in errors[0]
    assert not (tmp_path / "run").exists()


def test_generate_refuses_observations_the_schema_cannot_hold(tmp_path):
    """One-hot observations (and their agent direction) have no place in
    ``states``: refused before any history is generated."""
    from agentrl.envs import make

    env = make("xland", num_rulesets=4, horizon=5, observation="onehot")

    def histories(*args):
        raise AssertionError("histories generated for an env the file cannot hold")

    with pytest.raises(ValueError, match=r"observes \(629,\).*observation='ids'"):
        xl.generate_hdf5(tmp_path / "x.hdf5", env, histories, 4, 2)
    assert not list(tmp_path.iterdir())


def _tiny(name, path, env_args, **more):
    return configtools.override(
        load_experiment(name, "smoke"),
        {
            "data.env": "xland",
            "data.env_args": tuple(env_args.items()),
            "data.path": str(path),
            "train.steps": 2,
            "train.batch_size": 2,
            "train.warmup_steps": 1,
            "train.checkpoint_every": 2,
            "eval.num_tasks": 2,
            "eval.num_episodes": 2,
            **more,
        },
    )


@pytest.mark.long
def test_ad_and_dpt_train_on_the_imported_data_unchanged(imported, local, tmp_path):
    from agentrl import load_run

    ad = _tiny("ad_darkroom", imported, local, **{"model.obs_encoding": "table"})
    # trajectories: the query from the history, not beyond the context
    dpt = _tiny(
        "dpt_darkroom",
        imported,
        local,
        **{"model.obs_encoding": "table", "algo.query": "history"},
    )
    for config in (ad, dpt):
        run = fit(config, tmp_path / config.algo.label, progress=False)
        lines = (run / "metrics.jsonl").read_text().splitlines()
        assert np.isfinite(json.loads(lines[-1])["loss"])
        assert load_run(run).step == 2


@pytest.mark.long
def test_xland_ad_smoke_generates_ppo_histories_in_the_schema(tmp_path):
    config = configtools.override(
        load_experiment("xland_ad", "smoke"), {"data.path": str(tmp_path / "x.hdf5")}
    )
    run = fit(config, tmp_path / "run", progress=False)
    with h5py.File(tmp_path / "x.hdf5") as f:
        groups = [f[g] for g in f]
        assert len(groups) == 6  # the 80% train share of 8 rulesets
        for group in groups:
            assert set(group) == {"states", "actions", "rewards", "dones"}
            for key, dtype in xl.SCHEMA.items():
                if key in group:
                    assert group[key].dtype == dtype
            assert group["states"].shape[2:] == (5, 5)
            assert group["actions"].shape[1] == 10 * 20
            assert group.attrs["env-id"] == "XLand-MiniGrid-R1-9x9"
        assert (
            sorted(int(g.attrs["ruleset-id"]) for g in groups)
            == json.loads(f.attrs["agentrl-split"])["train"]
        )
        rewards = np.concatenate([g["rewards"][:] for g in groups])
    ds = open_dataset(run / "dataset")
    assert ds.metadata["source"]["name"] == "ppo" and ds.num_records("train") == 8
    # the generation's chunk (8 histories, one call), not the import's reads
    assert ds.metadata["chunk_size"] == 8 and ds.metadata["import_chunk_size"] == 32
    history = ds.load_history("train")
    # the records are the file's histories, ruleset by ruleset
    assert history.reward.sum() == rewards.astype(np.float32).sum()
    assert history.obs.shape == (8, 200, 5, 5, 2) and history.optimal_action is None
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["step"] == 4


@pytest.mark.parametrize(
    "env_args,differs",
    [({"num_rulesets": 16}, "horizon: 10 there, None here"), ({}, "num_rulesets")],
)
def test_a_run_on_a_file_of_another_env_is_refused(tmp_path, env_args, differs):
    """The file's env (here the arguments agentrl recorded in it) was
    compared with ``data.env`` by name alone: a run whose ``data.env_args``
    left out one of them trained on the file's histories and acted on
    another env (243-step episodes for 10-step data). Refused, naming it."""
    from agentrl.envs import make
    from agentrl.train.data import prepare_dataset

    path = _write_published(tmp_path / "own.hdf5", benchmark="agentrl")
    recorded = {"name": "xland", "overrides": {"num_rulesets": 16, "horizon": 10}}
    with h5py.File(path, "a") as f:
        f.attrs["agentrl-env"] = json.dumps(recorded)
    config = _tiny("ad_darkroom", path, env_args)
    env = make("xland", **env_args)
    with pytest.raises(ValueError, match=f"data.path {path} holds xland .*{differs}"):
        prepare_dataset(config, env, tmp_path / "run", progress=False)
    same = _tiny("ad_darkroom", path, recorded["overrides"])
    run = tmp_path / "same"
    dataset = prepare_dataset(same, make("xland", **recorded["overrides"]), run)
    assert dataset.metadata["env"] == recorded


def test_a_files_recorded_seed_is_kept_even_when_it_is_zero():
    """A file agentrl generated with seed 0 was once recorded with the
    import's seed (``0 or seed``)."""

    class File:
        def __init__(self, attrs):
            self.attrs = attrs

    assert xl._recorded_seed(File({"agentrl-seed": 0}), seed=5) == 0
    assert xl._recorded_seed(File({"agentrl-seed": 3}), seed=5) == 3
    assert xl._recorded_seed(File({}), seed=5) == 5  # a published file


# ------------------------------------------- held-out rulesets: file or table
FILE_RULESETS = [2, 5, 7, 11, 13]  # _write_published's


def _import(path, out, local, **kwargs):
    return open_dataset(
        xl.import_hdf5(path, out, env_overrides=local, split_fraction=0.2, **kwargs)
    )


@pytest.fixture(scope="module")
def table_import(published, local, tmp_path_factory):
    return _import(
        published, tmp_path_factory.mktemp("xl") / "t", local, held_out="table"
    )


def test_table_mode_trains_on_every_ruleset_of_the_file(table_import):
    """The XLand AD baseline trains on every ruleset of the file
    (``baselines/ad/train_xland.py``: the whole dataset)."""
    m = table_import.metadata
    assert m["held_out"] == "table" and m["split"]["train"] == FILE_RULESETS
    ids = table_import.task_ids("train")
    assert sorted(set(ids.tolist())) == FILE_RULESETS
    assert len(ids) == len(FILE_RULESETS) * HISTORIES


def test_table_mode_holds_out_table_rulesets_outside_the_file(table_import):
    """Validation and test rulesets: the table's (16) outside the file,
    disjoint, as many as "file" would hold out (0.2 of 5: 2 and 2)."""
    split = table_import.metadata["split"]
    val, test = set(split["validation"]), set(split["test"])
    assert (len(val), len(test)) == xl.held_out_counts(5, 0.2) == (2, 2)
    assert not (val | test) & set(FILE_RULESETS) and not val & test
    assert (val | test) <= set(range(NUM_RULESETS))


def test_table_mode_is_deterministic_for_a_seed(
    published, local, table_import, tmp_path
):
    def held(ds):
        split = ds.metadata["split"]
        return split["validation"], split["test"]

    again = _import(published, tmp_path / "again", local, held_out="table")
    assert held(again) == held(table_import)
    other = _import(published, tmp_path / "1", local, held_out="table", seed=1)
    assert other.metadata["split"]["seed"] == 1
    assert held(other) != held(table_import)


def test_table_mode_test_rulesets_are_evaluated_with_the_tables_params(
    table_import, local
):
    """Evaluation draws from the recorded test ids (``held_out_params``),
    rulesets the file has no history of: the env builds every id of its table."""
    from xminigrid.benchmarks import load_bz2_pickle

    from agentrl.envs import make
    from agentrl.train.rundir import held_out_params

    env = make("xland", env_id="XLand-MiniGrid-R1-9x9", **local)
    split = table_import.metadata["split"]
    params, ids = held_out_params(env, split, 1, seed=0, which="test")
    assert set(ids) <= set(split["test"]) and not set(ids) & set(FILE_RULESETS)
    goals = load_bz2_pickle(local["rulesets"])["goals"]
    np.testing.assert_array_equal(params.ruleset.goal, goals[ids])


@pytest.mark.parametrize(
    ("seed", "fraction", "train", "validation", "test"),
    [  # what the import gave before held_out existed
        (0, 0.6, [7, 11, 13], [2], [5]),
        (1, 0.6, [2, 5, 13], [7], [11]),
        (3, 0.8, [5, 7, 11, 13], [], [2]),
    ],
)
def test_file_mode_splits_the_files_rulesets_as_before(
    published, local, tmp_path, seed, fraction, train, validation, test
):
    out = xl.import_hdf5(
        published,
        tmp_path / "out",
        env_overrides=local,
        split_fraction=fraction,
        seed=seed,
        held_out="file",
    )
    m = open_dataset(out).metadata
    assert "held_out" not in m  # the metadata of before, key for key
    assert (m["split"]["train"], m["split"]["validation"]) == (train, validation)
    assert m["split"]["test"] == test
    assert m["task_ids"]["train"] == [r for r in train for _ in range(HISTORIES)]


def test_an_unknown_held_out_is_refused_before_the_file_is_read(tmp_path):
    with pytest.raises(
        ValueError, match=r"held_out must be 'file' .* or 'table' .*'tables'"
    ):
        xl.import_hdf5(tmp_path / "absent.hdf5", tmp_path / "out", held_out="tables")
    assert not (tmp_path / "out").exists()


def test_table_mode_refuses_a_table_with_no_ruleset_outside_the_file(tmp_path, local):
    path = _write_published(tmp_path / "all.hdf5", rulesets=range(NUM_RULESETS))
    with pytest.raises(ValueError, match=r"held_out='table'.*16 rulesets, all in the"):
        xl.import_hdf5(path, tmp_path / "out", env_overrides=local, held_out="table")
    assert not (tmp_path / "out").exists()


def test_table_mode_refuses_a_file_that_records_its_split(tmp_path):
    """generate_hdf5's files record a split whose held-out rulesets are
    already outside the file: "file" keeps it, "table" is refused."""
    from agentrl.envs.tasks import split_task_ids

    path = _write_published(tmp_path / "own.hdf5", benchmark="agentrl")
    recorded = {"name": "xland", "overrides": {"num_rulesets": 16, "horizon": 10}}
    with h5py.File(path, "a") as f:
        f.attrs["agentrl-env"] = json.dumps(recorded)
        f.attrs["agentrl-split"] = json.dumps(split_task_ids(16, 0.8, 0).to_json())
    with pytest.raises(ValueError, match=r"records its own split.*held_out='file'"):
        xl.import_hdf5(path, tmp_path / "out", held_out="table")
    assert not (tmp_path / "out").exists()


def test_data_held_out_is_validated():
    from agentrl.train.config import DataConfig

    with pytest.raises(ValueError, match=r"data.held_out must be 'file' .*'both'"):
        DataConfig(path="x.hdf5", held_out="both")
    with pytest.raises(ValueError, match=r"data.held_out='table' applies to .*empty"):
        DataConfig(held_out="table")
    assert DataConfig().held_out == "file"


def test_a_run_does_not_reuse_an_import_of_the_other_held_out(
    published, local, tmp_path
):
    """``fit`` imports a file into RUN/dataset once: a run asking the other
    mode (or a dataset directory imported with the other) is refused, and
    "table" with a file agentrl would generate is refused before generating."""
    from agentrl.envs import make
    from agentrl.train.data import prepare_dataset

    args = {"env_id": "XLand-MiniGrid-R1-9x9", **local}
    env, run = make("xland", **args), tmp_path / "run"
    table = _tiny("ad_darkroom", published, args, **{"data.held_out": "table"})
    dataset = prepare_dataset(table, env, run, progress=False)
    assert dataset.metadata["held_out"] == "table"
    file = _tiny("ad_darkroom", published, args)
    with pytest.raises(
        ValueError, match=r"held_out='table' but data.held_out is 'file'"
    ):
        prepare_dataset(file, env, run, progress=False)
    directory = _tiny("ad_darkroom", run / "dataset", args)
    with pytest.raises(ValueError, match=r"data.path .* held_out='table' but"):
        prepare_dataset(directory, env, tmp_path / "other", progress=False)
    absent = _tiny(
        "ad_darkroom", tmp_path / "new.hdf5", args, **{"data.held_out": "table"}
    )
    with pytest.raises(ValueError, match=r"new.hdf5 does not exist, and the file"):
        prepare_dataset(absent, env, tmp_path / "gen", progress=False)
    assert not (tmp_path / "new.hdf5").exists()
