"""RL² on XLand-MiniGrid (experiments/rl2_xland.py).

- the one-hot observation is xminigrid's view (tile and colour ids) one-hot
  per cell plus the agent's direction, in xminigrid's vocabularies;
- the smoke preset trains, checkpoints and is evaluated on held-out
  rulesets in the standard harness (the gpu preset's shapes train on CPU in
  tests/test_experiments_gpu_presets.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl.envs import make

xminigrid = pytest.importorskip("xminigrid")


@pytest.mark.long
def test_onehot_observation_encodes_the_view_and_direction():
    from xminigrid.core.constants import NUM_COLORS, NUM_TILES

    from agentrl.envs import xland

    assert (xland.NUM_TILES, xland.NUM_COLORS) == (NUM_TILES, NUM_COLORS)
    ids = make("xland", num_rulesets=8, horizon=12)
    hot = make("xland", num_rulesets=8, horizon=12, observation="onehot")
    assert hot.observation_space().shape == (5 * 5 * 25 + 4,)
    params = ids.params_for_task(jnp.int32(3))
    obs_i, state_i = ids.reset(jax.random.key(0), params)
    obs_h, state_h = hot.reset(jax.random.key(0), params)
    step_i, step_h = jax.jit(ids.step), jax.jit(hot.step)
    for t, action in enumerate([1, 2, 0, 2, 1, 2]):
        view = np.asarray(obs_i)
        cells = np.asarray(obs_h)[:-4].reshape(5, 5, 25)
        np.testing.assert_array_equal(cells[..., :13].argmax(-1), view[..., 0])
        np.testing.assert_array_equal(cells[..., 13:].argmax(-1), view[..., 1])
        assert (cells.sum(-1) == 2).all()
        direction = np.asarray(obs_h)[-4:]
        assert direction.sum() == 1
        assert direction.argmax() == int(state_h.inner.agent.direction)
        key = jax.random.key(t + 1)
        obs_i, state_i, *_ = step_i(key, state_i, jnp.int32(action), params)
        obs_h, state_h, *_ = step_h(
            jax.random.clone(key), state_h, jnp.int32(action), params
        )
    with pytest.raises(ValueError, match="observation"):
        make("xland", observation="rgb")


@pytest.mark.long
def test_smoke_preset_trains_and_is_evaluated(tmp_path):
    from agentrl.evaluate.run import run_results
    from agentrl.train import fit
    from agentrl.train.experiments import load_experiment
    from agentrl.train.rundir import load_run

    config = load_experiment("rl2_xland", "smoke")
    run_dir = fit(config, tmp_path / "run", progress=False)
    run = load_run(run_dir)
    assert run.step == config.train.steps
    train_ids = set(run.env.task_split(0.8, 0).train.tolist())
    assert not train_ids & set(run.split["test"])  # held-out rulesets
    results, _ = run_results(run_dir, baselines=["random"])
    assert set(results) == {"rl2", "random"}
    # the test rulesets only (up to eval.num_tasks), each for its episodes
    n_test = min(config.eval.num_tasks, len(run.split["test"]))
    assert results["rl2"].returns.shape == (n_test, 2)
    assert np.isfinite(results["rl2"].returns).all()
