"""Source-algorithm sweeps: Q-learning over seeds x learning rates in one program."""

import jax
import numpy as np
import pytest

from agentrl import envs
from agentrl.sweep import source_sweep


@pytest.mark.long
def test_q_learning_sweep_rises_and_matches_generate():
    from agentrl.sources.registry import generate

    env = envs.make("darkroom", size=5, horizon=12)
    params = jax.vmap(env.params_for_task)(jax.numpy.arange(0, 25, 3))
    key = jax.random.key(3)
    out = source_sweep(
        "q_learning", env, params, key, 25, 8, {"learning_rate": [0.1, 0.8]}
    )
    assert out.returns.shape == (2, 8, 9, 25)
    norm = out.normalized
    for h in range(2):
        assert norm[h, :, :, -5:].mean() > norm[h, :, :, :3].mean() + 0.2
    seed5 = jax.random.split(jax.random.clone(key), 8)[5]  # the sweep's seed 5
    ref = generate("q_learning", env, params, seed5, 25, learning_rate=0.8)
    np.testing.assert_allclose(out.returns[1, 5], ref.episode_returns(25))


def test_source_sweep_rejects_untraceable_setting():
    env = envs.make("darkroom")
    params = jax.vmap(env.params_for_task)(jax.numpy.arange(2))
    with pytest.raises(ValueError, match="explore_fraction.*traceable"):
        source_sweep("q_learning", env, params, jax.random.key(0), 2, 2,
                     {"explore_fraction": [0.1, 0.5]})  # fmt: skip
    with pytest.raises(ValueError, match="learning_rate"):
        source_sweep("q_learning", env, params, jax.random.key(0), 2, 2,
                     {"learning_rate": [1.5]})  # fmt: skip
