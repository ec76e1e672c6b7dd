"""Experiments are files of the checkout: found by name from the working
directory (or the nearest directory above it with an ``experiments/``
folder), by path from anywhere, and they import the modules beside them."""

from __future__ import annotations

import os
import sys
import textwrap

import pytest
from checkout import EXPERIMENTS, ROOT, experiment_path

from agentrl.project import load
from agentrl.train.experiments import known_experiments, load_experiment


@pytest.fixture
def restore_imports(monkeypatch, tmp_path):
    """Undo what loading files of ``tmp_path`` adds to ``sys.path`` and
    ``sys.modules``."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None)).startswith(str(tmp_path)):
            del sys.modules[name]


def test_names_are_found_from_a_subdirectory_of_the_checkout(monkeypatch):
    monkeypatch.chdir(ROOT / "notebooks")  # where the notebooks run
    want = sorted(p.stem for p in EXPERIMENTS.glob("[!_]*.py"))
    assert known_experiments() == want
    assert load_experiment("ad_darkroom", "smoke").name == "ad_darkroom"


def test_a_path_works_from_anywhere_with_its_sibling_imports(tmp_path, monkeypatch):
    by_name = load_experiment("t2mir_ad_darkroom", "cpu")  # from the checkout
    monkeypatch.chdir(tmp_path)
    # t2mir_ad_darkroom imports ad_darkroom and _t2mir from its own folder
    assert load_experiment(experiment_path("t2mir_ad_darkroom"), "cpu") == by_name
    assert known_experiments() == []


def test_unknown_names_get_an_error_naming_what_is_allowed(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=r"unknown experiment 'nope'.*ad_darkroom"):
        load_experiment("nope")
    with pytest.raises(ValueError, match="no experiment file 'nope.py'"):
        load_experiment("nope.py")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="no experiments/ folder in .* or above"):
        load_experiment("ad_darkroom")


def test_a_users_own_folder_with_a_helper_module(
    tmp_path, monkeypatch, restore_imports
):
    folder = tmp_path / "experiments"
    folder.mkdir()
    (folder / "_shared_steps_xyz.py").write_text("STEPS = 7\n")
    (folder / "mine_xyz.py").write_text(
        textwrap.dedent(
            '''
            """A user's experiment: a helper beside it and a dataclass of its own."""

            from __future__ import annotations

            import dataclasses

            from _shared_steps_xyz import STEPS
            from agentrl.train.experiments import load_experiment, make_presets


            @dataclasses.dataclass(frozen=True)
            class Note:
                text: str | None = None


            BASE = load_experiment(AD_DARKROOM, "smoke")
            PRESETS = make_presets(BASE, smoke={"train.steps": STEPS})
            '''
        ).replace("AD_DARKROOM", repr(experiment_path("ad_darkroom")))
    )
    base = load_experiment("ad_darkroom", "smoke")
    monkeypatch.chdir(tmp_path / "experiments")  # the folder itself is found too
    assert known_experiments() == ["mine_xyz"]
    with pytest.raises(ValueError, match="unknown experiment 'ad_darkroom'"):
        load_experiment("ad_darkroom")  # this folder's names only
    monkeypatch.chdir(tmp_path)
    config = load_experiment(str(folder / "mine_xyz.py"), "smoke")  # by path
    assert config.train.steps == 7 and config.model == base.model
    assert load_experiment("mine_xyz", "smoke") == config  # by name


def test_a_file_named_like_a_standard_module_does_not_replace_it(
    tmp_path, restore_imports
):
    import json

    (tmp_path / "json.py").write_text("VALUE = 3\n")
    assert load(tmp_path / "json.py").VALUE == 3
    assert sys.modules["json"] is json


def test_an_edit_is_read_even_where_bytecode_is_cached(
    tmp_path, restore_imports, monkeypatch
):
    """Bytecode is checked by the source's mtime (whole seconds) and size: an
    edit of the same length within a second once ran the old code."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "pyc"))
    path = tmp_path / "my_settings.py"
    path.write_text("VALUE = 6\n")
    stamp = os.stat(path).st_mtime_ns
    assert load(path).VALUE == 6
    path.write_text("VALUE = 9\n")
    os.utime(path, ns=(stamp, stamp))  # the same mtime and size as before
    assert load(path).VALUE == 9
    assert not (tmp_path / "pyc").exists()  # nothing cached, nothing left
