"""Config validation and overrides fail early, naming the field."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from agentrl import configtools
from agentrl.train.config import DataConfig, ExperimentConfig, TrainConfig
from agentrl.train.experiments import load_experiment
from agentrl.train.step import make_optimizer


def test_presets_of_every_experiment_load():
    for name in [
        "ad_darkroom",
        "ad_eps_darkroom",
        "t2mir_ad_darkroom",
        "dpt_bandit",
        "dpt_darkroom",
        "t2mir_dpt_darkroom",
        "dt_darkroom",
    ]:
        for preset in ["smoke", "cpu", "full"]:
            config = load_experiment(name, preset)
            assert isinstance(config, ExperimentConfig)
    assert load_experiment("t2mir_ad_darkroom", "smoke").model.moe_layers == (1,)
    assert load_experiment("ad_eps_darkroom", "smoke").data.source == "noisy_oracle"


@pytest.mark.parametrize(
    "name", ["ad_darkroom", "ad_eps_darkroom", "dt_darkroom", "dpt_darkroom"]
)
@pytest.mark.parametrize("preset", ["smoke", "cpu", "gpu", "full"])
def test_dark_room_presets_fit_their_environment(name, preset):
    """Model completion and DPT's context length, checked without compiling."""
    from agentrl.envs import make
    from agentrl.models.config import complete_model_config

    config = load_experiment(name, preset)
    env = make(config.data.env, **dict(config.data.env_args))
    model = complete_model_config(config.model, env, config.algo)
    if config.algo.name == "dt":
        assert model.obs_encoding == "table" and model.obs_kind == "continuous"
    else:
        assert model.obs_encoding == "grid" and model.grid_size == env.size
    if config.algo.name == "dpt":
        # uniform roll-ins store every successor, with steps beyond the
        # context for the query (the reference's independent query state)
        assert dict(config.data.source_args).get("rollin") == "uniform"
        assert config.algo.query == "beyond_context"
        steps = config.data.num_episodes * env.horizon
        assert config.algo.context_size < steps
        assert model.max_steps == config.algo.context_size + 1
    else:  # the window is the training context, derived from the horizon
        assert model.max_steps == config.algo.context_episodes * env.horizon


def test_demo_preset_is_the_ad_pipeline_between_smoke_and_cpu():
    demo = load_experiment("ad_darkroom", "demo")
    smoke, cpu = (load_experiment("ad_darkroom", p) for p in ("smoke", "cpu"))
    # the acting rule chosen on validation goals (ad_darkroom's docstring)
    assert demo.algo.name == "ad" and demo.eval.acting == "sample_then_greedy"
    assert smoke.train.steps < demo.train.steps < cpu.train.steps
    with pytest.raises(ValueError, match="preset must be one of"):
        load_experiment("dpt_bandit", "demo")


def test_overrides_by_path_and_unique_name():
    c = load_experiment("ad_darkroom", "smoke", {"train.lr": "3e-3", "num_layers": "3"})
    assert c.train.lr == 3e-3 and c.model.num_layers == 3
    c = configtools.override(c, {"env_args": "(('size', 7),)"})
    assert c.data.env_args == (("size", 7),)


@pytest.mark.parametrize(
    "overrides,match",
    [
        ({"train.lrr": "1"}, "unknown config field 'train.lrr'.*train.lr"),
        ({"seed": "1"}, "ambiguous"),
        ({"train.lr": "fast"}, "train.lr must be of type float"),
        ({"train.steps": "0"}, "train.steps must be >= 1"),
        ({"algo": "ppo"}, "algo must be one of"),
        ({"model.token_layout": "grid"}, "ModelConfig.token_layout must be one of"),
        ({"model.moe_layers": "(1,)"}, "model.moe_layers must be empty"),
        ({"data.split_fraction": "1.5"}, "data.split_fraction"),
        ({"algo.episode_stride": "0"}, "algo.episode_stride must be >= 1"),
        ({"train.episode_stride": "2"}, "unknown config field 'train.episode_stride'"),
    ],
)
def test_bad_overrides_name_the_field(overrides, match):
    with pytest.raises(ValueError, match=match):
        load_experiment("ad_darkroom", "smoke", overrides)


def test_t2mir_needs_even_batch_and_dpt_needs_transition_layout():
    with pytest.raises(ValueError, match="batch_size must be even"):
        load_experiment("t2mir_ad_darkroom", "smoke", {"train.batch_size": "7"})
    with pytest.raises(ValueError, match="token_layout must be transition"):
        load_experiment("dpt_bandit", "smoke", {"model.token_layout": "step"})
    # strided windows are AD's: DPT has no such field
    with pytest.raises(ValueError, match="unknown config field 'episode_stride'"):
        load_experiment("dpt_bandit", "smoke", {"episode_stride": "2"})


def test_cli_override_parsing_and_roundtrip():
    got = configtools.parse_cli_overrides(["--train.lr", "1e-3", "--num-layers=2"])
    assert got == {"train.lr": "1e-3", "num_layers": "2"}
    with pytest.raises(ValueError, match="missing value"):
        configtools.parse_cli_overrides(["--lr"])
    config = ExperimentConfig(
        data=DataConfig(env_args=(("size", 5),)), train=TrainConfig(steps=3)
    )
    again = configtools.from_dict(ExperimentConfig, configtools.to_dict(config))
    assert again == config


def test_unknown_experiment_lists_known():
    with pytest.raises(ValueError, match="experiments has: .*ad_darkroom"):
        load_experiment("nope")


def test_no_gradient_clipping_keeps_the_optimizer_state_and_clips_nothing():
    """``train.grad_clip=None`` (the DPT reference's optimiser): AdamW on the
    raw gradients, with the same state structure as a clipped chain, so a
    config changes clipping without changing the checkpoint layout; 0 and
    negative clips are refused, naming the field."""
    train = TrainConfig(steps=10, lr=1e-2, warmup_steps=0, schedule="constant")
    params = {"w": jnp.ones(3)}
    grads = [{"w": jnp.full(3, 100.0)}, {"w": jnp.full(3, 0.1)}]

    def updates(tx):
        state, out = tx.init(params), []
        for g in grads:
            u, state = tx.update(g, state, params)
            out.append(np.asarray(u["w"]))
        return out, state

    free, free_state = updates(
        make_optimizer(TrainConfig(**{**vars(train), "grad_clip": None}))
    )
    clipped, clipped_state = updates(make_optimizer(train))
    plain, _ = updates(optax.adamw(1e-2, weight_decay=train.weight_decay))
    np.testing.assert_allclose(free[1], plain[1], rtol=1e-6)
    assert np.abs(free[1] - clipped[1]).max() > 1e-4  # clipping changed Adam's moments
    assert jax.tree.structure(free_state) == jax.tree.structure(clipped_state)
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="train.grad_clip"):
            TrainConfig(grad_clip=bad)


def _adam_by_hand(grads, lr, b1, b2, eps):
    """Adam's updates for ``grads`` (a list of arrays), written out."""
    m = v = 0.0
    out = []
    for t, g in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
        out.append(-lr * m_hat / (np.sqrt(v_hat) + eps))
    return out


def test_adam_b2_reaches_the_optimizer():
    """``train.adam_b2`` (the AD-ε and XLand AD references' 0.99) is Adam's
    second-moment decay in ``make_optimizer``: its updates are Adam's with
    that b2 written out by hand, and differ from the default's (0.999)."""
    params = {"w": jnp.ones(3)}
    grads = [np.array([1.0, -2.0, 0.5]), np.array([0.1, 3.0, -1.0])]
    grads += [np.array([2.0, 0.2, 0.3])]

    def updates(train):
        tx = make_optimizer(train)
        state, out = tx.init(params), []
        for g in grads:
            u, state = tx.update({"w": jnp.asarray(g)}, state, params)
            out.append(np.asarray(u["w"]))
        return out

    base = dict(steps=10, lr=1e-2, warmup_steps=0, schedule="constant")
    plain = dict(weight_decay=0.0, grad_clip=None)
    got = updates(TrainConfig(**base, **plain, adam_b2=0.99))
    want = _adam_by_hand(grads, 1e-2, 0.9, 0.99, 1e-8)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5)
    default = updates(TrainConfig(**base, **plain))
    assert TrainConfig().adam_b2 == 0.999
    by_hand = _adam_by_hand(grads, 1e-2, 0.9, 0.999, 1e-8)
    np.testing.assert_allclose(default[2], by_hand[2], rtol=1e-5)
    # bias correction hides b2 at first: 2.7e-3 apart by the third step
    assert not np.allclose(default[2], got[2], rtol=1e-3, atol=0.0)
    # with decay and clipping, b2 is the only difference from optax.adamw's
    decayed = updates(TrainConfig(**base, adam_b2=0.99, grad_clip=100.0))
    tx = optax.adamw(1e-2, b2=0.99, weight_decay=TrainConfig().weight_decay)
    state = tx.init(params)
    for g, a in zip(grads, decayed, strict=True):
        u, state = tx.update({"w": jnp.asarray(g)}, state, params)
        np.testing.assert_allclose(a, u["w"], rtol=1e-6)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.5, 1.5, float("nan"), True, "0.99"])
def test_adam_b2_outside_zero_one_is_refused_naming_the_field(bad):
    with pytest.raises(ValueError, match=r"train.adam_b2 must be in \(0, 1\)"):
        TrainConfig(adam_b2=bad)


def test_adam_b2_is_a_static_setting_overridable_by_name():
    c = load_experiment("ad_darkroom", "smoke", {"train.adam_b2": "0.99"})
    assert c.train.adam_b2 == 0.99
    assert "train.adam_b2" not in configtools.traced_values(c)  # static
    with pytest.raises(ValueError, match="train.adam_b2"):
        load_experiment("ad_darkroom", "smoke", {"train.adam_b2": "1"})


def test_online_learners_take_adam_b2():
    """The online trainers' chain (RL², transformer PPO, AMAGO) uses the
    shape's ``adam_b2``, which the programs fill from ``train.adam_b2``."""
    import types

    from agentrl.online.ppo import trial_optimizer
    from agentrl.online.program import _common

    params = {"w": jnp.ones(3)}
    grads = [np.array([1.0, -2.0, 0.5]), np.array([0.1, 3.0, -1.0])]
    shape = types.SimpleNamespace(lr_shape=None, grad_clip=None, adam_b2=0.99)
    tx = trial_optimizer(shape, {"lr": 1e-2, "weight_decay": 0.0}, 0)
    state = tx.init(params)
    want = _adam_by_hand(grads, 1e-2, 0.9, 0.99, 1e-5)
    for g, w in zip(grads, want, strict=True):
        u, state = tx.update({"w": jnp.asarray(g)}, state, params)
        np.testing.assert_allclose(u["w"], w, rtol=1e-5)
    config = load_experiment("rl2_darkroom", "smoke", {"train.adam_b2": "0.95"})
    assert _common(config, None)["adam_b2"] == 0.95


def test_a_saved_config_with_a_retired_field_loads_at_its_neutral_value():
    """Run folders saved before ``model.router_hidden`` was retired (session
    50) hold ``"router_hidden": null``: they load; another value meant a
    model this code no longer builds, and is refused naming the field."""
    config = load_experiment("ad_darkroom", "smoke")
    saved = configtools.to_dict(config)
    saved["model"]["router_hidden"] = None
    assert configtools.from_dict(ExperimentConfig, saved) == config
    saved["model"]["router_hidden"] = 32
    with pytest.raises(ValueError, match=r"model\.router_hidden=32"):
        configtools.from_dict(ExperimentConfig, saved)
    saved["model"]["no_such_field"] = 1
    del saved["model"]["router_hidden"]
    with pytest.raises(ValueError, match="unknown field 'no_such_field'"):
        configtools.from_dict(ExperimentConfig, saved)
