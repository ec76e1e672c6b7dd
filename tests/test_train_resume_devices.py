"""A run resumed on another number of devices continues the same run.

Checkpoints hold unsharded arrays, placed on the resuming process's mesh. A
run trained on 8 fake CPU devices, resumed on 1 and then on 8 again ends with
the parameters of a run that never moved (to float tolerance: 8 devices
reduce gradients in another order). Each segment is a fresh process (the
device count is fixed at JAX start-up).
"""

import json
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from flax import nnx

from agentrl import configtools
from agentrl.train.rundir import load_model

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
    stop = int(sys.argv[4]) if len(sys.argv) > 4 else None
    fit(config, sys.argv[2], progress=False, stop_at_step=stop)
    """
)


def _fit(config, run_dir, devices, stop=None):
    args = [json.dumps(configtools.to_dict(config)), str(run_dir), str(devices)]
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, *args, *([str(stop)] if stop else [])],
        # four short runs of the same small programs: cache every compile
        env={**os.environ, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def _params(run_dir):
    model, _ = load_model(run_dir)
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(model, nnx.Param))]


@pytest.mark.long
def test_resume_on_one_device_and_back_to_eight(tiny_ad_config, tmp_path):
    config = configtools.override(
        tiny_ad_config(steps=6),
        {"train.batch_size": 8, "train.log_every": 1, "train.checkpoint_every": 2},
    )
    _fit(config, tmp_path / "never_moved", 8)
    moved = tmp_path / "moved"
    _fit(config, moved, 8, stop=2)
    _fit(config, moved, 1, stop=4)
    assert json.loads((moved / "run.json").read_text())["num_devices"] == 1
    _fit(config, moved, 8)
    assert json.loads((moved / "run.json").read_text())["num_devices"] == 8
    # each segment went on from the last: every step was trained exactly once
    lines = (moved / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [1, 2, 3, 4, 5, 6]
    for a, b in zip(_params(tmp_path / "never_moved"), _params(moved), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
