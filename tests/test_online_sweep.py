"""``agentrl sweep`` for online learners (RL²): one vmapped program per sweep.

- every member (seed x traced setting) equals ``fit`` of that seed and
  setting: weights and per-update metrics, to float tolerance;
- a sweep killed after a checkpoint resumes to bit-identical members, and a
  rerun of a finished sweep reads its records back (same table);
- the sweep directory and table are the distilled sweeps' (results.*,
  settings/), with the online learner's training trial return;
- bad input (a dataset field swept for an online learner) exits 2 with the
  field named, before anything compiles.
"""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest

from agentrl.algos import RL2
from agentrl.envs import make as make_env
from agentrl.sweep import run_sweep
from agentrl.sweep.online import online_sweep
from agentrl.train import fit
from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig
from agentrl.train.experiments import online_train_config
from agentrl.train.rundir import load_run

ENV_ARGS = (("num_arms", 2), ("horizon", 6))


def tiny_config(steps: int = 6) -> ExperimentConfig:
    return ExperimentConfig(
        name="rl2-sweep-tiny",
        algo=RL2(num_envs=8, rollout_steps=6, hidden=8, embed=8, trial_episodes=2),
        data=DataConfig(env="bernoulli_bandit", env_args=ENV_ARGS, source="random"),
        train=online_train_config(
            steps=steps,
            lr=1e-3,
            schedule="constant",
            log_every=1,
            checkpoint_every=2,
        ),
        eval=EvalConfig(num_tasks=4, num_episodes=2),
    )


def env():
    return make_env("bernoulli_bandit", **dict(ENV_ARGS))


@pytest.mark.long
def test_members_equal_fit_runs(tmp_path):
    config = tiny_config()
    sweep = online_sweep(
        config, env(), [0, 1], [{}, {"algo.ent_coef": 0.1}], steps_per_call=4
    )
    assert sweep.metrics["loss"].shape == (2, 2, 6)
    assert sweep.metrics["trial_return"].shape == (2, 2, 6)
    for member, seed, ent_coef in [(0, 0, 0.01), (3, 1, 0.1)]:
        single = dataclasses.replace(
            config,
            algo=dataclasses.replace(config.algo, ent_coef=ent_coef),
            train=dataclasses.replace(config.train, seed=seed),
        )
        run_dir = tmp_path / f"m{member}"
        fit(single, run_dir, progress=False)
        for x, y in zip(
            jax.tree.leaves(load_run(run_dir).model),
            jax.tree.leaves(sweep.member_weights(member)),
            strict=True,
        ):
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
        logged = [
            json.loads(line)
            for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        ]
        s, h = divmod(member, 2)
        np.testing.assert_allclose(
            [r["loss"] for r in logged],
            sweep.metrics["loss"][s, h],
            rtol=1e-4,
            atol=1e-6,
        )
    # the two settings of one seed differ (the traced value reached the update)
    assert not np.allclose(sweep.metrics["loss"][1, 0], sweep.metrics["loss"][1, 1])


@pytest.mark.long
def test_killed_sweep_resumes_exactly(tmp_path, monkeypatch):
    from agentrl.train.checkpoint import Checkpointer

    config, settings = tiny_config(), [{}, {"train.lr": 3e-3}]

    def sweep(**checkpoints):
        return online_sweep(
            config, env(), [0, 1], settings, steps_per_call=2, **checkpoints
        )

    whole = sweep()

    save = Checkpointer.save

    def save_then_die(self, step, *args, **kwargs):
        save(self, step, *args, **kwargs)
        raise RuntimeError("killed")

    ckpt = tmp_path / "ckpt"
    monkeypatch.setattr(Checkpointer, "save", save_then_die)
    with pytest.raises(RuntimeError, match="killed"):
        sweep(checkpoint_dir=ckpt, checkpoint_every=2)
    monkeypatch.setattr(Checkpointer, "save", save)
    resumed = sweep(checkpoint_dir=ckpt, checkpoint_every=2)
    assert resumed.resumed_from == 2
    for x, y in zip(
        jax.tree.leaves(jax.random.key_data(whole.state.key)),
        jax.tree.leaves(jax.random.key_data(resumed.state.key)),
        strict=True,
    ):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(
        jax.tree.leaves(whole.state.weights),
        jax.tree.leaves(resumed.state.weights),
        strict=True,
    ):
        np.testing.assert_array_equal(x, y)
    for name, values in whole.metrics.items():
        np.testing.assert_array_equal(values, resumed.metrics[name])


@pytest.mark.long
def test_run_sweep_writes_the_table_and_rereads_it(tmp_path):
    config = dataclasses.replace(
        tiny_config(4), eval=EvalConfig(num_tasks=3, num_episodes=2)
    )
    grid = {"ent_coef": [0.0, 0.05], "hidden": [8, 16]}
    first = run_sweep(config, [0, 1], grid, tmp_path / "s", progress=False)
    assert [r["setting"] for r in first.rows] == [
        "hidden=8 ent_coef=0",
        "hidden=8 ent_coef=0.05",
        "hidden=16 ent_coef=0",
        "hidden=16 ent_coef=0.05",
    ]
    for row in first.rows:
        assert row["seeds"] == 2
        assert np.isfinite(row["final_loss"]) and np.isfinite(row["score"])
        assert "final_trial_return" in row
    assert first.curves["hidden=8 ent_coef=0"].shape == (2, 4)
    assert {p.name for p in first.paths.values()} == {
        "results.md",
        "results.csv",
        "results.json",
        "results.png",
    }
    records = sorted((tmp_path / "s" / "settings").iterdir())
    assert len(records) == 2 and all(p.suffix == ".json" for p in records)
    assert not (tmp_path / "s" / "datasets").exists()  # no dataset generated
    again = run_sweep(config, [0, 1], grid, tmp_path / "s", progress=False)
    assert [t["resumed"] for t in again.info["timings"]] == ["complete"] * 2
    assert json.dumps(again.rows) == json.dumps(first.rows)


@pytest.mark.parametrize(
    "grid, match",
    [
        ("num_episodes=10,20", "data.num_episodes"),
        ("source=random,q_learning", "data.source"),
        ("gamma=0.9,1.5", "algo.gamma"),
    ],
)
def test_bad_online_grid_exits_2(grid, match, tmp_path, capsys):
    from agentrl.cli import main

    code = main(
        [
            "sweep",
            "rl2_bandit",
            "--preset",
            "smoke",
            "--seeds",
            "2",
            "--grid",
            grid,
            "--out",
            str(tmp_path / "s"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert match in err and "Traceback" not in err
    assert not (tmp_path / "s").exists()


@pytest.mark.long
def test_online_members_are_scored_on_validation_tasks_unless_asked(
    monkeypatch, tmp_path
):
    """As a distilled sweep's: the validation goals of the split ``fit``
    records, the ones ``agentrl eval --split validation`` takes (once the
    test goals); ``tasks="test"`` scores on the test goals."""
    import types

    import agentrl.sweep.run as run
    from agentrl.online.program import task_split_json
    from agentrl.sweep.paired import task_set_id
    from agentrl.train.experiments import load_experiment
    from agentrl.train.rundir import eval_tasks

    def trained(cfg, env, seeds, settings, **chunking):  # no training here
        s, h = len(seeds), len(settings)
        return types.SimpleNamespace(
            config=cfg,
            metrics={"loss": np.ones((s, h, 3))},
            num_members=s * h,
            seconds=0.0,
            resumed_from=0,
        )

    def acted(sweep, env, params, key, num_episodes):
        tasks = jax.tree.leaves(params)[0].shape[0]
        return np.zeros((len(sweep.metrics["loss"]), 1, tasks, num_episodes))

    monkeypatch.setattr(run, "online_sweep", trained)
    monkeypatch.setattr(run, "evaluate_online_members", acted)
    config = load_experiment("rl2_darkroom", "smoke", {"eval.num_tasks": 4})
    darkroom = make_env("darkroom", **dict(config.data.env_args))
    split = task_split_json(darkroom, config.data)
    ids = {}
    for tasks in ("validation", "test"):
        params, goals = eval_tasks(darkroom, split, config.eval, tasks)
        assert set(goals) <= set(split[tasks])
        ids[tasks] = task_set_id(params)
    assert ids["validation"] != ids["test"]
    for tasks in ("validation", "test", None):
        chosen = {} if tasks is None else {"tasks": tasks}
        out = run.run_sweep(
            config, [0], {}, tmp_path / str(tasks), progress=False, **chosen
        )
        (row,) = out.rows
        assert row["task_set"] == ids[tasks or "validation"]
        assert row["tasks"] == (tasks or "validation")


FOUR_DEVICES = """
import json, sys
import jax
jax.config.update("jax_num_cpu_devices", 4)
from agentrl import configtools
from agentrl.envs import make
from agentrl.sweep.online import online_sweep
from agentrl.train.config import ExperimentConfig

config = configtools.from_dict(ExperimentConfig, json.loads(sys.argv[1]))
env = make(config.data.env, **dict(config.data.env_args))
out = online_sweep(config, env, [0, 1], [{}, {"train.lr": 3e-3}], steps_per_call=3)
specs = {str(x.sharding.spec) for x in jax.tree.leaves(out.state.weights)}
print(json.dumps({"devices": jax.device_count(), "specs": sorted(specs),
                  "loss": out.metrics["loss"].tolist()}))
"""


@pytest.mark.long
def test_members_spread_over_four_devices_match_one():
    import subprocess
    import sys

    from jax.sharding import PartitionSpec as P

    from agentrl import configtools

    config = tiny_config()
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            FOUR_DEVICES,
            json.dumps(configtools.to_dict(config)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["devices"] == 4
    assert got["specs"] == [str(P("sweep"))]
    one = online_sweep(
        config, env(), [0, 1], [{}, {"train.lr": 3e-3}], steps_per_call=3
    )
    np.testing.assert_allclose(got["loss"], one.metrics["loss"], rtol=1e-4, atol=1e-6)


def test_member_keys_are_fits_keys_for_every_allowed_seed():
    """Seeds up to 2**32 - 1 are allowed (``check_seeds``); the keys were
    built as int32, so a seed of 2**31 or more overflowed."""
    from agentrl.sweep.online import member_keys

    seeds = [0, 7, 2**31 + 5, 2**32 - 1]
    keys = jax.random.key_data(member_keys(seeds, 2))
    for m, seed in enumerate(np.repeat(seeds, 2)):
        expected = jax.random.key_data(jax.random.key(int(seed)))
        np.testing.assert_array_equal(keys[m], expected)
