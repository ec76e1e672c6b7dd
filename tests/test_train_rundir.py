"""Opening a trained run: parameters only, the run's config, env and split."""

import jax
import numpy as np
import pytest
from flax import nnx

import agentrl
from agentrl import configtools
from agentrl.train.checkpoint import Checkpointer
from agentrl.train.config import complete_config
from agentrl.train.experiments import load_experiment
from agentrl.train.loop import build_model, fit
from agentrl.train.step import init_train_state


@pytest.mark.parametrize("name", ["ad_darkroom", "t2mir_ad_darkroom"])
def test_load_run_restores_exactly_the_saved_parameters(
    name, darkroom_dataset, tmp_path
):
    config = configtools.override(
        load_experiment(name, "smoke"),
        {
            "data.path": str(darkroom_dataset),
            "train.steps": 3,
            "train.checkpoint_every": 3,
            "train.batch_size": 4,
        },
    )
    run_dir = fit(config, tmp_path / name, progress=False)
    run = agentrl.load_run(run_dir)
    assert run.step == 3 and run.config.algo.label == config.algo.label
    assert run.env.size == 9 and run.split is not None

    # the whole saved state (optimizer and, for T2MIR, the EMA router too)
    full = complete_config(config, run.env)
    _, like = init_train_state(build_model(config, run.env), full)
    ckpt = Checkpointer(run_dir / "checkpoints", 3)
    try:
        saved, _ = ckpt.restore(like)
    finally:
        ckpt.close()
    got = jax.tree.leaves(nnx.state(run.model, nnx.Param))
    want = jax.tree.leaves(saved["params"])
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    # trained: not the initial parameters
    init = jax.tree.leaves(like["params"])
    assert any(not np.array_equal(g, i) for g, i in zip(got, init, strict=True))

    params, ids = run.held_out(num_tasks=4)
    assert ids == [int(i) for i in run.split["test"][:4]]
    assert jax.tree.leaves(params)[0].shape[0] == 4


def test_load_run_names_a_directory_that_is_not_a_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a training run directory"):
        agentrl.load_run(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json is not valid JSON"):
        agentrl.load_run(tmp_path)


def test_a_run_saved_by_the_old_config_format_resumes(tmp_path):
    """agentrl <= 0.1.0 saved the algorithm as a name with its fields in
    ``train``/``model`` and the preset's derived warm-up: same run today
    (with the episode-aligned windows those runs trained on)."""
    import json

    from agentrl.envs import make
    from agentrl.train.rundir import check_resumable

    config = load_experiment("t2mir_ad_darkroom", "smoke")
    today = complete_config(config, make("darkroom"))
    full = configtools.override(today, {"algo.base.window_start": "episode"})
    legacy = configtools.to_dict(full)
    algo = legacy.pop("algo")
    legacy["algo"] = "t2mir_ad"
    legacy["train"].update(
        warmup_steps=full.train.warmup,
        context_episodes=algo["base"]["context_episodes"],
        episode_stride=algo["base"]["episode_stride"],
        context_size=20,
        ema_tau=algo["ema_tau"],
    )
    legacy["model"].update(
        balance_weight=algo["balance_weight"],
        contrastive_weight=algo["contrastive_weight"],
    )
    (tmp_path / "config.json").write_text(json.dumps(legacy))
    check_resumable(tmp_path, full)  # no error: the same run
    # today's default windows start at any step: another run, named
    with pytest.raises(ValueError, match="window_start: 'episode' -> 'any'"):
        check_resumable(tmp_path, today)
    # more steps may change; the old run's warm-up was fixed, today's would
    # follow the steps, so it is named unless pinned to the old value
    longer = configtools.override(full, {"train.steps": 120})
    with pytest.raises(ValueError, match="train.warmup_steps: 6 -> None"):
        check_resumable(tmp_path, longer)
    pinned = configtools.override(longer, {"train.warmup_steps": 6})
    check_resumable(tmp_path, pinned)
    with pytest.raises(ValueError, match="algo.balance_weight: 0.1 -> 0.5"):
        check_resumable(tmp_path, configtools.override(full, {"balance_weight": 0.5}))
