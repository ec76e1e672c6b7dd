"""MuJoCo experiments: the HalfCheetah-Vel smoke preset trains and evaluates.

The AD smoke preset generates its own SAC histories on MJX (4 tasks x 4
episodes of 20 steps) and trains 40 steps; T2MIR-AD trains on the same
histories (``data.path``). The evaluation runs SAC learning online on the
held-out velocities beside the model, with its converged return as the
normalized score's oracle (HalfCheetah has none), and plots the final
episode's return against the target velocity. Minutes of compiling (MJX,
SAC, the model): ``make test-long``.
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
    from agentrl.evaluate.run import evaluate_run

    config = json.loads((ad_run / "config.json").read_text())
    assert config["model"]["head"] == "gaussian" and config["data"]["source"] == "sac"
    assert all(math.isfinite(x) for x in _losses(ad_run))
    split = json.loads((ad_run / "run.json").read_text())["split"]
    paths = evaluate_run(ad_run, num_episodes=2, num_tasks=2, out_dir=tmp_path)
    results = json.loads(paths["json"].read_text())
    assert set(results["runs"]) == {"ad", "random", "sac"}
    sac = results["runs"]["sac"][0]
    converged = sac["metadata"]["converged_return"]
    assert sac["metadata"]["source_episodes"] == config["data"]["num_episodes"]
    for name in ("ad", "random", "sac"):
        run = results["runs"][name][0]
        assert np.asarray(run["returns"], float).shape == (2, 2)
        assert run["metadata"]["oracle"] == "sac converged"
        np.testing.assert_allclose(run["oracle_return"], converged)
        param = run["metadata"]["task_parameter"]
        assert "velocity" in param["name"]
        held_out = _velocities(config)[split["test"]]
        assert all(np.isclose(v, held_out, rtol=1e-5).any() for v in param["values"])
    assert paths["return_vs_task"].read_bytes()[:4] == b"\x89PNG"
    assert "sac converged = 1" in paths["markdown"].read_text()


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
