"""The source-run cache (agentrl.evaluate.source_cache): mutants the tests
before let through.

Pass 11 of the hand-made mutation passes. An entry's key covers the code of
the module that defines the environment (a plug-in family outside
agentrl): an edit there is a miss, not another computation's numbers.
"""

from __future__ import annotations

import importlib.util
import sys

import jax

from agentrl.evaluate.source_cache import entry_fields


def _plug_in_env(path, text, monkeypatch):
    """An instance of ``MyRobot`` from ``path`` written with ``text``,
    imported as a plug-in module is (in ``sys.modules``)."""
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("my_family", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "my_family", module)
    spec.loader.exec_module(module)
    return module.MyRobot(horizon=5)


def test_the_code_defining_a_plug_in_environment_is_part_of_the_key(
    tmp_path, monkeypatch
):
    header = "from agentrl.envs.point_robot import PointRobot\n\n\n"
    body = "class MyRobot(PointRobot):\n    pass\n"
    module = tmp_path / "my_family.py"
    first = _plug_in_env(module, header + body, monkeypatch)
    params = jax.vmap(first.sample_params)(jax.random.split(jax.random.key(0), 2))

    def fields(env):
        return entry_fields("random", {}, 3, env, "my_robot", params, jax.random.key(1))

    same = fields(_plug_in_env(module, header + body, monkeypatch))
    assert fields(first) == same
    edited = fields(_plug_in_env(module, header + body + "# edited\n", monkeypatch))
    assert edited["code_sha256"] != same["code_sha256"]
    assert {k: v for k, v in edited.items() if k != "code_sha256"} == {
        k: v for k, v in same.items() if k != "code_sha256"
    }
