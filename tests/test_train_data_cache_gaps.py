"""Kept datasets' keys: another machine or package versions never share an entry."""

import agentrl.train.data_cache as data_cache
from agentrl.train.data_cache import dataset_fields, entry_path
from agentrl.train.experiments import load_experiment


def test_the_entry_depends_on_the_machine_and_the_packages(tmp_path, monkeypatch):
    data = load_experiment("ad_darkroom", "smoke").data
    here = entry_path(tmp_path, dataset_fields(data))
    real_machine, real_packages = (
        data_cache.machine_info(),
        data_cache.package_versions(),
    )
    monkeypatch.setattr(
        data_cache, "machine_info", lambda: {**real_machine, "cpu": "x"}
    )
    elsewhere = entry_path(tmp_path, dataset_fields(data))
    monkeypatch.setattr(data_cache, "machine_info", lambda: real_machine)
    assert entry_path(tmp_path, dataset_fields(data)) == here
    monkeypatch.setattr(
        data_cache, "package_versions", lambda: {**real_packages, "jax": "0.0.1"}
    )
    assert len({here, elsewhere, entry_path(tmp_path, dataset_fields(data))}) == 3
