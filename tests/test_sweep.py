"""Vectorized sweeps: vmapped members equal single runs; grids; sources; CLI."""

import dataclasses

import jax
import numpy as np
import pytest

from agentrl import configtools, envs
from agentrl.sweep import grid as grid_module
from agentrl.sweep import (
    make_grid,
    parse_grid_args,
    train_sweep,
)
from agentrl.sweep.cli import parse_seeds
from agentrl.train.experiments import load_experiment


@pytest.mark.long
def test_vmapped_members_match_single_runs(tiny_ad_config, darkroom_dataset):
    from agentrl.configtools import default_hparams
    from agentrl.data import open_dataset
    from agentrl.data.device_sampler import DeviceSampler
    from agentrl.train.config import complete_config
    from agentrl.train.data import make_sampler
    from agentrl.train.loop import build_model
    from agentrl.train.step import init_train_state, make_train_step

    config = tiny_ad_config(steps=4)
    env = envs.make("darkroom")
    dataset = open_dataset(darkroom_dataset)
    settings = [{"lr": 1e-3}, {"lr": 3e-3, "weight_decay": 0.0}]
    sweep = train_sweep(config, env, dataset, [0, 1], settings, steps_per_call=2)
    assert sweep.metrics["loss"].shape == (2, 2, 4)
    for s, seed in enumerate([0, 1]):
        cfg = configtools.override(config, {"train.seed": seed})
        full = complete_config(cfg, env, dataset)
        model = build_model(cfg, env)
        graphdef, state0 = init_train_state(model, full)
        step = jax.jit(make_train_step(graphdef, full, env))
        sampler = DeviceSampler(make_sampler(full, dataset, env))  # fit's draws
        for h, setting in enumerate(settings):
            hp = default_hparams(cfg)
            changes = {k: np.float32(v) for k, v in setting.items()}
            hp["train"] = {**hp["train"], **changes}
            state, losses = state0, []
            for i in range(cfg.train.steps):
                state, metrics = step(state, sampler.batch(i), hp)
                losses.append(float(metrics["loss"]))
            np.testing.assert_allclose(sweep.metrics["loss"][s, h], losses, atol=1e-5)
    # members really differ (different seeds and learning rates)
    loss = sweep.metrics["loss"]
    assert np.abs(loss[0, 0] - loss[1, 0]).max() > 1e-3
    assert np.abs(loss[0, 0, 1:] - loss[0, 1, 1:]).max() > 1e-4


def test_member_draws_are_fits_draws_in_one_program(tiny_ad_config, darkroom_dataset):
    """Every seed's batches are the ones ``fit`` draws for it, from ONE
    compiled program that other seeds and later sweeps reuse."""
    import jax.numpy as jnp

    from agentrl.data import open_dataset
    from agentrl.data.device_sampler import DeviceSampler, seeded_draws
    from agentrl.sweep.train import _member_draws
    from agentrl.train.config import complete_config
    from agentrl.train.data import make_sampler

    env, dataset = envs.make("darkroom"), open_dataset(darkroom_dataset)
    full = complete_config(tiny_ad_config(steps=4), env, dataset)
    batches = _member_draws(full, dataset, env, [0, 5])(jnp.arange(3, 6))
    for s, seed in enumerate([0, 5]):
        seeded = configtools.override(full, {"train.seed": seed})
        own = DeviceSampler(make_sampler(seeded, dataset, env))
        for k, step in enumerate(range(3, 6)):
            jax.tree.map(
                lambda a, b, k=k, s=s: np.testing.assert_array_equal(a[k, s], b),
                batches,
                own.batch(step),
            )
    big = _member_draws(full, dataset, env, [2**32 - 1, 5])(jnp.arange(3, 4))
    jax.tree.map(  # a seed past int32 keys as the Python int does
        lambda a, b: np.testing.assert_array_equal(a[0, 1], b), big, own.batch(3)
    )
    compiled = seeded_draws(own.spec)._cache_size()  # this process's so far
    _member_draws(full, dataset, env, [1, 2])(jnp.arange(7, 10))
    assert seeded_draws(own.spec)._cache_size() == compiled  # nothing new


def test_grid_splits_traced_and_static():
    config = load_experiment("ad_darkroom", "smoke")
    spec = make_grid(config, {"lr": ["1e-4", "1e-3"], "model.num_layers": [1, 2, 3]})
    assert spec.traced == {"train.lr": (1e-4, 1e-3)}
    assert spec.static == {"model.num_layers": (1, 2, 3)}
    assert len(spec.traced_settings()) == 2 and len(spec.static_settings()) == 3


def test_data_plans_build_each_family_once_and_refuse_a_cell_too_big(monkeypatch):
    """Every static cell's histories are planned before any trains, with one
    env per family (a MuJoCo build takes seconds)."""
    built = []
    make = grid_module.make_env
    monkeypatch.setattr(
        grid_module,
        "make_env",
        lambda name, **kw: built.append(name) or make(name, **kw),
    )
    config = load_experiment("ad_darkroom", "smoke")
    spec = make_grid(
        config, {"model.num_layers": [1, 2], "data.num_train_tasks": [4, 8]}
    )
    grid_module.check_data_plans(config, spec)
    assert built == ["darkroom"]
    bandits = load_experiment("gpicl_bandit", "smoke")  # 51 training histories
    too_many = make_grid(bandits, {"data.num_train_tasks": [4, 60]})
    with pytest.raises(ValueError, match="num_train_tasks"):
        grid_module.check_data_plans(bandits, too_many)


@pytest.mark.parametrize(
    ("items", "match"),
    [
        (["lr"], "FIELD=V1,V2"),
        (["lr=1e-3,"], "non-empty"),
        (["lr=1e-3", "lr=1e-4"], "given twice"),
    ],
)
def test_grid_parse_errors(items, match):
    with pytest.raises(ValueError, match=match):
        parse_grid_args(items)


@pytest.mark.parametrize(
    ("grid", "match"),
    [
        ({"learning_rat": ["1"]}, "unknown config field 'learning_rat'"),
        ({"lr": ["-1e-3"]}, "train.lr must be > 0"),
        ({"lr": ["fast"]}, "train.lr must be of type float"),
        # T2MIR's weights are fields of the T2MIR algorithm only
        ({"balance_weight": ["0.1"]}, "unknown config field 'balance_weight'"),
        ({"train.seed": ["1", "2"]}, "--seeds"),
        ({"lr": ["1e-3", "0.001"]}, "repeated"),
        # a node or section, not a leaf field: 'algo' was a KeyError
        ({"algo": ["ad", "dt"]}, "'algo' .* selects the algorithm .*--algo NAME"),
        ({"model": ["1", "2"]}, "'model' .* section of the config.*model.obs_kind"),
        ({"train": ["1"]}, "'train' .* section of the config"),
        # one field under two spellings: the first list was dropped silently
        (
            {"lr": ["1e-3", "3e-3"], "train.lr": ["1e-2"]},
            "'lr' and 'train.lr' .* same field, train.lr",
        ),
        (
            {"num_layers": [1, 2], "model.num_layers": [3]},
            "'num_layers' and 'model.num_layers' .* same field, model.num_layers",
        ),
    ],
)
def test_grid_value_errors(grid, match):
    config = load_experiment("ad_darkroom", "smoke")
    with pytest.raises(ValueError, match=match):
        make_grid(config, grid)


def test_grid_over_a_nested_algorithm_is_refused():
    config = load_experiment("t2mir_ad_darkroom", "smoke")
    with pytest.raises(ValueError, match="'algo.base' .* selects the algorithm"):
        make_grid(config, {"algo.base": ["ad", "dt"]})


def test_seed_parsing():
    assert parse_seeds("3", base=5) == [5, 6, 7]
    assert parse_seeds("0,4,2") == [0, 4, 2]
    for bad in ("0", "x", "1,1", "-1,2", "0,4294967296"):
        with pytest.raises(ValueError, match="--seeds"):
            parse_seeds(bad)
    assert parse_seeds("0,4294967295") == [0, 2**32 - 1]  # the largest: uint32


def test_cli_reports_clear_errors(capsys):
    from agentrl.cli import main

    for argv, message in [
        (["--grid", "nope=1,2"], "unknown config field 'nope'"),
        (["--grid", "lr"], "--grid expects FIELD=V1,V2"),
        (["--seeds", "zero"], "--seeds"),
    ]:
        assert main(["sweep", "ad_darkroom", *argv]) == 2
        assert message in capsys.readouterr().err
    assert main(["sweep", "no_such_experiment"]) == 2
    assert "agentrl sweep: error: unknown experiment" in capsys.readouterr().err


def test_cli_refuses_one_field_gridded_under_two_spellings(tmp_path, capsys):
    """``--grid lr=... --grid train.lr=...`` once swept only the last list."""
    from agentrl.cli import main

    out = tmp_path / "s"
    argv = ["sweep", "ad_darkroom", "--out", str(out), "--grid", "lr=1e-3,3e-3"]
    assert main([*argv, "--grid", "train.lr=1e-2"]) == 2
    err = capsys.readouterr().err
    assert "'lr' and 'train.lr'" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    "flag, resume, tasks",
    [
        ([], True, "validation"),
        (["--no-resume"], False, "validation"),
        (["--split", "test"], True, "test"),
    ],
)
def test_cli_passes_resume(flag, resume, tasks, monkeypatch, tmp_path):
    """``--no-resume`` reaches ``run_sweep`` (which then recomputes all), and
    ``--split`` the held-out tasks it scores (validation unless asked)."""
    import agentrl.sweep.run
    from agentrl.cli import main

    seen = {}

    class Stop(Exception):
        pass

    def fake_run_sweep(*args, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(agentrl.sweep.run, "run_sweep", fake_run_sweep)
    with pytest.raises(Stop):
        main(["sweep", "ad_darkroom", "--out", str(tmp_path / "s"), *flag])
    assert seen["resume"] is resume and seen["tasks"] == tasks


def test_batch_must_divide_data_devices():
    from agentrl.sweep.train import sweep_mesh

    assert sweep_mesh(4, 3).shape["sweep"] == 1  # one CPU device here
    assert dataclasses.is_dataclass(load_experiment("ad_darkroom", "smoke"))


def _fake_members(calls: list):
    """``_data_members`` without data or training: the real held-out tasks
    (a continuous family's: the evaluation key's draws, the same for every
    ``N``), training tasks that depend on ``N``, and ``[S, H, task, episode]``
    returns of a seeded draw, so a sweep runs in seconds."""
    import types

    from agentrl.sweep.train import held_out_tasks

    def members(cfg, env, seeds, settings, out, chunking, which=None):
        calls.append(cfg.data.num_train_tasks)
        s, h = len(seeds), len(settings)
        sweep = types.SimpleNamespace(
            config=cfg,
            metrics={"loss": np.ones((s, h, 5))},
            num_members=s * h,
            seconds=0.0,
            resumed_from=0,
        )
        n = cfg.data.num_train_tasks

        def trained(c):
            keys = jax.random.split(jax.random.key(n), c.eval.num_tasks)
            return jax.vmap(env.sample_params)(keys)

        def evaluate(sweep, env, params, key, num_episodes):
            tasks = jax.tree.leaves(params)[0].shape[0]
            rng = np.random.default_rng(n)
            return rng.uniform(0, 5, size=(s, h, tasks, num_episodes))

        data = types.SimpleNamespace(metadata={})  # no split: fresh draws
        tasks = {
            "held_out": lambda c: held_out_tasks(env, data, c, which),
            "train": trained,
        }
        return sweep, tasks, evaluate

    return members


def test_rows_keep_per_task_scores_through_a_resumed_sweep(monkeypatch, tmp_path):
    """Per-task scores and task identities reach the rows, ``results.json``
    and the settings' records; a resumed sweep reads them back, and one
    resumed from records written without them still reuses those records."""
    import json

    import agentrl.sweep.run as run
    from agentrl.sweep.paired import paired_row_difference

    calls = []
    monkeypatch.setattr(run, "_data_members", _fake_members(calls))
    config = load_experiment("gpicl_bandit", "smoke", {"eval.num_tasks": 6})
    grid = {"num_train_tasks": [2, 8], "lr": [1e-3, 3e-4]}

    def sweep():
        return run.run_sweep(
            config,
            [0, 1, 2],
            grid,
            tmp_path / "s",
            progress=False,
            eval_train_tasks=True,
        )

    first = sweep()
    assert calls == [2, 8] and len(first.rows) == 4
    for row in first.rows:
        scores = np.asarray(row["task_scores"], np.float64)
        assert scores.shape == (3, 6)  # [seed, task]
        np.testing.assert_allclose(scores.mean(), row["score"], rtol=1e-9)
        train = np.asarray(row["train_task_scores"], np.float64)
        np.testing.assert_allclose(train.mean(), row["train_score"], rtol=1e-9)
    # every cell faces the same held-out tasks; the training tasks follow N
    assert len({r["task_set"] for r in first.rows}) == 1
    assert len({r["train_task_set"] for r in first.rows}) == 2
    saved = json.loads(first.paths["json"].read_text())["rows"]
    assert json.dumps(saved) == json.dumps(first.rows)
    assert "task_scores" not in first.paths["csv"].read_text()
    diff = paired_row_difference(first.rows[3], first.rows[0])
    assert diff["pairs"] == 18 and np.isfinite(diff["mean"])
    with pytest.raises(ValueError, match="different tasks"):
        paired_row_difference(first.rows[3], first.rows[0], field="train_task_scores")

    again = sweep()  # complete records: nothing recomputed, the same rows
    assert calls == [2, 8]
    assert [t["resumed"] for t in again.info["timings"]] == ["complete"] * 2
    assert json.dumps(again.rows) == json.dumps(first.rows)

    per_task = ("task_scores", "task_set", "train_task_scores", "train_task_set")
    for record in (tmp_path / "s" / "settings").glob("*.json"):
        part = json.loads(record.read_text())  # as written before they were kept
        part["rows"] = [
            {k: v for k, v in r.items() if k not in per_task} for r in part["rows"]
        ]
        record.write_text(json.dumps(part))
    old = sweep()
    assert calls == [2, 8]  # the setting keys did not change: records reused
    assert [t["resumed"] for t in old.info["timings"]] == ["complete"] * 2
    assert all("task_scores" not in r for r in old.rows)
    assert [r["score"] for r in old.rows] == [r["score"] for r in first.rows]
    with pytest.raises(ValueError, match="has no 'task_scores'"):
        paired_row_difference(old.rows[3], old.rows[0])


def test_a_sweep_scores_on_validation_tasks_unless_asked_for_test(
    monkeypatch, tmp_path
):
    """Settings are chosen from the sweep's table, so it scores on the
    validation tasks (docs/protocol.md), the ones ``agentrl eval --split
    validation`` uses; once it scored every setting on the test tasks. The
    split is in the rows, the JSON and the note under the table, and a
    test-scored sweep keeps records of its own."""
    import json

    import agentrl.sweep.run as run
    from agentrl.sweep.paired import task_set_id
    from agentrl.train.rundir import eval_tasks

    calls = []
    monkeypatch.setattr(run, "_data_members", _fake_members(calls))
    config = load_experiment("gpicl_bandit", "smoke", {"eval.num_tasks": 4})
    env = envs.make(config.data.env, **dict(config.data.env_args))
    ids = {
        which: task_set_id(eval_tasks(env, None, config.eval, which)[0])
        for which in ("validation", "test")
    }
    assert ids["validation"] != ids["test"]
    out = tmp_path / "s"
    chosen = run.run_sweep(config, [0, 1], {"lr": [1e-3, 3e-4]}, out, progress=False)
    assert {r["task_set"] for r in chosen.rows} == {ids["validation"]}
    assert {r["tasks"] for r in chosen.rows} == {"validation"}
    assert json.loads(chosen.paths["json"].read_text())["tasks"] == "validation"
    assert "validation tasks" in chosen.paths["md"].read_text()
    reported = run.run_sweep(
        config, [0, 1], {"lr": [1e-3, 3e-4]}, out, progress=False, tasks="test"
    )
    assert len(calls) == 2  # not the validation sweep's records
    assert {r["task_set"] for r in reported.rows} == {ids["test"]}
    assert {r["tasks"] for r in reported.rows} == {"test"}
    assert "test tasks" in reported.paths["md"].read_text()
    with pytest.raises(ValueError, match="tasks .*'validation'.* or 'test'"):
        run.run_sweep(config, [0], {}, out, progress=False, tasks="train")


def _two_way(dataset, path):
    """A copy of ``dataset`` whose split has no validation tasks (a
    train/test split, as agentrl <= 0.2 wrote)."""
    import json
    import shutil

    shutil.copytree(dataset, path)
    meta = json.loads((path / "agentrl.json").read_text())
    meta["split"].update(validation=[], validation_share=0.0)
    (path / "agentrl.json").write_text(json.dumps(meta))
    return path


def test_a_split_without_validation_tasks_is_refused_before_training(
    tiny_ad_config, darkroom_dataset, monkeypatch, tmp_path
):
    """As ``agentrl eval --split validation`` refuses it; and before any
    member trains. ``--split test`` scores such a dataset."""
    import agentrl.sweep.run as run

    def trained(*args, **kwargs):
        raise AssertionError("trained before the held-out tasks were checked")

    monkeypatch.setattr(run, "train_sweep", trained)
    data = _two_way(darkroom_dataset, tmp_path / "two_way")
    config = configtools.override(tiny_ad_config(2), {"data.path": str(data)})
    with pytest.raises(ValueError, match="no validation tasks.*--split test"):
        run.run_sweep(config, [0], {}, tmp_path / "s", progress=False)
    with pytest.raises(AssertionError, match="trained before"):  # test: allowed
        run.run_sweep(config, [0], {}, tmp_path / "s", progress=False, tasks="test")


def _small_dataset(path, seed):
    """Dark Room Q-learning histories at ``path`` (overwritten), ``seed``'s."""
    from agentrl.data import write_dataset
    from agentrl.sources import source_histories

    env = envs.make("darkroom")
    source = source_histories("q_learning", env)
    write_dataset(
        path, env, source, 2, 2, seed=seed, env_name="darkroom", overwrite=True
    )
    return path


def test_a_sweep_names_its_histories_by_digest_not_path(monkeypatch, tmp_path):
    """A setting's key named ``data.path``: a dataset moved elsewhere
    trained every setting again, and histories regenerated in place were
    refused. The key names the histories' digest now: moved, the records
    are read; regenerated, the sweep trains on them (the old record stays);
    a record keyed by the path before is read where its digest matches."""
    import json
    import shutil

    import agentrl.sweep.run as run

    calls, keyed = [], []
    monkeypatch.setattr(run, "_data_members", _fake_members(calls))
    setting_key = run._setting_key

    def spied(*args, **kwargs):
        keyed.append(args)
        return setting_key(*args, **kwargs)

    monkeypatch.setattr(run, "_setting_key", spied)
    data = _small_dataset(tmp_path / "data", seed=0)
    out = tmp_path / "s"

    def sweep(path):
        config = configtools.override(
            load_experiment("ad_darkroom", "smoke"), {"data.path": str(path)}
        )
        result = run.run_sweep(config, [0], {}, out, evaluate=False, progress=False)
        return result.info["timings"][0].get("resumed")

    assert sweep(data) is None and len(calls) == 1
    moved = shutil.move(data, tmp_path / "elsewhere")
    assert sweep(moved) == "complete" and len(calls) == 1
    (record,) = (out / "settings").glob("*.json")
    digest = json.loads(record.read_text())["dataset_digest"]
    _small_dataset(moved, seed=1)  # other histories at the same path
    assert sweep(moved) is None and len(calls) == 2
    assert len(list((out / "settings").glob("*.json"))) == 2
    # a record made before the digest named the data: its key has the path
    legacy = setting_key(*keyed[-1])  # the last sweep's, path named
    assert legacy != setting_key(*keyed[-1], digest=digest)
    kept = {**json.loads(record.read_text()), "key": legacy}
    shutil.rmtree(out / "settings")
    (out / "settings").mkdir()
    (out / "settings" / f"{legacy}.json").write_text(json.dumps(kept))
    _small_dataset(moved, seed=0)  # its histories back at its path
    assert sweep(moved) == "complete" and len(calls) == 2
    _small_dataset(moved, seed=1)  # other histories: not that record's
    assert sweep(moved) is None and len(calls) == 3


def test_members_do_not_resume_from_a_checkpoint_past_their_steps(tmp_path):
    """A checkpoint of more steps than asked for once ran no chunk and
    returned the longer-trained members as the shorter run."""
    import jax.numpy as jnp

    from agentrl.sweep.train import run_member_chunks

    def chunk(state, lo, hi):
        return state + (hi - lo), {"loss": jnp.zeros((hi - lo, 1))}

    def run(total):
        return run_member_chunks(
            jnp.zeros(1),
            chunk,
            total,
            2,
            checkpoint_dir=tmp_path / "ckpt",
            checkpoint_every=2,
            progress=False,
            unit="step",
        )

    state, _, first = run(4)
    assert float(state[0]) == 4 and first == 0
    with pytest.raises(ValueError, match="step 4, past the 2 steps"):
        run(2)
    state, _, first = run(6)  # more steps: goes on
    assert float(state[0]) == 6 and first == 4


@pytest.mark.long
def test_a_killed_sweep_resumes_on_its_moved_histories_only(
    tiny_ad_config, darkroom_dataset, monkeypatch, tmp_path
):
    """Killed after its member checkpoints, the same sweep on its histories
    moved elsewhere started over (the key named the path), and on other
    histories regenerated in place it went on from those checkpoints (then,
    refused). Moved, it resumes; regenerated, it trains from the start."""
    import shutil

    import agentrl.sweep.run as run
    from agentrl.data import write_dataset
    from agentrl.sources import source_histories

    data = shutil.copytree(darkroom_dataset, tmp_path / "data")
    write_json = run.write_json

    def killed(*args, **kwargs):  # after the members' last checkpoint
        raise RuntimeError("killed")

    def sweep(path):
        config = configtools.override(
            tiny_ad_config(4), {"data.path": str(path), "train.checkpoint_every": 2}
        )
        outcome = run.run_sweep(
            config, [0], {}, tmp_path / "s", evaluate=False, steps_per_call=2,
            progress=False,
        )  # fmt: skip
        return outcome.info["timings"][0].get("resumed")

    monkeypatch.setattr(run, "write_json", killed)
    with pytest.raises(RuntimeError, match="killed"):
        sweep(data)
    moved = shutil.move(data, tmp_path / "moved")
    monkeypatch.setattr(run, "write_json", write_json)
    assert sweep(moved) == "from step 4"
    shutil.rmtree(tmp_path / "s")
    monkeypatch.setattr(run, "write_json", killed)
    with pytest.raises(RuntimeError, match="killed"):
        sweep(moved)
    monkeypatch.setattr(run, "write_json", write_json)
    env = envs.make("darkroom")
    source = source_histories("q_learning", env)
    write_dataset(
        moved, env, source, 8, 30, seed=1, env_name="darkroom", overwrite=True
    )
    assert sweep(moved) is None
