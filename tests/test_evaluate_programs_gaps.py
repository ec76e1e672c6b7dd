"""Kept programs: what their keys must tell apart, and which one is dropped."""

import dataclasses

import jax
import numpy as np

from agentrl import envs
from agentrl.evaluate import RandomAgent, programs
from agentrl.train.experiments import load_experiment


def test_the_config_key_ignores_seeds_and_counts_but_not_the_temperature():
    config = load_experiment("ad_darkroom", "smoke")
    ev = config.eval
    other_seed = dataclasses.replace(config, eval=dataclasses.replace(ev, seed=7))
    hotter = dataclasses.replace(
        config, eval=dataclasses.replace(ev, temperature=2 * ev.temperature)
    )
    assert programs.config_key(other_seed) == programs.config_key(config)
    assert programs.config_key(hotter) != programs.config_key(config)


def test_a_baseline_program_is_kept_per_number_of_steps():
    env = envs.make("darkroom", size=3, horizon=4)
    params = jax.vmap(env.params_for_task)(np.arange(2, dtype=np.int32))
    with programs.sharing(True):
        short = programs.baseline_runner("k", env, RandomAgent(env), 4, False)
        long = programs.baseline_runner("k", env, RandomAgent(env), 8, False)
        assert short(params, jax.random.key(0)).num_steps == 4
        assert long(params, jax.random.key(1)).num_steps == 8


def test_the_least_recently_used_program_is_dropped():
    programs.clear()
    built = []
    with programs.sharing(True):
        for i in range(programs.MAX_PROGRAMS):
            programs.kept(("t", i), lambda i=i: built.append(i) or i)
        programs.kept(("t", 0), lambda: built.append("again"))  # used: kept
        programs.kept(("t", "new"), lambda: built.append("new"))
        programs.kept(("t", 0), lambda: built.append("again"))
        programs.kept(("t", 1), lambda: built.append("rebuilt"))  # was dropped
    programs.clear()
    assert built == [*range(programs.MAX_PROGRAMS), "new", "rebuilt"]


def test_a_model_lane_program_is_kept_per_number_of_steps(tiny_ad_config):
    from flax import nnx

    from agentrl.evaluate.lanes import lane
    from agentrl.models.transformer import DecisionModel
    from agentrl.train.config import complete_config

    config = tiny_ad_config(2)
    env = envs.make(config.data.env, **dict(config.data.env_args))
    config = complete_config(config, env)
    model = DecisionModel(config.model, rngs=nnx.Rngs(0))
    params = jax.vmap(env.params_for_task)(np.arange(2, dtype=np.int32))
    programs.clear()
    with programs.sharing(True):
        for steps in (env.horizon, 2 * env.horizon):
            runner = programs.lane_runner(config, env, "darkroom", model, steps)
            # shapes only (a trace, no compile): the history has its own length
            shape = jax.eval_shape(runner, params, jax.random.key(0), lane("sample"))
            assert shape.reward.shape == (2, steps)
    programs.clear()
