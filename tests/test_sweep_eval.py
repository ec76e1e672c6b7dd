"""Sweeps evaluate every member in context on held-out tasks (scores with CIs)."""

import pytest

from agentrl.sweep import run_sweep


@pytest.mark.long
def test_sweep_evaluates_members_in_context(tiny_ad_config, tmp_path):
    config = tiny_ad_config(steps=2)
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


@pytest.mark.long
def test_vmapped_evaluation_matches_run_policy(tiny_ad_config, darkroom_dataset):
    import jax
    import numpy as np
    from flax import nnx

    from agentrl import envs
    from agentrl.agents.driver import ModelPolicy, run_policy
    from agentrl.data import open_dataset
    from agentrl.sweep import evaluate_members, held_out_tasks, train_sweep

    config = tiny_ad_config(steps=2)
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
        cfg = sweep.config  # the preset's acting rule (eval.acting)
        policy = ModelPolicy(model, lambda h, n: cfg.algo.make_agent(h, env, n, cfg))
        history, _ = run_policy(
            env, policy, params, jax.random.clone(key), 3 * env.horizon
        )
        np.testing.assert_allclose(returns[m, 0], history.episode_returns(3))
