"""sweep_vmap's diagnostic compile without XLA:CPU parallel tasks."""

import os

import jax
import jax.numpy as jnp
import numpy as np
from sweep_vmap import compile_without_parallel_tasks, parallel_tasks


def _fn(x):
    return jnp.tanh(x) * jnp.exp(-x) + jnp.sin(x)


def test_compile_without_parallel_tasks_same_values_no_split():
    x = jnp.linspace(-2.0, 2.0, 64 * 4096).reshape(64, 4096)
    cpus = os.sched_getaffinity(0)
    normal = jax.jit(_fn).lower(x).compile()
    single = compile_without_parallel_tasks(_fn, x)
    assert os.sched_getaffinity(0) == cpus  # restored
    assert parallel_tasks(single.as_text()) == 0
    if len(cpus) > 1:  # with two CPUs XLA splits this large fusion
        assert parallel_tasks(normal.as_text()) >= 1
    np.testing.assert_array_equal(np.asarray(normal(x)), np.asarray(single(x)))


def test_parallel_tasks_counts_split_instructions():
    text = (
        '  %a = f32[8]{0} fusion(%p), backend_config={"outer_dimension_partitions"'
        ':["2"]}\n  %b = f32[8]{0} fusion(%p), backend_config={"outer_dimension_'
        'partitions":[]}\n'
    )
    assert parallel_tasks(text) == 1
