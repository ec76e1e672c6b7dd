"""Data-parallel training on 8 fake CPU devices matches one device.

Each run is a fresh process (the device count is fixed at JAX start-up); the
loss of each of the first 20 steps must agree to 1e-4.
"""

import dataclasses
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from agentrl import configtools
from agentrl.train.experiments import load_experiment
from agentrl.train.logger import read_metrics

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax
    if int(sys.argv[3]) > 1:
        jax.config.update("jax_num_cpu_devices", int(sys.argv[3]))
    from agentrl import configtools
    from agentrl.train.config import ExperimentConfig
    from agentrl.train.loop import fit

    assert jax.device_count() == int(sys.argv[3])
    config = configtools.from_dict(ExperimentConfig, json.loads(sys.argv[1]))
    fit(config, sys.argv[2], progress=False)
    """
)


def _run(config, run_dir, devices):
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            SCRIPT,
            json.dumps(configtools.to_dict(config)),
            str(run_dir),
            str(devices),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [r["loss"] for r in read_metrics(run_dir)]


@pytest.mark.long
def test_eight_devices_match_one_device(darkroom_dataset, tmp_path):
    config = load_experiment("ad_darkroom", "smoke")
    config = dataclasses.replace(
        config,
        data=dataclasses.replace(config.data, path=str(darkroom_dataset)),
        train=dataclasses.replace(
            config.train, steps=20, batch_size=16, log_every=1, checkpoint_every=20
        ),
    )
    one = _run(config, tmp_path / "one", 1)
    eight = _run(config, tmp_path / "eight", 8)
    assert len(one) == len(eight) == 20
    np.testing.assert_allclose(one, eight, rtol=1e-4, atol=1e-4)
    assert one[-1] < one[0]  # it is really training
