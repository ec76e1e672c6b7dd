"""The update step's wiring: warm-up, traced weight decay, each update's own batch."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import agentrl.train.parallel as parallel
from agentrl import configtools, envs
from agentrl.data import ADSampler, open_dataset
from agentrl.train.batches import DeviceBatches
from agentrl.train.config import TrainConfig, complete_config
from agentrl.train.data import make_sampler
from agentrl.train.loop import build_model
from agentrl.train.step import (
    init_train_state,
    make_optimizer,
    make_train_call,
    make_train_step,
)


def test_the_first_updates_of_a_warm_up_are_scaled_from_zero():
    """Linear warm-up from 0 over 4 updates: update k moves Adam's unit step
    (a constant gradient) by ``lr * k / 4``."""
    train = TrainConfig(
        steps=10,
        lr=0.1,
        warmup_steps=4,
        schedule="constant",
        weight_decay=0.0,
        grad_clip=None,
    )
    tx, params = make_optimizer(train), {"w": jnp.ones(2)}
    state, moved = tx.init(params), []
    for _ in range(5):
        updates, state = tx.update({"w": jnp.ones(2)}, state, params)
        moved.append(float(-updates["w"][0]))
    np.testing.assert_allclose(moved, [0.0, 0.025, 0.05, 0.075, 0.1], atol=1e-6)


def test_each_update_of_a_call_draws_its_own_steps_batch(darkroom_dataset):
    sampler = ADSampler(open_dataset(darkroom_dataset), 4, num_episodes=2, seed=5)
    batches = DeviceBatches(sampler, parallel.make_mesh())

    def fingerprint(batch):
        return jnp.stack([jnp.sum(batch["obs"]), jnp.sum(batch["reward"])])

    def step(state, batch, hp):
        zero = jnp.float32(0)
        return state + fingerprint(batch), {"loss": zero, "grad_norm": zero}

    call = jax.jit(make_train_call(step, batches.draw))
    data = batches.call_data(3, 2)
    state, _ = call(jnp.zeros(2), {}, data, np.int32(3), np.int32(2))
    want = sum(fingerprint(batches.sampler.batch(s)) for s in (3, 4))
    np.testing.assert_allclose(state, want, rtol=1e-6)
    assert not np.allclose(want, 2 * fingerprint(batches.sampler.batch(3)))


@pytest.mark.long
def test_the_traced_weight_decay_reaches_the_update(tiny_ad_config):
    # no warm-up: the first update is at the full rate
    config = configtools.override(tiny_ad_config(), {"train.warmup_steps": 0})
    env = envs.make(config.data.env, **dict(config.data.env_args))
    dataset = open_dataset(config.data.path)
    full = complete_config(config, env, dataset)
    graphdef, state = init_train_state(build_model(full, env), full)
    step = jax.jit(make_train_step(graphdef, full, env))
    batch = make_sampler(full, dataset, env).batch(0)
    hp = configtools.default_hparams(full)
    lr = hp["train"]["lr"]
    params = {}
    for wd in (0.0, 50.0):
        train_hp = {**hp["train"], "lr": lr * 100, "weight_decay": jnp.float32(wd)}
        new, _ = step(state, batch, {**hp, "train": train_hp})
        params[wd] = jax.tree.leaves(new["params"])
    assert any(
        not np.allclose(a, b) for a, b in zip(params[0.0], params[50.0], strict=True)
    )
