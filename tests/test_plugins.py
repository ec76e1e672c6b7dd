"""One registry style and plug-ins: registry rules, --import, entry points, runs.

The shell test defines a task family and an algorithm in a module of the
user's own (in ``tmp_path``, not on PYTHONPATH) and runs ``agentrl --import
MODULE train``, ``agentrl eval``, ``agentrl sweep`` and ``agentrl.load_run``
on them from that directory, as a user would.
"""

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from agentrl import plugins, registry
from agentrl.cli import main
from agentrl.registry import Registry

# ----- the registry's rules -------------------------------------------------


class _First:
    pass


class _Second:
    pass


def test_the_same_object_twice_is_harmless():
    reg = Registry("thing_a")
    assert reg.register("x", _First) is _First
    assert reg.register("x", _First) is _First
    assert reg.get("x") is _First and reg.names() == ["x"]
    assert reg.module_of("x") == __name__


def test_another_object_under_a_taken_name_names_both():
    reg = Registry("thing_b")
    reg.register("x", _First)
    with pytest.raises(ValueError) as err:
        reg.register("x", _Second)
    text = str(err.value)
    assert f"{__name__}._First" in text and f"{__name__}._Second" in text
    assert reg.get("x") is _First


def _run_cell(code: str, **names) -> dict:
    """Execute ``code`` as a notebook cell does (module ``__main__``)."""
    namespace = {"__name__": "__main__", **names}
    exec(compile(textwrap.dedent(code), "<cell>", "exec"), namespace)
    return namespace


def test_a_notebook_cell_run_again_replaces_its_class():
    reg = Registry("thing_c")
    cell = """
        class Family:
            pass

        REG.register("family", Family)
    """
    first = _run_cell(cell, REG=reg)
    second = _run_cell(cell, REG=reg)
    assert first["Family"] is not second["Family"]
    assert reg.get("family") is second["Family"]
    assert reg.module_of("family") == "__main__"


def test_a_notebook_cell_registering_an_env_and_an_algorithm_runs_twice():
    from agentrl.algos.base import ALGORITHMS
    from agentrl.envs.registry import ENVS

    cell = """
        import dataclasses

        from agentrl.algos.ad import AD
        from agentrl.algos.base import register_algorithm
        from agentrl.envs.darkroom import DarkRoom
        from agentrl.envs.registry import register_env


        @register_env("nb_room")
        class NotebookRoom(DarkRoom):
            pass


        @register_algorithm
        @dataclasses.dataclass(frozen=True)
        class NotebookAD(AD):
            name = "nb_ad"
    """
    try:
        _run_cell(cell)
        again = _run_cell(cell)
        assert ENVS.get("nb_room") is again["NotebookRoom"]
        assert ALGORITHMS.get("nb_ad") is again["NotebookAD"]
    finally:
        for reg, name in ((ENVS, "nb_room"), (ALGORITHMS, "nb_ad")):
            if name in reg:
                reg.unregister(name)


def test_decorator_unknown_names_and_the_module_to_import():
    reg = Registry("thing_d", note="or something else")

    @reg.register("f")
    def f():
        return 1

    assert reg.get("f") is f and "f" in reg and list(reg) == ["f"]
    with pytest.raises(ValueError, match=r"unknown thing_d 'g'; registered: f \(or"):
        reg.get("g")
    assert reg.get("g", None) is None
    registry.expect("thing_d", "g", "some_plugin_module")
    with pytest.raises(ValueError, match="agentrl --import some_plugin_module"):
        reg.get("g")
    reg.unregister("f")
    assert "f" not in reg and len(reg) == 0


# ----- plug-in modules ------------------------------------------------------


def test_import_plugins_names_a_missing_module():
    with pytest.raises(ValueError, match="module 'no_such_plugin_xyz': No module"):
        plugins.import_plugins(["no_such_plugin_xyz"])
    with pytest.raises(ValueError, match="without .py: 'my_family'"):
        plugins.import_plugins(["my_family.py"])


def test_entry_points_name_modules_to_import(tmp_path, monkeypatch):
    (tmp_path / "ep_plugin_mod.py").write_text("LOADED = True\n")
    info = tmp_path / "ep_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ep_plugin\n")
    (info / "entry_points.txt").write_text("[agentrl.plugins]\nmine = ep_plugin_mod\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "ep_plugin_mod", raising=False)
    loaded = plugins.load_entry_points()
    assert "ep_plugin_mod" in [m.__name__ for m in loaded]
    assert sys.modules["ep_plugin_mod"].LOADED


def test_required_plugins_and_what_a_run_records():
    from agentrl.envs.darkroom import DarkRoom
    from agentrl.envs.registry import ENVS, register_env

    register_env("plugin_room", DarkRoom)  # registered by this (non-agentrl) module
    try:
        algo = types.SimpleNamespace(
            to_config_dict=lambda: {"name": "t2mir", "base": {"name": "ad"}}
        )
        data = types.SimpleNamespace(env="plugin_room", source="q_learning")
        config = types.SimpleNamespace(data=data, algo=algo)
        assert plugins.required_plugins(config) == {
            __name__: {"environment": ["plugin_room"]}
        }
        # everything it provided is registered: nothing to import
        assert plugins.import_recorded(plugins.required_plugins(config)) == []
    finally:
        ENVS.unregister("plugin_room")
    missing = {"gone_plugin_xyz": {"environment": ["gone_room"]}}
    with pytest.raises(ValueError) as err:
        plugins.import_recorded(missing, "run 'r'")
    assert "run 'r' needs the plug-in module 'gone_plugin_xyz'" in str(err.value)
    assert "environment 'gone_room'" in str(err.value)


# ----- from the shell -------------------------------------------------------

FAMILY = '''
"""A user's task family and algorithm (a plug-in module)."""

import dataclasses

from agentrl.algos.ad import AD
from agentrl.algos.base import register_algorithm
from agentrl.envs.darkroom import DarkRoom
from agentrl.envs.registry import register_env


@register_env("tiny_room")
class TinyRoom(DarkRoom):
    """Dark Room, 5x5 with 10 steps an episode."""

    def __init__(self, size: int = 5, horizon: int = 10):
        super().__init__(size=size, horizon=horizon)


@register_algorithm
@dataclasses.dataclass(frozen=True)
class ShortAD(AD):
    """AD with a two-episode context by default."""

    name = "short_ad"
    context_episodes: int = 2
'''

EXPERIMENT = '''
"""Tiny experiment on the plug-in's family and algorithm (by registered name)."""

from agentrl.algos.base import get
from agentrl.models.config import ModelConfig
from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig, TrainConfig
from agentrl.train.experiments import make_presets

BASE = ExperimentConfig(
    name="plugin_exp",
    algo=get("short_ad"),
    data=DataConfig(env="tiny_room", num_tasks=6, num_episodes=4),
    model=ModelConfig(num_layers=1, num_heads=1, d_model=16, d_ff=32),
    train=TrainConfig(steps=2, batch_size=4, log_every=1, checkpoint_every=2),
    eval=EvalConfig(num_tasks=2, num_episodes=2),
)
PRESETS = make_presets(BASE, smoke={}, cpu={}, gpu={}, full={})
'''


def _agentrl() -> list[str]:
    script = Path(sys.executable).with_name("agentrl")
    if script.is_file():  # the console script: the cwd is not on its sys.path
        return [sys.executable, str(script)]
    return [sys.executable, "-c", "import sys; from agentrl.cli import main; main()"]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.long
def test_a_plugin_family_and_algorithm_work_from_the_shell(
    tmp_path, monkeypatch, capsys
):
    (tmp_path / "my_family.py").write_text(FAMILY)
    (tmp_path / "tiny_exp.py").write_text(EXPERIMENT)
    agentrl = _agentrl()

    train = _run(
        [
            *agentrl,
            "--import",
            "my_family",
            "train",
            "tiny_exp.py",
            "--run-dir",
            "runs/p",
            "--no-progress",
        ],
        tmp_path,
    )
    assert train.returncode == 0, train.stderr[-3000:]
    record = json.loads((tmp_path / "runs/p/run.json").read_text())
    assert record["plugins"] == {
        "my_family": {"environment": ["tiny_room"], "algorithm": ["short_ad"]}
    }

    # eval imports the recorded plug-in itself (no --import)
    ev = _run(
        [*agentrl, "eval", "runs/p", "--baselines", "random", "--tasks", "2"],
        tmp_path,
    )
    assert ev.returncode == 0, ev.stderr[-3000:]
    assert (tmp_path / "runs/p/eval/results.json").is_file()

    # --import after the command works too
    sweep = _run(
        [
            *agentrl,
            "sweep",
            "tiny_exp.py",
            "--import",
            "my_family",
            "--seeds",
            "2",
            "--out",
            "sweeps/s",
            "--no-eval",
            "--no-progress",
        ],
        tmp_path,
    )
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    assert (tmp_path / "sweeps/s/results.json").is_file()

    load = _run(
        [
            sys.executable,
            "-c",
            "import sys, agentrl; run = agentrl.load_run('runs/p'); "
            "print(type(run.env).__name__, run.config.algo.name, "
            "'my_family' in sys.modules)",
        ],
        tmp_path,
    )
    assert load.returncode == 0, load.stderr[-3000:]
    assert load.stdout.split() == ["TinyRoom", "short_ad", "True"]

    # from a directory that cannot import the plug-in: one line naming it
    # (in this process, to save a start-up: the plug-in is not importable here)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(sys, "path", list(sys.path))
    capsys.readouterr()
    assert main(["eval", str(tmp_path / "runs/p")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "plug-in module 'my_family'" in err
    assert "agentrl --import my_family" in err
    assert "my_family" not in sys.modules
