"""Point-Robot experiments: the smoke presets train and the AD run evaluates.

The AD smoke preset generates its own PPO histories (8 tasks x 20 episodes)
and trains 60 steps; the DPT smoke preset (and T2MIR over AD and DPT, long)
trains on the same histories
(``data.path`` pointed at the AD run's dataset, which holds the oracle's
``optimal_action`` labels), so PPO compiles once and the file stays fast.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from agentrl.train.experiments import load_experiment
from agentrl.train.loop import fit


def _losses(run_dir) -> list[float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [float(json.loads(x)["loss"]) for x in lines if '"loss"' in x]


@pytest.fixture(scope="module")
def ad_run(tmp_path_factory):
    config = load_experiment("ad_point_robot", "smoke")
    return fit(config, tmp_path_factory.mktemp("ad") / "run", progress=False)


@pytest.mark.long
def test_ad_point_robot_smoke_trains(ad_run):
    config = json.loads((ad_run / "config.json").read_text())
    assert config["model"]["action_kind"] == "continuous"
    assert config["model"]["head"] == "gaussian"
    assert json.loads((ad_run / "run.json").read_text())["split"]["test"]
    losses = _losses(ad_run)
    assert len(losses) == 6 and all(math.isfinite(x) for x in losses)
    assert np.mean(losses[-2:]) < losses[0], losses


@pytest.mark.long
def test_dpt_point_robot_smoke_trains(ad_run, tmp_path):
    config = load_experiment("dpt_point_robot", "smoke")
    data = dataclasses.replace(config.data, path=str(ad_run / "dataset"))
    run_dir = fit(dataclasses.replace(config, data=data), tmp_path, progress=False)
    losses = _losses(run_dir)
    assert losses and all(math.isfinite(x) for x in losses)


@pytest.mark.long
def test_ad_point_robot_evaluates_on_held_out_goals(ad_run, tmp_path):
    from agentrl.evaluate.run import evaluate_run

    split = json.loads((ad_run / "run.json").read_text())["split"]
    paths = evaluate_run(ad_run, num_episodes=3, out_dir=tmp_path, baselines=["oracle"])
    results = json.loads(paths["json"].read_text())
    assert {"ad", "oracle"} <= set(results["runs"])
    returns = np.asarray(results["runs"]["ad"][0]["returns"], float)
    assert returns.shape == (len(split["test"]), 3)  # 5 held-out goals x episodes
    assert np.isfinite(returns).all() and (returns < 0).all()
    oracle = np.asarray(results["runs"]["oracle"][0]["returns"], float)
    assert (oracle >= returns - 1e-4).all()  # nothing beats straight to the goal
    # the final episode's return against each held-out goal's distance
    assert paths["return_vs_task"].read_bytes()[:4] == b"\x89PNG"
    param = results["runs"]["ad"][0]["metadata"]["task_parameter"]
    assert "distance" in param["name"] and len(param["values"]) == len(split["test"])


@pytest.mark.long
@pytest.mark.parametrize("name", ["t2mir_ad_point_robot", "t2mir_dpt"])
def test_t2mir_trains_on_continuous_actions(ad_run, tmp_path, name):
    """T2MIR over AD (sequence-wise task routing, T2MIR's Point-Robot
    setting) and over DPT, with the Gaussian head, on the AD run's PPO
    histories: the loss (base, balance and contrastive terms) stays finite
    and the Gaussian base loss falls. 35-50 s of CPU each (the MoE's
    compile)."""
    from agentrl.algos import T2MIR

    if name == "t2mir_dpt":
        dpt = load_experiment("dpt_point_robot", "smoke")
        config = dataclasses.replace(
            dpt,
            name="t2mir_dpt_point_robot",
            algo=T2MIR(base=dpt.algo),
            model=dataclasses.replace(dpt.model, moe_layers=(1,)),
        )
    else:
        config = load_experiment(name, "smoke")
        assert config.model.task_routing == "sequence"
    data = dataclasses.replace(config.data, path=str(ad_run / "dataset"))
    run_dir = fit(dataclasses.replace(config, data=data), tmp_path, progress=False)
    assert json.loads((run_dir / "config.json").read_text())["model"]["head"] == (
        "gaussian"
    )
    lines = [
        json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    lines = [x for x in lines if "base_loss" in x]
    assert lines and all(
        math.isfinite(x[k])
        for x in lines
        for k in ("loss", "base_loss", "balance_loss", "contrastive_loss")
    )
    if name != "t2mir_dpt":
        assert np.mean([x["base_loss"] for x in lines[-2:]]) < lines[0]["base_loss"]
