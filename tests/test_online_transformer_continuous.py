"""Transformer PPO with continuous actions (Point-Robot): the Gaussian head.

- every logged log-probability is the diagonal Gaussian's (written out here)
  of the raw sample under the mean the acting weights' forward pass gives
  (in half box widths) and the actor's learned state-independent log std;
  the env got the clipped, rescaled sample; with partial updates the later
  chunk's are those of the weights updated inside the trial;
- the mean head starts near the box centre, the log std at
  ``init_log_std``, and both are trained;
- the algorithm fills the model's ``"mse"`` head (the mean) and the trainer
  refuses another, naming the field;
- (long) a short run raises the return; fit, load_run and evaluation go
  through the run directory with the Gaussian actor.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np
import pytest
from test_online_transformer import full_forward

from agentrl.algos import TransformerPPO
from agentrl.envs.point_robot import PointRobot
from agentrl.models import ModelConfig
from agentrl.models.config import complete_model_config
from agentrl.online.ppo import trial_hparams
from agentrl.online.transformer import PolicyParams, TransformerShape
from agentrl.online.transformer import TransformerPPO as Trainer

MAX_ACTION = 0.1


def make_trainer(update_every, num_updates=1, horizon=4, episodes=2, num_envs=4):
    env = PointRobot(horizon=horizon, max_action=MAX_ACTION)
    trial = horizon * episodes
    cfg = ModelConfig(
        num_layers=1, num_heads=2, d_model=16, d_ff=32, dropout=0.0, max_steps=trial
    )
    cfg = complete_model_config(cfg, env, TransformerPPO(trial_episodes=episodes))
    shape = TransformerShape(
        num_envs=num_envs,
        trial_steps=trial,
        update_every=update_every,
        num_epochs=2,
        num_minibatches=2,
        num_updates=num_updates,
        grad_clip=0.5,
        init_log_std=-0.5,
    )
    return Trainer(env, shape, cfg, env.sample_params)


def gaussian_logp(raw, mean, log_std):
    """log N(raw; mean, exp(log_std)^2), summed over the last axis."""
    z = (raw - mean) / np.exp(log_std)
    return np.sum(-0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi), -1)


@pytest.mark.long
@pytest.mark.parametrize("update_every", [8, pytest.param(4, marks=pytest.mark.long)])
def test_logged_logp_is_the_gaussian_of_the_acting_weights(update_every):
    trainer = make_trainer(update_every=update_every)
    chunks = 8 // update_every
    hp = trial_hparams(lr=1e-2)
    state = trainer.init(jax.random.key(0), hp)
    assert isinstance(state.actor, PolicyParams)
    np.testing.assert_array_equal(state.actor.log_std, [-0.5, -0.5])
    new, metrics, buf, acting = jax.jit(trainer.run_trial)(state, hp)
    assert np.isfinite(float(metrics["loss"]))
    raw, action = np.asarray(buf["raw"]), np.asarray(buf["action"])
    assert raw.shape == action.shape == (4, 8, 2)
    # the env got the clipped sample, in its units (half width 0.1)
    np.testing.assert_allclose(action, MAX_ACTION * np.clip(raw, -1, 1), rtol=1e-6)
    assert np.abs(raw).max() > 1.0  # some samples were clipped: the test bites
    for c in range(chunks):
        actor = jax.tree.map(lambda x, c=c: x[c], acting)
        mean = full_forward(trainer, actor, buf)
        mean = np.asarray(mean) / MAX_ACTION
        if c == 0:  # the mean head starts near the box centre
            assert np.abs(mean).max() < 0.2
        expected = gaussian_logp(raw, mean, np.asarray(actor.log_std))
        part = slice(update_every * c, update_every * (c + 1))
        np.testing.assert_allclose(
            buf["logp"][:, part], expected[:, part], rtol=1e-4, atol=1e-4
        )
    # the log std is trained (partial updates: the second chunk acts with it)
    assert not np.array_equal(new.actor.log_std, state.actor.log_std)
    if chunks > 1:
        assert not np.array_equal(acting.log_std[1], acting.log_std[0])


def test_the_model_head_is_the_mean():
    env = PointRobot(horizon=4)
    algo = TransformerPPO(trial_episodes=2)
    cfg = complete_model_config(ModelConfig(num_layers=1, d_model=16), env, algo)
    assert (cfg.action_kind, cfg.head, cfg.action_size) == ("continuous", "mse", 2)
    shape = TransformerShape(4, 8, 8, 1, 1, 1, 0.5)
    gaussian = dataclasses.replace(cfg, head="gaussian", num_heads=2)
    with pytest.raises(ValueError, match="model.head='mse'"):
        Trainer(env, shape, gaussian, env.sample_params)
    with pytest.raises(ValueError, match="algo.init_log_std"):
        TransformerPPO(init_log_std=float("nan"))


@pytest.mark.long
def test_a_short_run_raises_the_return():
    """Goals on the upper half circle: moving towards them at all pays."""
    trainer = make_trainer(
        update_every=20, num_updates=60, horizon=10, episodes=2, num_envs=32
    )
    _, metrics = jax.jit(trainer)(jax.random.key(0), trial_hparams(lr=3e-3))
    ret = np.asarray(metrics["trial_return"])
    assert np.isfinite(ret).all()
    assert ret[-10:].mean() > ret[:10].mean() + 2.0


def point_robot_config(name: str, lr: float):
    """A tiny continuous transformer PPO run on Point-Robot: 2 updates, 3 test goals."""
    from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig
    from agentrl.train.experiments import online_train_config

    return ExperimentConfig(
        name=name,
        algo=TransformerPPO(
            trial_episodes=2, num_envs=4, num_epochs=1, num_minibatches=2
        ),
        data=DataConfig(env="point_robot", env_args=(("horizon", 3),), source="random"),
        model=ModelConfig(num_layers=1, num_heads=2, d_model=16, d_ff=32),
        train=online_train_config(
            steps=2, lr=lr, schedule="constant", log_every=1, checkpoint_every=2
        ),
        eval=EvalConfig(num_tasks=3, num_episodes=2),
    )


@pytest.mark.long
def test_fit_load_run_and_evaluate_on_point_robot(tmp_path):
    from agentrl.evaluate.run import run_results
    from agentrl.train import fit
    from agentrl.train.rundir import load_run

    config = point_robot_config("tppo-point", lr=1e-3)
    fit(config, tmp_path / "run", progress=False)
    run = load_run(tmp_path / "run")
    assert run.config.model.head == "mse"
    results, _ = run_results(tmp_path / "run", baselines=["random"])
    returns = results["transformer_ppo"].returns
    assert returns.shape == (3, 2) and np.isfinite(returns).all()
