"""MuJoCo experiments: the HalfCheetah-Vel smoke presets train and evaluate.

The AD smoke preset generates its own SAC histories on MJX (4 tasks x 4
episodes of 20 steps) and trains 40 steps; T2MIR-AD trains on the same
histories (``data.path``). DPT's smoke preset generates the same SAC runs
again with the final policy's labels (asserted: the same bytes as AD's,
plus ``optimal_action``); RL² and transformer PPO train online over trials
of 2 episodes. Every evaluation runs on held-out velocities in context
(DPT: its previous episode as its context set; RL²: its hidden state; AD
and transformer PPO: their KV cache), with SAC learning online beside the
model, its converged return the normalized score's oracle (HalfCheetah has
none), and plots the final episode's return against the target velocity.
Minutes of compiling (MJX, SAC, the model) each: ``make test-long``.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from agentrl.train.experiments import load_experiment
from agentrl.train.loop import fit

pytestmark = pytest.mark.long


@pytest.fixture(scope="module")
def ad_run(tmp_path_factory):
    pytest.importorskip("brax")
    config = load_experiment("ad_halfcheetah_vel", "smoke")
    return fit(config, tmp_path_factory.mktemp("ad") / "run", progress=False)


def _losses(run_dir) -> list[float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [float(json.loads(x)["loss"]) for x in lines if '"loss"' in x]


def test_ad_halfcheetah_vel_evaluates_beside_sac(ad_run, tmp_path):
    config = json.loads((ad_run / "config.json").read_text())
    assert config["model"]["head"] == "gaussian" and config["data"]["source"] == "sac"
    assert all(math.isfinite(x) for x in _losses(ad_run))
    _evaluates_beside_sac(ad_run, tmp_path, "ad", num_episodes=2)


def _evaluates_beside_sac(run_dir, out_dir, method: str, num_episodes: int) -> dict:
    """Evaluate ``run_dir`` on 2 held-out velocities (``num_episodes`` each)
    with the default baselines; check the results and return them."""
    from agentrl.evaluate.run import evaluate_run

    config = json.loads((run_dir / "config.json").read_text())
    split = json.loads((run_dir / "run.json").read_text())["split"]
    paths = evaluate_run(
        run_dir, num_episodes=num_episodes, num_tasks=2, out_dir=out_dir
    )
    results = json.loads(paths["json"].read_text())
    assert set(results["runs"]) == {method, "random", "sac"}
    sac = results["runs"]["sac"][0]
    converged = sac["metadata"]["converged_return"]
    assert sac["metadata"]["source_episodes"] == max(
        config["data"]["num_episodes"], num_episodes
    )
    for name in (method, "random", "sac"):
        run = results["runs"][name][0]
        returns = np.asarray(run["returns"], float)
        assert returns.shape == (2, num_episodes) and np.isfinite(returns).all()
        assert run["metadata"]["oracle"] == "sac converged"
        np.testing.assert_allclose(run["oracle_return"], converged)
        param = run["metadata"]["task_parameter"]
        assert "velocity" in param["name"]
        held_out = _velocities(config)[split["test"]]
        assert all(np.isclose(v, held_out, rtol=1e-5).any() for v in param["values"])
    assert paths["return_vs_task"].read_bytes()[:4] == b"\x89PNG"
    assert "sac converged = 1" in paths["markdown"].read_text()
    return results


def _velocities(config) -> np.ndarray:
    from agentrl import envs

    env = envs.make("halfcheetah_vel", **dict(config["data"]["env_args"]))
    return env.task_values()


def test_t2mir_ad_halfcheetah_vel_trains_on_the_same_histories(ad_run, tmp_path):
    config = load_experiment("t2mir_ad_halfcheetah_vel", "smoke")
    assert config.model.task_routing == "token"  # T2MIR's HalfCheetahVel-v0
    data = dataclasses.replace(config.data, path=str(ad_run / "dataset"))
    run_dir = fit(dataclasses.replace(config, data=data), tmp_path, progress=False)
    losses = _losses(run_dir)
    assert losses and all(math.isfinite(x) for x in losses)


def test_dpt_halfcheetah_vel_trains_on_sac_final_policy_labels(ad_run, tmp_path):
    """DPT's smoke preset: AD's SAC runs again (the same bytes) with the final
    policy's labels, trained on and evaluated in context beside SAC."""
    from agentrl.data.reader import open_dataset

    config = load_experiment("dpt_halfcheetah_vel", "smoke")
    assert dict(config.data.source_args) == {"labels": "final_policy"}
    assert config.algo.context_size == dict(config.data.env_args)["horizon"]
    run_dir = fit(config, tmp_path / "run", progress=False)
    ours = open_dataset(run_dir / "dataset").load_history("train")
    ad = open_dataset(ad_run / "dataset").load_history("train")
    for field in ("obs", "action", "reward", "task_id"):
        np.testing.assert_array_equal(getattr(ours, field), getattr(ad, field))
    labels = np.asarray(ours.optimal_action)
    assert labels.shape == np.asarray(ours.action).shape
    assert np.isfinite(labels).all() and (np.abs(labels) <= 1.0).all()
    assert not np.allclose(labels, ours.action)  # not the acted (sampled) actions
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["model"]["head"] == "gaussian"
    assert _losses(run_dir) and all(math.isfinite(x) for x in _losses(run_dir))
    _evaluates_beside_sac(run_dir, tmp_path / "eval", "dpt", num_episodes=3)


@pytest.mark.parametrize(
    "name", ["rl2_halfcheetah_vel", "transformer_ppo_halfcheetah_vel"]
)
def test_online_learner_trains_and_evaluates_in_context(name, tmp_path):
    """RL² and transformer PPO's smoke presets: trials of 2 episodes on the
    training velocities, then one trial on held-out velocities beside SAC
    (the ``data`` block configures that baseline only: no dataset)."""
    pytest.importorskip("brax")
    config = load_experiment(name, "smoke")
    run_dir = fit(config, tmp_path / "run", progress=False)
    assert not (run_dir / "dataset").exists()
    record = json.loads((run_dir / "run.json").read_text())
    velocities = _velocities(json.loads((run_dir / "config.json").read_text()))
    assert len(velocities) == 50 and len(record["split"]["train"]) == 45
    assert _losses(run_dir) and all(math.isfinite(x) for x in _losses(run_dir))
    results = _evaluates_beside_sac(
        run_dir, tmp_path / "eval", config.algo.label, config.algo.trial_episodes
    )
    meta = results["runs"][config.algo.label][0]["metadata"]
    assert meta["task_ids"] and set(meta["task_ids"]) <= set(record["split"]["test"])
