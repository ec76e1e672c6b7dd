"""Two local processes train together through ``jax.distributed`` (CPU, gloo).

Each process owns one CPU device; the mesh spans both, every process feeds
its slice of the global batch, and the loss curve equals a one-process run
on two local devices.
"""

import dataclasses
import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from agentrl import configtools
from agentrl.train.experiments import load_experiment
from agentrl.train.logger import read_metrics

WORKER = textwrap.dedent(
    """
    import json, sys
    import jax
    from agentrl.train import parallel
    assert parallel.initialize_distributed()
    from agentrl import configtools
    from agentrl.train.config import ExperimentConfig
    from agentrl.train.loop import fit

    assert jax.process_count() == 2 and jax.device_count() == 2
    config = configtools.from_dict(ExperimentConfig, json.loads(sys.argv[1]))
    fit(config, sys.argv[2], progress=False)
    """
)

SINGLE = textwrap.dedent(
    """
    import json, sys
    import jax
    jax.config.update("jax_num_cpu_devices", 2)
    from agentrl import configtools
    from agentrl.train.config import ExperimentConfig
    from agentrl.train.loop import fit

    config = configtools.from_dict(ExperimentConfig, json.loads(sys.argv[1]))
    fit(config, sys.argv[2], progress=False)
    """
)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.long
def test_two_processes_train_like_one(darkroom_dataset, tmp_path):
    config = load_experiment("ad_darkroom", "smoke")
    config = dataclasses.replace(
        config,
        data=dataclasses.replace(config.data, path=str(darkroom_dataset)),
        train=dataclasses.replace(
            config.train, steps=6, batch_size=8, log_every=1, checkpoint_every=3
        ),
    )
    cfg = json.dumps(configtools.to_dict(config))
    port = _free_port()
    procs = []
    for pid in range(2):
        env = {
            **os.environ,
            "AGENTRL_COORDINATOR": f"127.0.0.1:{port}",
            "AGENTRL_NUM_PROCESSES": "2",
            "AGENTRL_PROCESS_ID": str(pid),
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, cfg, str(tmp_path / "multi")],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    single = subprocess.run(
        [sys.executable, "-c", SINGLE, cfg, str(tmp_path / "single")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert single.returncode == 0, single.stderr[-3000:]
    multi = [r["loss"] for r in read_metrics(tmp_path / "multi")]
    one = [r["loss"] for r in read_metrics(tmp_path / "single")]
    assert len(multi) == len(one) == 6
    np.testing.assert_allclose(multi, one, rtol=1e-4, atol=1e-4)
    assert (tmp_path / "multi" / "checkpoints" / "6").is_dir()
