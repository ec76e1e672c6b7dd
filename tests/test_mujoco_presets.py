"""The HalfCheetah-Vel learners' presets: shared data, trials and sizes.

Config-only (no MJX, no brax import): fast. The smoke presets train and
evaluate in ``tests/test_mujoco_experiments.py`` (``make test-long``).

- DPT's data are AD's SAC runs (same family, horizon, histories, episodes,
  seed and split) with the final policy's labels, at every preset, and its
  context is one episode;
- the online learners' ``data`` block (their evaluation's SAC baseline) is
  AD's at every preset, so the four learners' normalized scores share one
  oracle; a trial is ``trial_episodes`` whole episodes and one evaluation
  trial is what they are evaluated on;
- the gpu presets' sizes (the basis of their "about 3 min on one H100"
  estimates) and the reference settings they claim;
- SAC's replay buffer is T2MIR's collector's on each family (Walker-Params'
  100,000 at ``gpu`` and ``full``).
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import jax.numpy as jnp
import pytest

import agentrl.envs.spaces as spaces
from agentrl.sources.sac import make_config
from agentrl.train.experiments import PRESET_NAMES, load_experiment

ONLINE = ("rl2_halfcheetah_vel", "transformer_ppo_halfcheetah_vel")


def _horizon(config) -> int:
    return dict(config.data.env_args)["horizon"]


@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_dpt_reads_ads_sac_runs_with_final_policy_labels(preset):
    ad = load_experiment("ad_halfcheetah_vel", preset).data
    dpt = load_experiment("dpt_halfcheetah_vel", preset)
    assert dict(dpt.data.source_args) == {"labels": "final_policy"}
    assert dataclasses.replace(dpt.data, source_args=()) == ad
    assert dpt.algo.context_size == _horizon(dpt)  # one episode
    assert dpt.eval == load_experiment("ad_halfcheetah_vel", preset).eval


@pytest.mark.parametrize("preset", PRESET_NAMES)
@pytest.mark.parametrize("name", ONLINE)
def test_online_learners_share_ads_sac_baseline_and_run_whole_trials(name, preset):
    config = load_experiment(name, preset)
    assert config.data == load_experiment("ad_halfcheetah_vel", preset).data
    algo = config.algo
    trial = algo.trial_episodes * _horizon(config)
    assert config.eval.num_episodes == algo.trial_episodes  # one trial
    assert algo.num_envs % algo.num_minibatches == 0
    if name.startswith("rl2"):
        assert trial % algo.rollout_steps == 0
    else:
        assert trial % algo.update_every == 0
        assert algo.update_every == _horizon(config)  # one update an episode


def test_reference_settings():
    for name in ONLINE:  # garage's / TrMRL's HalfCheetahVel trials
        for preset in ("cpu", "gpu", "full"):
            algo = load_experiment(name, preset).algo
            assert (algo.trial_episodes, algo.gamma, algo.gae_lambda) == (4, 0.99, 0.95)
            assert load_experiment(name, preset).train.lr == 2.5e-4
    assert load_experiment("rl2_halfcheetah_vel", "cpu").algo.hidden == 64
    for preset in ("gpu", "full"):  # TrMRL's transformer
        model = load_experiment("transformer_ppo_halfcheetah_vel", preset).model
        assert (model.num_layers, model.num_heads, model.d_model, model.d_ff) == (
            2,
            8,
            128,
            512,
        )
        dpt = load_experiment("dpt_halfcheetah_vel", preset)  # T2MIR-DPT's
        model = dpt.model
        assert (model.num_layers, model.num_heads, model.d_model, model.d_ff) == (
            4,
            4,
            128,
            512,
        )
        assert (dpt.train.batch_size, dpt.train.lr, dpt.train.weight_decay) == (
            32,
            3e-4,
            1e-4,
        )
    full = load_experiment("dpt_halfcheetah_vel", "full").train
    assert (full.steps, full.warmup_steps) == (100_000, 10_000)


def test_gpu_preset_sizes():
    """What the "about 3 min on one H100" estimates were sized on."""
    rl2 = load_experiment("rl2_halfcheetah_vel", "gpu")
    steps = rl2.algo.num_envs * rl2.algo.rollout_steps * rl2.train.steps
    assert steps == 1024 * 200 * 40  # 8.2M env steps
    tppo = load_experiment("transformer_ppo_halfcheetah_vel", "gpu")
    trial = tppo.algo.trial_episodes * _horizon(tppo)
    assert tppo.algo.num_envs * trial * tppo.train.steps == 512 * 800 * 20
    dpt = load_experiment("dpt_halfcheetah_vel", "gpu")
    assert (dpt.data.num_tasks, dpt.data.num_episodes, _horizon(dpt)) == (45, 100, 200)
    assert dpt.train.steps == 5000 and dpt.model.compute_dtype == "bfloat16"
    for config in (rl2, tppo, dpt):
        assert _horizon(config) == 200  # the references' horizon
        assert (config.eval.num_tasks, config.data.split_fraction) == (5, 0.9)


def test_halfcheetah_cpu_histories_hold_learning_read_by_t2mirs_loader():
    """HalfCheetah-Vel's cpu data are 8 x 600 SAC episodes, AD and T2MIR-AD
    read them (and every other preset's) with T2MIR's loader; Walker-Params
    keeps its 16 x 120 and AD's own windows (what its records used)."""
    ad = load_experiment("ad_halfcheetah_vel", "cpu")
    assert (ad.data.num_tasks, ad.data.num_episodes) == (8, 600)
    loader = (ad.algo.window_start, ad.algo.episode_window, ad.algo.eval_context)
    assert loader == ("episode", "subset_by_return", "sorted_episodes")
    t2mir = load_experiment("t2mir_ad_halfcheetah_vel", "cpu")
    assert t2mir.data == ad.data and t2mir.algo.base == ad.algo
    walker = load_experiment("ad_walker_params", "cpu")
    assert (walker.data.num_tasks, walker.data.num_episodes) == (16, 120)
    assert walker.algo.eval_context != "sorted_episodes"
    for preset in ("smoke", "gpu", "full"):  # T2MIR's loader at every size
        algo = load_experiment("t2mir_ad_halfcheetah_vel", preset).algo.base
        assert (algo.window_start, algo.eval_context) == ("episode", "sorted_episodes")
        walker = load_experiment("ad_walker_params", preset).algo
        assert (walker.window_start, walker.eval_context) == ("any", "rolling")


def _sac_buffer(name: str, preset: str) -> int:
    """The replay buffer SAC resolves for ``name``'s data at ``preset``
    (an action box and a horizon stand in for the family: no brax)."""
    data = load_experiment(name, preset).data
    env = SimpleNamespace(
        horizon=dict(data.env_args)["horizon"],
        action_space=lambda _: spaces.Box(-1.0, 1.0, (6,), jnp.float32),
    )
    return make_config(env, data.num_episodes, **dict(data.source_args)).buffer_size


def test_sac_buffer_is_t2mirs_collectors():
    """T2MIR-DPT's ``capacity``: 100,000 in ``args_walker_v0.yaml``, 10,000 in
    ``args_cheetah_vel_v0.yaml`` (SAC's default); Walker's ``cpu`` preset
    keeps the default its records used."""
    for preset in ("gpu", "full"):
        assert _sac_buffer("ad_walker_params", preset) == 100_000
    assert _sac_buffer("ad_walker_params", "cpu") == 10_000
    for preset in ("cpu", "gpu", "full"):
        for name in ("ad_halfcheetah_vel", "dpt_halfcheetah_vel"):
            assert _sac_buffer(name, preset) == 10_000
