"""Many updates per call: equal to single updates, exact across call boundaries.

``make_train_call`` runs ``count`` updates in one jitted program with a
traced trip count, so one compiled program serves every call length and
every update runs the same compiled loop body: K updates in one call are
bit-identical to K calls of one update, and a run's parameters do not depend
on ``train.steps_per_call`` or on where it was stopped and resumed. Against
the plain jitted step (a different program, fed the same batches) the
updates agree to float tolerance; on this CPU they are also bit-identical
(asserted where XLA allows it: the CPU backend).
"""

import dataclasses
import json

import jax
import numpy as np
import pytest
from flax import nnx

from agentrl.configtools import default_hparams, override
from agentrl.data.device_sampler import DeviceSampler
from agentrl.envs.registry import make as make_env
from agentrl.train.config import TrainConfig, complete_config, steps_per_call
from agentrl.train.data import make_sampler, prepare_dataset
from agentrl.train.loop import build_model, fit
from agentrl.train.rundir import load_model
from agentrl.train.runner import call_ends
from agentrl.train.step import init_train_state, make_train_call, make_train_step


def _program(config, tmp_path):
    env = make_env(config.data.env, **dict(config.data.env_args))
    dataset = prepare_dataset(config, env, tmp_path, progress=False)
    full = complete_config(config, env, dataset)
    graphdef, state = init_train_state(build_model(full, env), full)
    device = DeviceSampler(make_sampler(full, dataset, env))
    step = make_train_step(graphdef, full, env)
    call = jax.jit(make_train_call(step, lambda d, s, i: device.draw(d, s + i)))
    return state, step, call, device, default_hparams(full)


def _leaves(tree):
    def host(x):
        is_key = jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
        return np.asarray(jax.random.key_data(x) if is_key else x)

    return [host(x) for x in jax.tree.leaves(tree)]


def _copy(tree):
    return jax.tree.map(lambda x: x.copy() if hasattr(x, "copy") else x, tree)


@pytest.mark.long
def test_k_updates_in_one_call_equal_k_single_updates(tiny_ad_config, tmp_path):
    state, step, call, device, hp = _program(tiny_ad_config(6), tmp_path)
    k = 5
    scanned, metrics = call(_copy(state), hp, device.data, 3, k)
    stepwise = _copy(state)
    for s in range(3, 3 + k):  # the same program, one update per call
        stepwise, last = call(stepwise, hp, device.data, s, 1)
    for a, b in zip(_leaves(scanned), _leaves(stepwise), strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(_leaves(metrics), _leaves(last), strict=True):
        np.testing.assert_array_equal(a, b)
    plain = _copy(state)
    jitted, draw = jax.jit(step), jax.jit(device.draw)
    for s in range(3, 3 + k):  # another program: the plain step, same batches
        plain, plain_metrics = jitted(plain, draw(device.data, s), hp)
    for a, b in zip(_leaves(scanned), _leaves(plain), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
        if jax.default_backend() == "cpu":
            np.testing.assert_array_equal(a, b)
    assert float(metrics["loss"]) == pytest.approx(float(plain_metrics["loss"]), 1e-6)


def _params(run_dir):
    model, _ = load_model(run_dir)
    return _leaves(nnx.state(model, nnx.Param))


@pytest.mark.long
def test_runs_are_equal_whatever_the_calls_and_resume(tiny_ad_config, tmp_path):
    base = override(
        tiny_ad_config(11), {"train.log_every": 4, "train.checkpoint_every": 6}
    )
    one = fit(
        override(base, {"train.steps_per_call": 1}), tmp_path / "1", progress=False
    )
    many = override(base, {"train.steps_per_call": 5})
    stopped = fit(many, tmp_path / "stop", progress=False, stop_at_step=7)
    resumed = fit(override(base, {"train.steps_per_call": 3}), stopped, progress=False)
    for a, b in zip(_params(one), _params(resumed), strict=True):
        np.testing.assert_array_equal(a, b)
    lines = (resumed / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [4, 7, 8, 11]
    startup = json.loads((resumed / "run.json").read_text())["startup"]
    assert {"restore_s", "compile_s", "first_call_s", "decode_s"} <= set(startup)


def test_call_ends_fall_on_log_checkpoint_and_end_steps():
    train = TrainConfig(steps=30, log_every=10, checkpoint_every=15)
    assert call_ends(0, 30, 100, train) == [10, 15, 20, 30]
    assert call_ends(0, 30, 4, train) == [4, 8, 10, 14, 15, 19, 20, 24, 28, 30]
    assert call_ends(7, 12, 100, train) == [10, 12]  # resumed, stopped at 12
    assert call_ends(5, 5, 3, train) == []


def test_steps_per_call_default_and_validated():
    assert steps_per_call(TrainConfig(), "cpu") == 100
    assert steps_per_call(TrainConfig(), "gpu") == 100
    assert steps_per_call(TrainConfig(), "some_new_platform") == 100
    assert steps_per_call(TrainConfig(steps_per_call=7), "gpu") == 7
    for bad in (0, -1, 2.5, True, "4"):
        with pytest.raises(ValueError, match="train.steps_per_call must be"):
            dataclasses.replace(TrainConfig(), steps_per_call=bad)
