"""A trained online learner (RL²) as a data source: ``learned_learner``.

- its histories are the learner's in-context behaviour: the actions the run's
  policy takes in the evaluation harness, with the frozen weights of the
  checkpoint, one trial per history;
- a dataset written from a tiny RL² run trains AD for a few steps, through
  ``--data.source learned_learner --data.source_args run_dir=...``;
- bad run directories (missing, not a run, a distilled learner's run, another
  environment, a missing step) and tasks held out from the learner are
  refused with the problem named, before anything compiles (exit 2 on the
  command line).
"""

from __future__ import annotations

import dataclasses
import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import configtools
from agentrl.algos import RL2
from agentrl.envs import make as make_env
from agentrl.sources import source_histories
from agentrl.train import fit
from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig, TrainConfig
from agentrl.train.rundir import load_run

ENV_ARGS = (("size", 5), ("horizon", 4))


@pytest.fixture(scope="module")
def rl2_run(tmp_path_factory):
    config = ExperimentConfig(
        name="rl2-learned-source",
        algo=RL2(num_envs=8, rollout_steps=8, hidden=8, embed=8, trial_episodes=2),
        data=DataConfig(env="darkroom", env_args=ENV_ARGS, source="random"),
        train=TrainConfig(
            steps=2,
            checkpoint_every=1,
            log_every=1,
            schedule="constant",
            warmup_steps=0,
        ),
        eval=EvalConfig(num_tasks=3, num_episodes=2),
    )
    run_dir = tmp_path_factory.mktemp("learned") / "rl2"
    fit(config, run_dir, progress=False)
    return run_dir


def env():
    return make_env("darkroom", **dict(ENV_ARGS))


@pytest.mark.long
def test_histories_are_the_learners_in_context_behaviour(rl2_run):
    from agentrl.agents.driver import run_policy

    e = env()
    run = load_run(rl2_run)
    ids = jnp.asarray(run.env.task_split(0.8, 0).train[:5], jnp.int32)
    params = jax.vmap(e.params_for_task)(ids)
    key = jax.random.key(3)
    # the references below act with the same key: copies for the reuse checker
    same_key, key_1, same_key_1 = (jax.random.clone(key) for _ in range(3))
    histories = source_histories("learned_learner", e, run_dir=str(rl2_run))
    assert histories.source == {
        "name": "learned_learner",
        "settings": {
            "run_dir": str(rl2_run),
            "step": None,
            "acting": "sample",
            "temperature": 1.0,
        },
    }
    history = histories(params, key, 3, ids)
    assert history.action.shape == (5, 12)
    np.testing.assert_array_equal(history.task_id, ids)
    # the evaluation harness acting the run (same key): the same trajectory
    policy = run.policy(
        dataclasses.replace(
            run.config, eval=dataclasses.replace(run.config.eval, acting="sample")
        )
    )
    reference, _ = run_policy(e, policy, params, same_key, 12)
    for field in ("obs", "action", "reward", "done"):
        np.testing.assert_array_equal(
            getattr(history, field), getattr(reference, field)
        )
    # step=1 acts the weights of checkpoint 1, greedily with acting="greedy"
    early = load_run(rl2_run, step=1)
    assert early.step == 1
    config = dataclasses.replace(
        early.config, eval=dataclasses.replace(early.config.eval, acting="greedy")
    )
    reference, _ = run_policy(e, early.policy(config), params, key_1, 12)
    earlier = source_histories(
        "learned_learner", e, run_dir=str(rl2_run), step=1, acting="greedy"
    )
    np.testing.assert_array_equal(
        earlier(params, same_key_1, 3, ids).action, reference.action
    )


@pytest.mark.long
def test_dataset_from_a_learned_learner_trains_ad(rl2_run, tmp_path):
    from agentrl.data import open_dataset
    from agentrl.train.experiments import load_experiment

    config = configtools.override(
        load_experiment("ad_darkroom", "smoke"),
        {
            "data.env_args": ENV_ARGS,
            "data.source": "learned_learner",
            "data.source_args": (("run_dir", str(rl2_run)),),
            "data.num_tasks": 6,
            "data.num_episodes": 3,
            "train.steps": 3,
            "train.batch_size": 4,
            "train.warmup_steps": 1,
            "model.d_model": 16,
            "model.d_ff": 32,
            "model.num_layers": 1,
            "eval.num_tasks": 2,
            "eval.num_episodes": 2,
        },
    )
    run_dir = fit(config, tmp_path / "ad", progress=False)
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert np.isfinite(json.loads(lines[-1])["loss"])
    info = json.loads((run_dir / "run.json").read_text())
    data = open_dataset(info["dataset"])
    assert data.metadata["source"]["name"] == "learned_learner"
    assert data.metadata["num_episodes"] == 3
    train_ids = set(env().task_split(0.8, 0).train.tolist())
    assert set(data.metadata["task_ids"]["train"]) <= train_ids
    # evaluation shows the learner AD imitated beside it (the data's source)
    from agentrl.evaluate.run import run_results

    results, _ = run_results(run_dir)
    assert {"ad", "learned_learner", "random"} <= set(results)
    assert results["learned_learner"].returns.shape == (2, 2)


def _fake_distilled_run(rl2_run, tmp_path):
    other = tmp_path / "ad_run"
    shutil.copytree(rl2_run, other)
    config = load_run(rl2_run).config
    from agentrl.algos import AD

    ad = dataclasses.replace(config, algo=AD())
    (other / "config.json").write_text(json.dumps(configtools.to_dict(ad)))
    return other


@pytest.mark.long
def test_bad_run_dirs_are_named(rl2_run, tmp_path):
    e = env()
    (tmp_path / "empty").mkdir()
    cases = [
        ({}, "`run_dir` is required"),
        ({"run_dir": str(tmp_path / "nope")}, "does not exist"),
        ({"run_dir": str(tmp_path / "empty")}, "no config.json"),
        ({"run_dir": str(_fake_distilled_run(rl2_run, tmp_path))}, "learns from data"),
        ({"run_dir": str(rl2_run), "step": 7}, "not a checkpoint"),
        ({"run_dir": str(rl2_run), "step": 1.5}, "`step`"),
        ({"run_dir": 3}, "must be a string"),
    ]
    for settings, match in cases:
        with pytest.raises(ValueError, match=match):
            source_histories("learned_learner", e, **settings)
    other = make_env("darkroom", size=6, horizon=4)
    with pytest.raises(ValueError, match=r"size=5 \(here 6\)"):
        source_histories("learned_learner", other, run_dir=str(rl2_run))
    with pytest.raises(ValueError, match="darkroom"):
        source_histories(
            "learned_learner", make_env("bernoulli_bandit"), run_dir=str(rl2_run)
        )
    # tasks held out from the learner are refused before its rollout runs
    held_out = jnp.asarray(e.task_split(0.8, 0).test[:2], jnp.int32)
    histories = source_histories("learned_learner", e, run_dir=str(rl2_run))
    with pytest.raises(ValueError, match="held out"):
        histories(jax.vmap(e.params_for_task)(held_out), jax.random.key(0), 2, held_out)


def test_cli_generates_and_refuses(rl2_run, tmp_path, capsys):
    from agentrl.cli import main

    base = [
        "data",
        "generate",
        "--env",
        "darkroom",
        "--env-arg",
        "size=5",
        "--env-arg",
        "horizon=4",
        "--source",
        "learned_learner",
        "--tasks",
        "3",
        "--episodes",
        "2",
    ]
    out = tmp_path / "d"
    assert main([*base, "--source-arg", f"run_dir={rl2_run}", "--out", str(out)]) == 0
    assert (out / "dataset_info.json").exists() or any(out.iterdir())
    code = main(
        [
            *base,
            "--source-arg",
            f"run_dir={tmp_path}/none",
            "--out",
            str(tmp_path / "e"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "does not exist" in err and "Traceback" not in err
    assert not (tmp_path / "e").exists()
    # the dataset's split seed differs from the run's: held-out goals refused
    code = main(
        [
            *base,
            "--source-arg",
            f"run_dir={rl2_run}",
            "--seed",
            "5",
            "--tasks",
            "20",
            "--out",
            str(tmp_path / "f"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "held out" in err
    assert not (tmp_path / "f").exists()
