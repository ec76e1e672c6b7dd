"""A sweep sharded over 4 fake CPU devices (members on the ``sweep`` axis)
gives the same loss curves as on one device."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from agentrl import configtools, envs
from agentrl.data import open_dataset
from agentrl.sweep import train_sweep
from agentrl.train.config import ExperimentConfig

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax
    jax.config.update("jax_num_cpu_devices", 4)
    from agentrl import configtools, envs
    from agentrl.data import open_dataset
    from agentrl.sweep import train_sweep
    from agentrl.train.config import ExperimentConfig

    config = configtools.from_dict(ExperimentConfig, json.loads(sys.argv[1]))
    env = envs.make("darkroom")
    out = train_sweep(config, env, open_dataset(config.data.path), [0, 1],
                      [{"lr": 1e-3}, {"lr": 3e-3}], steps_per_call=3)
    shardings = {str(x.sharding.spec) for x in jax.tree.leaves(out.state["params"])}
    print(json.dumps({"devices": jax.device_count(), "shardings": sorted(shardings),
                      "loss": out.metrics["loss"].tolist()}))
    """
)


@pytest.mark.long
def test_sweep_on_four_devices_matches_one(tiny_ad_config, darkroom_dataset):
    config = tiny_ad_config(steps=3)
    assert isinstance(config, ExperimentConfig)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(configtools.to_dict(config))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["devices"] == 4
    assert any("sweep" in s for s in got["shardings"]), got["shardings"]
    env = envs.make("darkroom")
    ref = train_sweep(
        config,
        env,
        open_dataset(darkroom_dataset),
        [0, 1],
        [{"lr": 1e-3}, {"lr": 3e-3}],
        steps_per_call=3,
    )
    np.testing.assert_allclose(got["loss"], ref.metrics["loss"], atol=1e-5)
