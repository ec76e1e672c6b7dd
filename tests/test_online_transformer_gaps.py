"""Transformer PPO trial bookkeeping the other online tests leave open."""

import jax
import numpy as np
import pytest
from test_online_transformer import (
    forward_logp,
    full_forward,
    make_trainer,
    reference_advantages,
)
from test_online_transformer_continuous import MAX_ACTION, gaussian_logp
from test_online_transformer_continuous import make_trainer as point_robot_trainer

from agentrl.algos import TransformerPPO
from agentrl.envs import make as make_env
from agentrl.models import ModelConfig
from agentrl.models.config import complete_model_config
from agentrl.online.ppo import trial_hparams
from agentrl.online.transformer import TransformerPPO as Trainer
from agentrl.online.transformer import TransformerShape


def darkroom_trainer(update_every: int) -> Trainer:
    """Dark Room 5x5, two episodes of 6 steps a trial, four envs."""
    env = make_env("darkroom", size=5, horizon=6)
    cfg = ModelConfig(
        num_layers=1, num_heads=2, d_model=16, d_ff=32, dropout=0.0, max_steps=12
    )
    cfg = complete_model_config(cfg, env, TransformerPPO(trial_episodes=2))
    shape = TransformerShape(
        num_envs=4, trial_steps=12, update_every=update_every, num_epochs=1,
        num_minibatches=1, num_updates=1, grad_clip=0.5,
    )  # fmt: skip
    return Trainer(env, shape, cfg, env.sample_params)


@pytest.mark.parametrize("update_every", [12, 4])
@pytest.mark.long
def test_each_chunk_logs_its_acting_weights_forward_log_probs(update_every):
    """Each logged log-probability (of the step's own observation) is the
    whole-trial forward pass's under the weights that acted its chunk,
    updated inside the trial (the cache re-encoded with them); the
    observation after the trial's last step is never written over the last
    step's. One epoch of one minibatch: training sees the acted outputs too
    (the chunk against the steps before it, not a second copy of itself),
    so the PPO ratio is 1 and ``approx_kl`` 0. The state's key moves on (a
    new trial draws new tasks)."""
    trainer = darkroom_trainer(update_every)
    hp = trial_hparams(lr=1e-2)
    state = trainer.init(jax.random.key(3), hp)
    new, metrics, buf, acting = jax.jit(trainer.run_trial)(state, hp)
    for c in range(12 // update_every):
        actor = jax.tree.map(lambda x, c=c: x[c], acting)
        part = slice(c * update_every, (c + 1) * update_every)
        logp = forward_logp(trainer, actor, buf)[:, part]
        np.testing.assert_allclose(buf["logp"][:, part], logp, rtol=1e-4, atol=1e-5)
    if update_every < 12:  # later chunks acted by weights updated inside the trial
        first, last = (jax.tree.leaves(acting)[0][i] for i in (0, -1))
        assert not np.array_equal(first, last)
    assert float(metrics["approx_kl"]) < 1e-7
    # Dark Room moves one cell a step (or stays at a wall): consecutive
    # observations of one episode are neighbours, the trial's last included
    pos = np.stack(np.divmod(np.asarray(buf["obs"]), 5), -1)
    moves = np.abs(np.diff(pos, axis=1)).sum(-1)
    inside = (np.arange(1, 12) % 6) != 0  # steps t -> t + 1 of one episode
    assert moves[:, inside].max() <= 1
    assert not np.array_equal(
        jax.random.key_data(new.key), jax.random.key_data(state.key)
    )


@pytest.mark.long
def test_rewards_enter_the_advantages_scaled():
    """The flip bandit pays in about half its steps (Dark Room's random
    walks seldom do): at lr 0 (equal minibatches, unchanged weights) over
    chunks of 4, the logged value loss is 0.5 x mean(advantage**2) of a
    numpy GAE over the rewards times ``reward_scale``."""
    trainer = make_trainer(4)
    hp = trial_hparams(lr=0.0, reward_scale=0.5, gamma=0.9, gae_lambda=0.8)
    state = trainer.init(jax.random.key(5), hp)
    _, metrics, buf, _ = jax.jit(trainer.run_trial)(state, hp)
    reward = np.asarray(buf["reward"])
    assert 0 < reward.mean() < 1
    value = full_forward(trainer, state.critic, buf)
    adv = reference_advantages(
        np.asarray(value[..., 0]), reward * 0.5, np.zeros(8, bool), 0.9, 0.8, 4
    )
    expected = np.mean([0.5 * np.mean(adv[:, c : c + 4] ** 2) for c in (0, 4)])
    np.testing.assert_allclose(float(metrics["vf_loss"]), expected, rtol=2e-5)


@pytest.mark.long
def test_a_box_trial_feeds_the_model_the_envs_action():
    """Point-Robot (box half width ``MAX_ACTION``), lr 0: the env and the
    model's next token get the clipped, rescaled sample; every logged
    log-probability is the Gaussian of the raw sample around the mean the
    forward pass over those tokens gives (in half widths), which starts
    near the box centre; evaluation's policy carries the log std in the
    env's units (``init_log_std + log(half width)``)."""
    trainer = point_robot_trainer(update_every=8)
    hp = trial_hparams(lr=0.0)
    state = trainer.init(jax.random.key(0), hp)
    _, _, buf, _ = jax.jit(trainer.run_trial)(state, hp)
    raw, action = np.asarray(buf["raw"]), np.asarray(buf["action"])
    np.testing.assert_allclose(action, MAX_ACTION * np.clip(raw, -1, 1), rtol=1e-6)
    assert np.abs(raw).max() > 1.0  # some samples were clipped: the test bites
    args = (buf["obs"], buf["action"], buf["reward"])
    mean = np.asarray(trainer.forward(state.actor, *args)) / MAX_ACTION
    assert np.abs(mean).max() < 0.2
    expected = gaussian_logp(raw, mean, np.full(2, -0.5))
    np.testing.assert_allclose(buf["logp"], expected, rtol=1e-4, atol=1e-4)
    out = trainer.weights(state)(*args)
    np.testing.assert_allclose(out.log_std, -0.5 + np.log(MAX_ACTION), rtol=1e-6)
