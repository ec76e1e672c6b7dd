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
    _assert_reference_training()
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


#: the feed-forward nonlinearity of each reference whose model a gpu / full
#: preset carries (docs/fidelity.md item 25): AD-eps and the XLand AD
#: baseline torch's exact nn.GELU(), Meta-DT's policy ReLU, T2MIR's AD
#: configs and AMAGO's transformer leaky ReLU (RA-DT, a GPT-2 as DPT's,
#: keeps the default)
REFERENCE_ACTIVATIONS = {
    "gelu": ("ad_eps_darkroom", "ad_eps_key_to_door", "xland_ad"),
    "relu": ("meta_dt_darkroom", "meta_dt_point_robot"),
    "leaky_relu": (
        "ad_point_robot", "t2mir_ad_point_robot", "ad_halfcheetah_vel",
        "t2mir_ad_halfcheetah_vel", "ad_walker_params", "amago_darkroom",
        "amago_bandit", "amago_key_to_door", "amago_tmaze",
    ),
    "gelu_tanh": (
        "dpt_bandit", "dpt_darkroom", "dpt_halfcheetah_vel", "radt_key_to_door",
    ),
}  # fmt: skip


def test_paper_scale_presets_take_their_references_ffn_activation():
    for activation, experiments in REFERENCE_ACTIVATIONS.items():
        for name in experiments:
            for preset in ("gpu", "full"):
                got = load_experiment(name, preset).model.ffn_activation
                assert got == activation, (name, preset, got)
    # T2MIR's own Dark Room setup at GPU scale and at its config's scale
    for name in ("ad_darkroom", "t2mir_ad_darkroom"):
        for preset in ("t2mir_setup_gpu", "t2mir_setup_full"):
            assert load_experiment(name, preset).model.ffn_activation == "leaky_relu"
    # the cpu presets keep the form their records were made with
    for name in ("ad_eps_darkroom", "meta_dt_darkroom", "ad_point_robot"):
        assert load_experiment(name, "cpu").model.ffn_activation == "gelu_tanh"
    assert load_experiment("ad_darkroom", "t2mir_setup").model.ffn_activation == (
        "gelu_tanh"
    )


def test_amago_derived_blocks_at_paper_scale_are_normformers():
    """AMAGO's transformer and T2MIR-AD's (a fork of it) scale each head's
    output and norm the attention output and the FFN's hidden units; the
    other references' blocks (GPT-2's, AD-eps's, Meta-DT's) do not."""
    amago_blocks = REFERENCE_ACTIVATIONS["leaky_relu"]
    cases = [(name, p) for name in amago_blocks for p in ("gpu", "full")]
    cases += [("t2mir_ad_darkroom", p) for p in ("t2mir_setup_gpu", "t2mir_setup_full")]
    for name, preset in cases:
        assert load_experiment(name, preset).model.normformer, (name, preset)
    for name in ("ad_eps_darkroom", "meta_dt_darkroom", "dpt_darkroom", "xland_ad"):
        assert not load_experiment(name, "full").model.normformer
    for name in amago_blocks[:3]:
        assert not load_experiment(name, "cpu").model.normformer
    assert not load_experiment("t2mir_dpt_darkroom", "t2mir_setup_gpu").model.normformer


def test_ad_eps_full_presets_take_its_three_tokens_a_step():
    """AD-eps's ``ADTransformer`` interleaves ``(s_t, a_t, r_t)`` and reads the
    action at the state token: ``"sar"`` at ``full``; ``gpu`` (sized for
    minutes) and RA-DT (its own GPT-2) keep one token a step."""
    for name in ("ad_eps_darkroom", "ad_eps_key_to_door"):
        assert load_experiment(name, "full").model.token_layout == "sar"
        assert load_experiment(name, "gpu").model.token_layout == "step"
    assert load_experiment("radt_key_to_door", "full").model.token_layout == "step"


def _fields(name: str, preset: str, *paths: str) -> tuple:
    config = load_experiment(name, preset)
    out = []
    for path in paths:
        part, field = path.split(".")
        out.append(getattr(getattr(config, part), field))
    return tuple(out)


def _assert_reference_training():
    """The full presets' training, as the reference code has it (docs/fidelity.md
    item 13, with the file each value comes from)."""
    # ad-eps dark_room/ad_darkroom.py: 4 heads, Adam without decay, warm-up a
    # tenth of one pass (5,078 batches), cosine to 0; key_to_door: batch 8
    ad_eps = ("model.num_heads", "train.weight_decay", "train.cosine_end")
    assert _fields("ad_eps_darkroom", "full", *ad_eps) == (4, 0.0, 0.0)
    assert load_experiment("ad_eps_darkroom", "full").train.warmup == 5078
    assert _fields("ad_eps_key_to_door", "full", *ad_eps, "train.batch_size") == (
        4, 0.0, 0.0, 8,
    )  # fmt: skip
    # RA-DT: radt_disc_icl + finetune, DecisionTransformerSb3's defaults
    radt = ("train.steps", "train.batch_size", "train.lr", "train.weight_decay",
            "train.warmup_steps", "train.grad_clip", "train.cosine_end")  # fmt: skip
    for name in ("radt_darkroom", "radt_key_to_door"):
        assert _fields(name, "full", *radt) == (
            100_000,
            128,
            1e-4,
            1e-2,
            4000,
            0.25,
            0.01,
        )
    # Meta-DT: LambdaLR warm-up then constant, clip 0.25 (gpu and full)
    for name in ("meta_dt_point_robot", "meta_dt_darkroom"):
        for preset in ("gpu", "full"):
            assert _fields(name, preset, "train.schedule", "train.grad_clip") == (
                "constant", 0.25,
            )  # fmt: skip
    # T2MIR-AD configs: Point-Robot 3 layers / batch 32 / dropout 0.05, Walker
    # batch 32, HalfCheetah 24; every cosine to 0 at full
    point = ("model.num_layers", "train.batch_size", "model.dropout")
    for preset in ("gpu", "full"):
        assert _fields("ad_point_robot", preset, *point) == (3, 32, 0.05)
    assert _fields("ad_walker_params", "full", "train.batch_size") == (32,)
    assert _fields("ad_halfcheetah_vel", "full", "train.batch_size") == (24,)
    for name in ("ad_point_robot", "ad_walker_params", "ad_halfcheetah_vel",
                 "dpt_halfcheetah_vel", "ad_eps_darkroom", "xland_ad"):  # fmt: skip
        assert _fields(name, "full", "train.cosine_end") == (0.0,), name
    assert _fields("dpt_halfcheetah_vel", "full", "model.dropout") == (0.05,)
    t2mir_room = ("model.d_model", "train.batch_size", "model.dropout", "train.steps")
    for name in ("ad_darkroom", "t2mir_ad_darkroom"):
        assert _fields(name, "t2mir_setup_full", *t2mir_room) == (64, 128, 0.0, 300_000)
    assert _fields("xland_ad", "full", "train.weight_decay") == (0.0,)
    _assert_reference_adam_and_dropout()


#: Adam's b2 and the rates of the three dropout sites
ADAM_AND_DROPOUT = ("train.adam_b2", "model.attention_dropout",
                    "model.residual_dropout", "model.embedding_dropout")  # fmt: skip


def _assert_reference_adam_and_dropout():
    """Adam's b2 and the dropout sites where the reference code sets them."""
    # ad-eps dark_room/ad_darkroom.py TrainConfig lines 43-45 (attention 0.5,
    # residual 0.1, embedding 0.3: ADTransformer's defaults, 0.0 and 0.1 for
    # the last two, overridden) and 50 (betas (0.9, 0.99)); the same in
    # key_to_door/ad_dark_key2door.py lines 44-46 and 51
    for name in ("ad_eps_darkroom", "ad_eps_key_to_door"):
        assert _fields(name, "full", *ADAM_AND_DROPOUT) == (0.99, 0.5, 0.1, 0.3)
    # xland-minigrid-datasets baselines/ad/configs/xland.yaml line 10 (betas
    # (0.9, 0.99)), lines 24-26 (dropout: attention 0, residual 0, embedding 0.1)
    for preset in ("gpu", "full"):
        assert _fields("xland_ad", preset, *ADAM_AND_DROPOUT) == (0.99, 0.0, 0.0, 0.1)
    # the smaller presets keep optax's b2 and one rate
    for name in ("ad_eps_darkroom", "ad_eps_key_to_door", "xland_ad"):
        for preset in ("smoke", "cpu"):
            got = _fields(name, preset, *ADAM_AND_DROPOUT)
            assert got == (0.999, 0.0, None, None), (name, preset)
    assert _fields("ad_eps_darkroom", "gpu", *ADAM_AND_DROPOUT) == (
        0.999, 0.0, None, None,
    )  # fmt: skip
    # RA-DT's Key-to-Door takes ad_eps_key_to_door's data, not its training
    assert _fields("radt_key_to_door", "full", *ADAM_AND_DROPOUT) == (
        0.999, 0.0, None, None,
    )  # fmt: skip


def test_xland_ad_teacher_is_the_collectors_gru_at_gpu_and_full_only():
    """xland-minigrid-datasets collection/configs/trivial_base.yaml line 14:
    a GRU of 256 units; training/nn.py lines 100-160: cell embeddings under
    convolutions. The smoke and cpu presets keep the MLP teacher (committed
    records were made with it)."""
    for preset in ("gpu", "full"):
        (args,) = _fields("xland_ad", preset, "data.source_args")
        want = {"core": "gru", "core_hidden": 256, "obs_encoder": "cells"}
        assert dict(args) == want, preset
    for preset in ("smoke", "cpu"):
        assert _fields("xland_ad", preset, "data.source_args") == ((),), preset


def test_the_relic_preset_takes_relics_ppo_on_the_cpu_presets_budget():
    """aielawady/relic 1c3b7a1 (docs/references.md): transformer_tiny's 2
    layers of 8 heads, width 64, MLP 256, trainable Sink-KV, positions
    restarting each episode with RoPE over the episode, old episodes
    shuffled after each partial update; 4 epochs of 2
    steps (8 minibatches, gradients summed over 4), GAE stopped at episode
    ends, one full update ending the trial, advantages not normalised,
    habitat-baselines' clipped value loss, rewards unscaled; Adam without
    decay at 2e-4, gradient norm 0.2, the rate recomputed from the env
    steps before every update: warm-up from 1e-3 of it over 10,000 env
    steps, then cosine to 1e-5. The trials, envs, data, budget and
    evaluation are the cpu preset's (whose rate keeps one value a trial)."""
    model = ("model.num_layers", "model.num_heads", "model.d_model",
             "model.d_ff", "model.attention_sink", "model.positions")  # fmt: skip
    assert _fields("transformer_ppo_darkroom", "relic", *model) == (
        2, 8, 64, 256, True, "episode",
    )  # fmt: skip
    algo = ("algo.num_epochs", "algo.num_minibatches",
            "algo.summed_minibatches", "algo.advantage_scope",
            "algo.full_update", "algo.normalize_advantages",
            "algo.clip_values", "algo.reward_scale",
            "algo.shuffle_episodes", "algo.lr_clock",
            "algo.lr_warmup_env_steps", "algo.lr_warmup_start")  # fmt: skip
    assert _fields("transformer_ppo_darkroom", "relic", *algo) == (
        4, 2, 4, "episode", True, False, True, 1.0, True, "env_steps",
        10_000, 1e-3,
    )  # fmt: skip
    train = ("train.lr", "train.weight_decay", "train.schedule",
             "train.cosine_end", "train.grad_clip", "train.warmup")  # fmt: skip
    assert _fields("transformer_ppo_darkroom", "relic", *train) == (
        2e-4, 0.0, "cosine", 0.05, 0.2, 0,
    )  # fmt: skip
    relic = load_experiment("transformer_ppo_darkroom", "relic")
    cpu = load_experiment("transformer_ppo_darkroom", "cpu")
    assert (relic.data, relic.eval) == (cpu.data, cpu.eval)
    same = ("trial_episodes", "num_envs", "update_every", "gamma", "gae_lambda",
            "clip_eps", "ent_coef", "vf_coef")  # fmt: skip
    for field in same:
        assert getattr(relic.algo, field) == getattr(cpu.algo, field), field
    for field in ("steps", "log_every", "checkpoint_every", "adam_b2"):
        assert getattr(relic.train, field) == getattr(cpu.train, field), field
    assert cpu.algo.lr_clock == "trial"  # the cpu record's one rate a trial
