"""Contextual classic control: the documented default ranges and context checks."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from agentrl import envs


def test_default_ranges_are_half_to_twice_each_default():
    """The module doc: ``[default / 2, 2 * default]`` unless ``ranges`` says."""
    env = envs.make("pendulum_contextual")
    assert env.ranges == {"m": (0.5, 2.0), "l": (0.5, 2.0), "g": (5.0, 20.0)}
    params = jax.jit(jax.vmap(env.sample_params))(
        jax.random.split(jax.random.key(61), 500)
    )
    ctx = np.asarray(jax.vmap(env.context)(params)) / np.array([1.0, 1.0, 10.0])
    assert ctx.min() >= 0.5 - 1e-6 and ctx.max() <= 2.0 + 1e-6
    assert ctx.min() < 0.55 and ctx.max() > 1.95  # the whole range is drawn


def test_unknown_context_variables_and_non_positive_ranges_are_refused():
    env = envs.make("cartpole_contextual")
    with pytest.raises(ValueError, match="unknown context variable"):
        env.context_params(mass=2.0)
    with pytest.raises(ValueError, match="ranges"):
        envs.make("cartpole_contextual", ranges={"gravity": (0.0, 1.0)})


@pytest.mark.parametrize("mode", ["all", "one"])
def test_sample_params_splits_its_key(mode):
    env = envs.make("mountaincar_contextual", mode=mode)
    with jax.debug_key_reuse(True):
        env.sample_params(jax.random.key(62))
