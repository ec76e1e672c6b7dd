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


def test_the_entry_depends_on_a_plug_in_familys_code(tmp_path, monkeypatch):
    """A task family of the user's own (outside the package): editing its
    file gives its histories another entry (it may draw other tasks)."""
    import dataclasses
    import importlib.util
    import sys

    from agentrl.envs.registry import ENVS

    data = dataclasses.replace(
        load_experiment("ad_darkroom", "smoke").data, env="my_room_gap"
    )
    module = tmp_path / "my_rooms.py"

    def entry(body: str):
        module.write_text(
            f"from agentrl.envs.darkroom import DarkRoom\n\n\n"
            f"class MyRoom(DarkRoom):\n    {body}\n"
        )
        spec = importlib.util.spec_from_file_location("my_rooms", module)
        loaded = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, "my_rooms", loaded)  # as --import does
        spec.loader.exec_module(loaded)
        monkeypatch.setitem(ENVS._items, "my_room_gap", loaded.MyRoom)
        return entry_path(tmp_path / "cache", dataset_fields(data))

    first = entry("pass")
    assert entry("pass") == first
    assert entry("horizon_note = 1") != first
