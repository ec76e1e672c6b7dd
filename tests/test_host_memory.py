"""Host memory settings (``agentrl.host_memory``): XLA:CPU's temporary buffers
reused across calls instead of faulted in again from the kernel every call."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from agentrl.host_memory import configure_malloc

# A fresh process (the settings must precede XLA's threads): a jitted
# gradient whose temporaries are ~100 MB, called 10 times after 10 (the
# tuned heap grows in the first ~6 calls, measured); prints the median minor
# page faults of a call.
PROBE = """
import json, resource, sys
from agentrl.host_memory import configure_malloc
applied = configure_malloc()
import jax, jax.numpy as jnp
def loss(ws, x):  # a 4-layer MLP on [16384, 256]: 16 MB activations
    for w in ws:
        x = jnp.tanh(x @ w)
    return jnp.mean(x**2)
ws = [jnp.full((256, 256), 0.01, jnp.float32) for _ in range(4)]
x = jnp.ones((16384, 256), jnp.float32)
f = jax.jit(lambda ws, x: jax.grad(loss)(ws, x))
for _ in range(10):  # the heap settles in the first few calls
    jax.block_until_ready(f(ws, x))
faults = []
for _ in range(10):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    jax.block_until_ready(f(ws, x))
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"applied": applied, "faults": sorted(faults)[5]}))
"""


def _probe(choice: str) -> dict:
    env = {**os.environ, "AGENTRL_MALLOC": choice}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.long
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc")
def test_tuned_malloc_stops_the_page_faults_of_every_call():
    system, tuned = _probe("system"), _probe("tuned")
    assert not system["applied"] and tuned["applied"]
    # each call re-faults its temporaries with glibc's defaults (measured
    # ~26,000 4 KiB pages); reused, none are faulted again (measured 0)
    assert system["faults"] > 4000
    assert tuned["faults"] < system["faults"] / 20


def test_a_bad_setting_names_the_variable(monkeypatch):
    monkeypatch.setenv("AGENTRL_MALLOC", "fast")
    with pytest.raises(ValueError, match="AGENTRL_MALLOC must be one of"):
        configure_malloc()
    monkeypatch.setenv("AGENTRL_MALLOC", "system")
    assert configure_malloc() is False
