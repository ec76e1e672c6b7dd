"""Transformer PPO over trials (agentrl.online.transformer, algo transformer_ppo).

- acting with the KV cache equals the training forward pass: every logged
  log-probability is the one the whole-trial forward gives the weights that
  acted (so the PPO ratio starts at exactly 1);
- what ReLIC's partial updates change: with ``update_every = K < L`` the
  trial's later chunks are acted by weights updated inside the trial, over
  the carried context; with ``K = L`` one set of weights acts the whole
  trial;
- fit / resume / load_run / evaluation go through the same run directory;
- the transformer solves the flip bandit.

The five tests compile the transformer trainer (KV-cache acting, cache
re-encoding and the whole-trial forward/backward, nested in scans): about
40 s together on the 2-core CPU with a warm compilation cache.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_online_rl2 import FlipBandit, hp

from agentrl.algos import RL2, TransformerPPO
from agentrl.models import ModelConfig
from agentrl.online.transformer import TransformerPPO as Trainer
from agentrl.online.transformer import TransformerShape
from agentrl.train import fit
from agentrl.train.config import (
    DataConfig,
    EvalConfig,
    ExperimentConfig,
    TrainConfig,
    complete_model_config,
)
from agentrl.train.rundir import load_run


def make_trainer(update_every: int, num_updates: int = 1, trial: int = 8):
    env = FlipBandit(num_arms=2, horizon=trial // 2)
    cfg = ModelConfig(
        num_layers=1, num_heads=2, d_model=16, d_ff=32, dropout=0.0, max_steps=trial
    )
    cfg = complete_model_config(cfg, env, RL2())
    shape = TransformerShape(
        num_envs=8,
        trial_steps=trial,
        update_every=update_every,
        num_epochs=2,
        num_minibatches=2,
        num_updates=num_updates,
        grad_clip=0.5,
    )
    return Trainer(env, shape, cfg, env.sample_params)


def forward_logp(trainer, actor, buf):
    logits = trainer.forward(actor, buf["obs"], buf["action"], buf["reward"])
    logp = jax.nn.log_softmax(logits)
    return jnp.take_along_axis(logp, buf["action"][..., None], -1)[..., 0]


@pytest.mark.parametrize("update_every", [8, 4])
def test_partial_updates_act_with_weights_updated_inside_the_trial(update_every):
    trainer = make_trainer(update_every)
    state = trainer.init(jax.random.key(0), hp(lr=1e-2))
    run = jax.jit(trainer.run_trial)
    new, metrics, buf, acting = run(state, hp(lr=1e-2))
    chunks = 8 // update_every
    assert jax.tree.leaves(acting)[0].shape[0] == chunks
    for c in range(chunks):
        actor = jax.tree.map(lambda x, c=c: x[c], acting)
        lp = forward_logp(trainer, actor, buf)
        part = slice(c * update_every, (c + 1) * update_every)
        # the cache (re-encoded after each partial update) = the forward pass
        np.testing.assert_allclose(
            buf["logp"][:, part], lp[:, part], rtol=1e-4, atol=1e-5
        )
    first = jax.tree.map(lambda x: x[0], acting)
    same = jax.tree.map(np.array_equal, first, state.actor)
    assert all(jax.tree.leaves(same))  # chunk 0 acts with the trial's weights
    if chunks > 1:
        # the second half of the trial is acted by weights updated inside it
        second = jax.tree.map(lambda x: x[1], acting)
        moved = [
            not np.array_equal(a, b)
            for a, b in zip(
                jax.tree.leaves(first), jax.tree.leaves(second), strict=True
            )
        ]
        assert any(moved)
        lp0 = forward_logp(trainer, first, buf)
        assert not np.allclose(buf["logp"][:, 4:], lp0[:, 4:], atol=1e-6)
    assert np.isfinite(float(metrics["loss"]))


def tiny_config(update_every=0):
    return ExperimentConfig(
        name="tppo-tiny",
        algo=TransformerPPO(
            trial_episodes=2,
            num_envs=4,
            num_epochs=1,
            num_minibatches=2,
            update_every=update_every,
        ),
        data=DataConfig(
            env="bernoulli_bandit",
            env_args=(("num_arms", 2), ("horizon", 3)),
            source="random",
        ),
        model=ModelConfig(num_layers=1, num_heads=2, d_model=16, d_ff=32, dropout=0.0),
        train=TrainConfig(
            steps=4,
            checkpoint_every=2,
            log_every=2,
            lr=1e-3,
            weight_decay=0.0,
            schedule="constant",
            warmup_steps=0,
        ),
        eval=EvalConfig(num_tasks=3, num_episodes=2),
    )


def test_fit_resume_exact_and_evaluation(tmp_path):
    from agentrl.evaluate.run import run_results

    config = tiny_config(update_every=3)
    fit(config, tmp_path / "a", progress=False)
    fit(config, tmp_path / "b", progress=False, stop_at_step=2)
    fit(config, tmp_path / "b", progress=False)
    a, b = load_run(tmp_path / "a"), load_run(tmp_path / "b")
    assert a.step == b.step == 4
    assert a.config.model.max_steps == 6  # the trial: 2 episodes of 3 steps
    from flax import nnx

    def arrays(model):
        return [
            jax.random.key_data(x)
            if jnp.issubdtype(x.dtype, jax.dtypes.prng_key)
            else x
            for x in jax.tree.leaves(nnx.state(model))
        ]

    for x, y in zip(arrays(a.model), arrays(b.model), strict=True):
        np.testing.assert_array_equal(x, y)
    results, _ = run_results(tmp_path / "a", baselines=["random"])
    assert results["transformer_ppo"].returns.shape == (3, 2)


def test_bad_fields_are_named():
    with pytest.raises(ValueError, match="algo.update_every"):
        TransformerPPO(update_every=-1)
    from agentrl.envs import make as make_env

    config = dataclasses.replace(tiny_config(), algo=TransformerPPO(update_every=5))
    env = make_env("bernoulli_bandit", num_arms=2, horizon=3)
    with pytest.raises(ValueError, match="algo.update_every=5 must divide"):
        config.algo.make_online_train(config, env)


def test_transformer_solves_the_flip_bandit():
    trainer = make_trainer(update_every=10, num_updates=40, trial=10)
    _, metrics = jax.jit(trainer)(jax.random.key(0), hp())
    assert np.asarray(metrics["trial_return"])[-5:].mean() > 8.5  # chance: 5
