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


@pytest.mark.long
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
    assert len(set(ids)) == 4 and set(ids) <= {int(i) for i in run.split["test"]}
    assert jax.tree.leaves(params)[0].shape[0] == 4


def test_load_run_names_a_directory_that_is_not_a_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a training run directory"):
        agentrl.load_run(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json is not valid JSON"):
        agentrl.load_run(tmp_path)


def test_a_run_prints_as_one_short_line(tmp_path):
    # print(agentrl.load_run(...)) showed the whole config and every
    # parameter array (~430 lines); the repr says what the run is
    from agentrl.train.rundir import Run

    config = load_experiment("ad_darkroom", "smoke")
    big_model = list(range(100_000))  # stands in for the model's parameters
    split = {"train": list(range(60)), "validation": [1, 2], "test": [3, 4, 5]}
    run = Run(tmp_path / "ad", config, big_model, None, split, step=345)
    text = repr(run)
    assert "\n" not in text and len(text) < 200, len(text)
    assert text == str(run)
    for part in ("step=345", "algo='ad'", "env='darkroom'", "2 validation, 3 test"):
        assert part in text
