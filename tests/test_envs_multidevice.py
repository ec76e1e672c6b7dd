"""A vmapped rollout sharded over 8 fake CPU devices equals the 1-device run."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import jax
    jax.config.update("jax_num_cpu_devices", 8)
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P
    from agentrl import envs

    assert jax.device_count() == 8, jax.devices()
    env = envs.make("darkroom")
    ids = jnp.arange(64)
    keys = jax.random.split(jax.random.key(0), 64)
    policy = envs.random_policy(env)

    def returns(ids, keys):
        params = jax.vmap(env.params_for_task)(ids)
        tr = jax.vmap(lambda p, k: envs.rollout(env, policy, p, k, 40))(params, keys)
        return jax.vmap(lambda r, d: envs.episode_returns(r, d, 2))(tr.reward, tr.done)

    single = jax.jit(returns)(ids, keys)
    mesh = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    sharding = NamedSharding(mesh, P("data"))
    ids_s, keys_s = jax.device_put((ids, keys), sharding)
    sharded = jax.jit(returns, out_shardings=sharding)(ids_s, keys_s)
    assert len(sharded.sharding.device_set) == 8
    np.testing.assert_array_equal(np.asarray(single), np.asarray(sharded))
    assert float(single.sum()) > 0
    print("OK", float(single.mean()))
    """
)


def test_sharded_rollout_matches_single_device():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "OK" in out.stdout
