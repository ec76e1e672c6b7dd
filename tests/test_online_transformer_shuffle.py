"""ReLIC's shuffled old episodes (``algo.shuffle_episodes``).

- ``shuffle_episodes`` moves whole episodes: the ones complete by the given
  step take a random order per env (each order about equally often), the
  later steps stay where they are;
- in a trial, the chunk after a partial update is acted over the shuffled
  context (its logged log-probabilities are the whole-trial forward's over
  the buffer in its new order), the logs read the episodes in the order
  they were acted, and the buffer holds each acted step once;
- it needs ReLIC's episode positions.
"""

from __future__ import annotations

import dataclasses
import itertools
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_online_rl2 import hp
from test_online_transformer import forward_logp, make_trainer

from agentrl.algos import TransformerPPO
from agentrl.models import ModelConfig
from agentrl.online.transformer import shuffle_episodes

H = 4  # steps per episode


def assert_rows(actual, row) -> None:
    """Every row of ``actual [n, k]`` equals ``row [k]``."""
    actual = np.asarray(actual)
    np.testing.assert_array_equal(actual, np.broadcast_to(row, actual.shape))


def episode_buffer(n: int, episodes: int) -> dict:
    """Rows numbered by their step: ``obs [n, L]`` and ``action [n, L, 2]``."""
    step = jnp.arange(episodes * H)
    return {
        "obs": jnp.broadcast_to(step, (n, episodes * H)),
        "action": jnp.broadcast_to(step[:, None] * 10, (n, episodes * H, 2)),
        "reward": jnp.broadcast_to(step, (n, episodes * H)).astype(jnp.float32),
    }


def test_complete_episodes_change_places_whole_and_uniformly():
    n, episodes, done = 2000, 4, 3 * H - 1  # 2 complete, the third in progress
    out = shuffle_episodes(jax.random.key(0), episode_buffer(n, episodes), done, H)
    obs = np.asarray(out["obs"])
    np.testing.assert_array_equal(out["action"][..., 0], obs * 10)  # rows move whole
    np.testing.assert_array_equal(out["reward"], obs)
    assert_rows(obs[:, 2 * H :], np.arange(2 * H, episodes * H))
    starts = obs[:, 0 : 2 * H : H]  # the first step of each of the 2 places
    assert_rows(obs[:, : 2 * H] % H, np.tile(np.arange(H), 2))
    assert sorted(map(tuple, np.unique(starts, axis=0))) == [(0, H), (H, 0)]
    swapped = (starts[:, 0] == H).mean()
    assert abs(swapped - 0.5) < 0.05  # 2000 draws: ~4.5 standard deviations
    # three complete episodes: all 6 orders, each ~1/6 of the time
    out = shuffle_episodes(jax.random.key(1), episode_buffer(n, 3), 3 * H, H)
    orders = [tuple(r) for r in np.asarray(out["obs"])[:, ::H] // H]
    counts = {p: orders.count(p) for p in itertools.permutations(range(3))}
    assert sum(counts.values()) == n
    assert all(abs(c / n - 1 / 6) < 0.04 for c in counts.values()), counts


def test_nothing_moves_before_an_episode_is_complete():
    buf = episode_buffer(8, 3)
    out = shuffle_episodes(jax.random.key(0), buf, H - 1, H)
    for name in buf:
        np.testing.assert_array_equal(out[name], buf[name])


def test_the_trial_goes_on_over_the_shuffled_episodes():
    trainer = make_trainer(
        H,
        trial=3 * H,
        horizon=H,
        model={"positions": "episode"},
        num_envs=16,
        num_epochs=1,
        shuffle_episodes=H,
    )
    state = trainer.init(jax.random.key(0), hp(lr=1e-2))
    _, metrics, buf, acting = jax.jit(trainer.run_trial)(state, hp(lr=1e-2))
    step = np.asarray(buf["step"])
    # each acted step once; the last episode (acted after the last shuffle,
    # none at the trial's end) in place; the first two swapped in some envs
    assert_rows(np.sort(step, 1), np.arange(3 * H))
    assert_rows(step[:, 2 * H :], np.arange(2 * H, 3 * H))
    swapped = step[:, 0] == H
    assert 0 < swapped.sum() < 16
    # the last chunk was acted over the buffer as it is now (shuffled)
    actor = jax.tree.map(lambda x: x[2], acting)
    lp = forward_logp(trainer, actor, buf)
    np.testing.assert_allclose(
        buf["logp"][:, 2 * H :], lp[:, 2 * H :], rtol=1e-4, atol=1e-5
    )
    # the logs read the episodes in acting order
    acted = np.zeros((16, 3 * H), np.float32)
    np.put_along_axis(acted, step, np.asarray(buf["reward"]), 1)
    first = acted[:, :H].sum(1).mean()
    np.testing.assert_allclose(float(metrics["episode_return_first"]), first, rtol=1e-6)


def test_it_needs_episode_positions():
    config = types.SimpleNamespace(model=ModelConfig(positions="token"))
    with pytest.raises(ValueError, match="algo.shuffle_episodes needs model"):
        TransformerPPO(shuffle_episodes=True).check(config)
    TransformerPPO(shuffle_episodes=True).check(
        types.SimpleNamespace(
            model=dataclasses.replace(config.model, positions="episode")
        )
    )
