"""gymnax interop: info's terminated/truncated, spaces both ways, gymnax envs as
task families (histories generated from them), agentrl envs in gymnax wrappers.
"""

from __future__ import annotations

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from gymnax.environments import spaces as gspaces
from gymnax.wrappers.purerl import FlattenObservationWrapper, LogWrapper

from agentrl import envs
from agentrl.cli import main
from agentrl.data import open_dataset, write_dataset
from agentrl.envs import from_gymnax, spaces, to_gymnax
from agentrl.envs.base import Environment, EnvParams, EnvState
from agentrl.envs.gymnax_adapter import space_from_gymnax, space_to_gymnax
from agentrl.sources import source_histories


@struct.dataclass
class _Params(EnvParams):
    goal_step: jax.Array


class _EndsAtGoal(Environment):
    """Terminates at step ``goal_step``; truncated at ``max_steps_in_episode``."""

    horizon = 3

    @property
    def default_params(self):
        return _Params(max_steps_in_episode=jnp.int32(3), goal_step=jnp.int32(3))

    def reset_env(self, key, params):
        return jnp.float32(0.0), EnvState(time=jnp.int32(0))

    def step_env(self, key, state, action, params):
        state = EnvState(time=state.time + 1)
        done = state.time >= params.goal_step
        return jnp.float32(state.time), state, jnp.float32(1.0), done, {}

    def action_space(self, params=None):
        return spaces.Discrete(2)

    def observation_space(self, params=None):
        return spaces.Box(0.0, 3.0, ())


def test_info_carries_terminated_and_truncated_both_true_at_the_limit():
    env = _EndsAtGoal()
    params = env.default_params
    _, state = env.reset(jax.random.key(0), params)
    outs = []
    for i in range(3):
        obs, state, reward, term, trunc, info = env.step(
            jax.random.key(i), state, 0, params
        )
        assert bool(info["terminated"]) == bool(term)
        assert bool(info["truncated"]) == bool(trunc)
        outs.append((bool(term), bool(trunc)))
    assert outs == [(False, False), (False, False), (True, True)]  # as gymnax 1.0
    early = params.replace(goal_step=jnp.int32(1))
    _, state = env.reset(jax.random.key(0), early)
    *_, term, trunc, info = env.step(jax.random.key(0), state, 0, early)
    assert bool(term) and not bool(trunc) and not bool(info["truncated"])


def test_agentrl_step_info_matches_gymnax_keys():
    ref, ref_params = gymnax.make("CartPole-v1")
    _, rstate = ref.reset(jax.random.key(0), ref_params)
    ref_info = ref.step(jax.random.key(1), rstate, 0, ref_params)[5]
    env = envs.make("darkroom")
    _, state = env.reset(jax.random.key(0))
    info = env.step(jax.random.key(1), state, 0)[5]
    assert {"terminated", "truncated", "final_observation"} <= set(info)
    assert {"terminated", "truncated", "final_observation"} <= set(ref_info)


def test_spaces_convert_both_ways():
    box = spaces.Box(-1.0, 2.0, (3,))
    g = space_to_gymnax(box)
    assert isinstance(g, gspaces.Box) and g.shape == (3,) and g.low == -1.0
    assert isinstance(space_to_gymnax(spaces.Discrete(4)), gspaces.Discrete)
    assert space_to_gymnax(spaces.Discrete(4)).n == 4
    d = space_to_gymnax(spaces.Dict({"a": spaces.Discrete(2), "b": box}))
    assert isinstance(d, gspaces.Dict) and isinstance(d.spaces["b"], gspaces.Box)
    back = space_from_gymnax(d)
    assert isinstance(back, spaces.Dict) and back.spaces["a"].n == 2
    assert back.spaces["b"].shape == (3,)


def test_gymnax_wrappers_accept_an_agentrl_env_through_to_gymnax():
    env = envs.make("point_robot")
    params = env.default_params
    wrapped = LogWrapper(FlattenObservationWrapper(to_gymnax(env)))
    assert isinstance(wrapped.observation_space(params), gspaces.Box)
    obs, state = wrapped.reset(jax.random.key(0), params)
    total = 0.0
    for i in range(env.horizon):
        action = env.action_space(params).sample(jax.random.key(100 + i))
        obs, state, reward, term, trunc, info = wrapped.step(
            jax.random.key(i), state, action, params
        )
        total += float(reward)
    assert obs.shape == (int(np.prod(env.observation_space(params).shape)),)
    assert bool(trunc) and bool(info["returned_episode"])
    returned = float(info["returned_episode_returns"])
    np.testing.assert_allclose(returned, total, rtol=1e-5)


def _pendulum_family():
    ref, ref_params = gymnax.make("Pendulum-v1")

    def sample(key):  # the task: the pendulum's mass
        return ref_params.replace(m=jax.random.uniform(key, (), minval=0.5, maxval=2))

    return ref, ref_params, from_gymnax(ref, sample_params=sample, horizon=200)


def test_from_gymnax_steps_exactly_as_gymnax_and_samples_tasks():
    ref, ref_params, family = _pendulum_family()
    assert family.horizon == 200 and family.num_tasks is None
    assert isinstance(family.action_space(), spaces.Box)
    params = family.sample_params(jax.random.key(3))
    masses = jax.vmap(family.sample_params)(jax.random.split(jax.random.key(0), 8)).m
    assert np.unique(np.asarray(masses)).size == 8
    obs, state = family.reset(jax.random.key(1), params)
    robs, rstate = ref.reset(jax.random.key(1), params)
    np.testing.assert_array_equal(obs, robs)
    out = family.step(jax.random.key(2), state, jnp.array([0.5]), params)
    rout = ref.step(jax.random.key(2), rstate, jnp.array([0.5]), params)
    for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(rout), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.long
def test_histories_from_a_gymnax_task_family(tmp_path):
    # registered, so the dataset can rebuild its environment by name
    if "pendulum_mass" not in envs.registered():
        envs.register_env("pendulum_mass", lambda: _pendulum_family()[2])
    family = envs.make("pendulum_mass")
    histories = source_histories("random", family)
    out = write_dataset(
        tmp_path / "d", family, histories, 3, 1, 0, env_name="pendulum_mass"
    )
    dataset = open_dataset(out)
    assert dataset.num_steps == 200
    history = dataset.load_history("train")
    actions = np.asarray(history.action)
    assert actions.shape[-2:] == (200, 1) and np.all(np.abs(actions) <= 2.0)
    assert np.asarray(history.truncated)[:, -1].all()
    assert dataset.env.name == family.name  # rebuilt from the registry


@pytest.mark.long
def test_data_generate_takes_a_gymnax_env(tmp_path, capsys):
    out = tmp_path / "d"
    argv = ["data", "generate", "--env", "gymnax:Pendulum-v1", "--source", "random"]
    argv += ["--tasks", "2", "--episodes", "1", "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    dataset = open_dataset(out)
    assert dataset.env.name == "gymnax:Pendulum-v1" and dataset.env.horizon == 200
