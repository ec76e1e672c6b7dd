"""Shipped experiments: every preset loads, matches the references where the
fidelity issue says so (the gpu presets train on CPU in
tests/test_experiments_gpu_presets.py)."""

from __future__ import annotations

import pytest

from agentrl import envs
from agentrl.train.config import complete_config
from agentrl.train.experiments import (
    PRESET_NAMES,
    known_experiments,
    load_experiment,
    load_module,
)

# the XLand presets build XLand's environment (10-15 s each): `make test-long`
EXPERIMENTS = [
    pytest.param(n, marks=pytest.mark.long) if "xland" in n else n
    for n in known_experiments()
]


def _env(config):
    return envs.make(config.data.env, **dict(config.data.env_args))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_preset_loads_and_completes(name):
    presets = load_module(name).PRESETS
    assert set(PRESET_NAMES) <= set(presets), sorted(presets)
    for preset in presets:
        config = load_experiment(name, preset)
        complete_config(config, _env(config))  # model fields from the env


def test_presets_follow_the_reference_settings():
    for preset in PRESET_NAMES:
        bandit = load_experiment("dpt_bandit", preset)
        assert dict(bandit.data.env_args)["noise_std"] == 0.3  # DPT's code
        room = load_experiment("dpt_darkroom", preset)
        assert dict(room.data.env_args)["start"] == "corner"
        assert dict(room.data.source_args)["rollin"] == "uniform"
        for exp in ("ad_point_robot", "dpt_point_robot"):
            args = dict(load_experiment(exp, preset).data.env_args)
            assert (args["goals"], args["start_range"]) == ("uniform", 0.1)
        for exp in ("ad_darkroom", "ad_eps_darkroom", "t2mir_ad_darkroom"):
            config = load_experiment(exp, preset)
            algo = getattr(config.algo, "base", config.algo)
            assert algo.window_start == "any"
        for exp in ("t2mir_ad_darkroom", "t2mir_dpt_darkroom"):
            assert load_experiment(exp, preset).model.task_routing == "token"
        assert load_experiment("t2mir_ad_darkroom", preset).model.task_experts == 12
    # DPT's reference: constant AdamW, no warm-up, no clip, batch 64, and the
    # epochs its scripts evaluate (400 bandit, 200 Dark Room) of 1,250 batches
    for exp, lr, updates in (("dpt_bandit", 1e-4, 500_000),
                             ("dpt_darkroom", 1e-3, 250_000)):  # fmt: skip
        train = load_experiment(exp, "full").train
        assert (train.steps, train.batch_size, train.lr) == (updates, 64, lr)
        assert (train.schedule, train.warmup, train.grad_clip) == ("constant", 0, None)
        assert train.weight_decay == 1e-4
    full = load_experiment("ad_eps_darkroom", "full")
    assert (full.data.num_tasks, full.data.num_episodes) == (65, 20_000)
    assert dict(full.data.source_args) == {
        "epsilon_end": 0.3,
        "decay_fraction": 0.9,
        "schedule": "step",
    }
    # the reference acts greedily; the cpu preset's rule was chosen on
    # validation goals (the experiment's docstring)
    assert load_experiment("ad_eps_darkroom", "full").eval.acting == "greedy"
    assert load_experiment("ad_eps_darkroom", "gpu").eval.acting == "greedy"
    assert load_experiment("ad_eps_darkroom", "cpu").eval.acting == "sample_then_greedy"
    t2mir_ad = dict(load_experiment("ad_darkroom", "t2mir_setup").data.env_args)
    assert t2mir_ad == {"size": 10, "horizon": 100, "start": "corner"}
