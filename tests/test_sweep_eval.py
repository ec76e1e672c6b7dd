"""Sweeps evaluate every member in context on held-out tasks (scores with CIs)."""

from agentrl import configtools
from agentrl.sweep import run_sweep
from agentrl.train.experiments import load_experiment


def _tiny(dataset_path, steps=2):
    config = load_experiment("ad_darkroom", "smoke")
    return configtools.override(
        config,
        {
            "data.path": str(dataset_path),
            "train.steps": steps,
            "train.batch_size": 4,
            "train.warmup_steps": 1,
            "model.d_model": 16,
            "model.d_ff": 32,
            "model.num_layers": 1,
            "eval.num_tasks": 3,
            "eval.num_episodes": 2,
        },
    )


def test_sweep_evaluates_members_in_context(darkroom_dataset, tmp_path):
    config = _tiny(darkroom_dataset, steps=2)
    out = run_sweep(
        config,
        [0, 1],
        {"lr": [1e-3]},
        tmp_path / "ev",
        steps_per_call=2,
        progress=False,
    )
    (row,) = out.rows
    assert row["score_ci_low"] <= row["score"] <= row["score_ci_high"]
    assert -1.5 < row["score"] < 1.5
    assert "score" in out.paths["md"].read_text()


def test_vmapped_evaluation_matches_run_model_online(darkroom_dataset):
    import jax
    import numpy as np
    from flax import nnx

    from agentrl import envs
    from agentrl.data import open_dataset
    from agentrl.evaluate import run_model_online
    from agentrl.sweep import evaluate_members, held_out_tasks, train_sweep

    config = _tiny(darkroom_dataset, steps=2)
    env = envs.make("darkroom")
    dataset = open_dataset(darkroom_dataset)
    sweep = train_sweep(config, env, dataset, [0, 1], [{"lr": 1e-3}], steps_per_call=2)
    params = held_out_tasks(env, dataset, sweep.config)
    key = jax.random.key(7)
    returns = evaluate_members(sweep, env, params, key, 3)
    assert returns.shape == (2, 1, 3, 3)
    for m in range(2):
        member = jax.tree.map(lambda x, m=m: x[m], sweep.state)
        model = nnx.merge(sweep.graphdef, member["params"], member["rest"])
        history, _ = run_model_online(
            env, model, params, key, 3, protocol="ad",
            cache_steps=sweep.config.model.max_steps,
        )  # fmt: skip
        np.testing.assert_allclose(returns[m, 0], history.episode_returns(3))
