"""benchmarks/env_throughput.py's MuJoCo comparison against Brax's training
env: the per-env physics it hands Brax's domain-randomisation wrapper are
our tasks', batched over the randomised fields only; the runners (ours,
Brax's bare step, Brax's training env, Brax's bare step on our task
physics) run (long: MJX compiles for minutes on 2 cores)."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from env_throughput import (
    brax_task_runner,
    brax_wrapped_runner,
    mujoco_runners,
    task_physics,
)

from agentrl import envs


def test_task_physics_are_our_tasks_batched_over_the_randomised_fields():
    env = envs.make("hopper_params")
    sys_v, in_axes = task_physics(env, 3)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(1), 3))
    for field in env.randomise:
        assert getattr(in_axes, field) == 0
        np.testing.assert_array_equal(getattr(sys_v, field), getattr(params, field))
    rest = in_axes.replace(**{f: None for f in env.randomise})
    assert all(x is None for x in jax.tree.leaves(rest, is_leaf=lambda x: x is None))
    assert np.asarray(sys_v.body_mass).shape == (3, env.sys.nbody)
    assert np.ptp(np.asarray(sys_v.body_mass).sum(1)) > 0  # three bodies


@pytest.mark.long
@pytest.mark.parametrize("name", ["hopper_params", "halfcheetah_vel"])
def test_the_three_runners_run(name):
    env = envs.make(name, horizon=2)
    runners = (*mujoco_runners(env, 2, 3), brax_wrapped_runner(env, 2, 3))
    for run in runners:
        assert np.isfinite(float(run(jax.random.key(0))))


@pytest.mark.long
def test_brax_on_task_physics_moves_differently_and_restores_its_sys():
    env = envs.make("hopper_params", horizon=2)
    own = env.brax_env.sys
    _, bare = mujoco_runners(env, 2, 3)
    on_tasks = brax_task_runner(env, 2, 3)
    # equal keys, not one key twice (each runner consumes its own)
    total, bare_total = (
        float(on_tasks(jax.random.key(0))),
        float(bare(jax.random.key(0))),
    )
    assert np.isfinite(total) and total != bare_total  # other masses, other motion
    assert env.brax_env.sys is own  # swapped only while tracing


@pytest.mark.long
def test_brax_on_its_default_physics_as_data_moves_as_its_constant_self():
    env = envs.make("hopper_params", horizon=2)
    _, bare = mujoco_runners(env, 2, 3)
    as_data = brax_task_runner(env, 2, 3, default=True)
    total, bare_total = (
        float(as_data(jax.random.key(0))),
        float(bare(jax.random.key(0))),
    )
    # the same physics and keys: equal up to how XLA orders the float work
    np.testing.assert_allclose(total, bare_total, rtol=1e-4)


class _DriftingClock:
    """A clock for the timing code, and a stand-in for ``make_runner`` whose
    every env's call takes the same time on it, a time that grows with each
    call made so far (a machine getting busier): an env timed long before
    the reference looks faster than it is."""

    def __init__(self, base_s: float = 1.0, drift: float = 0.2):
        self.now, self.calls, self.base_s, self.drift = 0.0, 0, base_s, drift

    def perf_counter(self) -> float:
        return self.now

    def make_runner(self, env, params, num_envs, num_steps, batched_params):
        def run(key):
            self.now += self.base_s * (1 + self.drift * self.calls)
            self.calls += 1
            return jnp.float32(0)

        return run


def test_families_are_paired_with_the_reference_under_the_same_load(
    monkeypatch, tmp_path
):
    import common
    import env_throughput

    clock = _DriftingClock()
    monkeypatch.setattr(envs, "registered", lambda: ["darkroom", "pendulum_contextual"])
    monkeypatch.setattr(env_throughput, "make_runner", clock.make_runner)
    monkeypatch.setattr(common, "time", clock)
    monkeypatch.setattr(env_throughput, "time", clock)
    monkeypatch.setenv("AGENTRL_BENCH_RESULTS", str(tmp_path))
    env_throughput.main(["--quick"])
    payload = json.loads((tmp_path / "env_throughput.json").read_text())
    targets = {t["name"].split(" /")[0]: t for t in payload["targets"]}
    assert set(targets) == {"darkroom", "pendulum_contextual"}
    # equally fast: the paired ratio near 1, and judged on its CI
    for t in targets.values():
        assert 0.8 < t["value"] < 1.25
        low, high = map(float, t["ci"].strip("[]").split(","))
        assert low <= t["value"] <= high and t["met"] is (low > 1.0)
    pendulum = payload["results"]["pendulum_contextual"]["16384"]["paired"]
    own = pendulum["Pendulum-v1"]
    assert len(own["per_round"]) == 5 and 0.8 < own["median"] < 1.25


def test_mujoco_targets_are_judged_on_the_ci_and_steps_agree_with_the_ratio(
    monkeypatch, tmp_path
):
    import env_throughput

    class Env:
        brax_name, randomise = "fake", None

    def run(key):
        return jnp.float32(0)

    # ours 1 s every round; Brax 0.5 s in one, 1 s in two and 2 s in two:
    # a median ratio of 1.0 (>= 0.9) whose CI reaches down to 0.5
    seconds = {
        "agentrl": [1.0] * 5,
        "brax": [0.5, 1.0, 2.0, 1.0, 2.0],
        "brax_wrapped": [1.0] * 5,
    }
    monkeypatch.setattr(envs, "make", lambda name: Env())
    monkeypatch.setattr(env_throughput, "mujoco_runners", lambda *a: (run, run))
    monkeypatch.setattr(env_throughput, "brax_wrapped_runner", lambda *a: run)
    monkeypatch.setattr(env_throughput.bench, "paired_rounds", lambda *a: seconds)
    monkeypatch.setenv("AGENTRL_BENCH_RESULTS", str(tmp_path))
    env_throughput.mujoco_main(4, 10, 5, ("hopper_params",))
    payload = json.loads(
        (tmp_path / "env_throughput_mujoco_hopper_params.json").read_text()
    )
    (t,) = payload["targets"]
    assert t["value"] == 1.0 and t["met"] is False
    row = payload["results"]["hopper_params"]
    sps = next(v for k, v in row.items() if k.startswith("steps_per_s"))
    # both sides' steps/s from one round, their ratio the median ratio
    assert sps["agentrl"] / sps["brax"] == pytest.approx(row["ratio_median"])
