"""fit reads through grain when the split exceeds the cache; verify policy.

A streamed split gives the device path's batches: the same parameters.
"""

import jax
import numpy as np
import pytest

import agentrl
from agentrl.data import reader, samplers
from agentrl.train import batches
from agentrl.train.loop import fit


def _params(run_dir):
    run = agentrl.load_run(run_dir)
    from flax import nnx

    return jax.tree.leaves(nnx.state(run.model, nnx.Param))


@pytest.mark.long
def test_fit_streams_through_grain_when_the_split_does_not_fit(
    tiny_ad_config, tmp_path, monkeypatch
):
    config = tiny_ad_config(3)
    cached = fit(config, tmp_path / "cached", progress=False)
    calls = []
    original = batches.StreamedBatches.call_data

    def spy(self, *args, **kwargs):
        calls.append(self.sampler.cached)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(samplers, "DEFAULT_CACHE_BYTES", 0)
    monkeypatch.setattr(batches.StreamedBatches, "call_data", spy)
    streamed = fit(config, tmp_path / "streamed", progress=False)
    assert calls == [False] * 3  # a call per update (smoke logs each), from disk
    for a, b in zip(_params(cached), _params(streamed), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.long
def test_full_checksums_on_first_use_sizes_on_resume(
    tiny_ad_config, tmp_path, monkeypatch
):
    modes = []
    original = reader.verify_files

    def spy(path, metadata, mode="full"):
        modes.append(mode)
        return original(path, metadata, mode)

    monkeypatch.setattr(reader, "verify_files", spy)
    run = fit(tiny_ad_config(2), tmp_path / "run", progress=False)
    assert modes == ["full"]
    fit(tiny_ad_config(4), run, resume=True, progress=False)
    assert modes == ["full", "size"]
