"""The command line: dispatch, listing, and early clear errors."""

import pytest

from agentrl.cli import main


def test_help_and_unknown_command(capsys):
    assert main([]) == 2
    assert "train" in capsys.readouterr().out
    try:
        main(["trian"])
    except SystemExit as e:
        assert e.code == 2
    assert "unknown command 'trian'" in capsys.readouterr().err


def test_version(capsys):
    import agentrl

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"agentrl {agentrl.__version__}\n"


def test_help_says_what_demo_and_eval_run_and_write():
    """``agentrl --help`` once said demo ran "at smoke size" (its default
    preset is ``demo``); eval's docstring put its TensorBoard scalars in
    ``RUN_DIR/tb`` (they go to the results directory, ``RUN_DIR/eval``)."""
    import agentrl.evaluate.cli
    from agentrl.cli import COMMANDS
    from agentrl.demo import Args

    assert "smoke" not in COMMANDS["demo"][1]
    assert f"{Args().preset} preset" in COMMANDS["demo"][1]
    doc = " ".join(agentrl.evaluate.cli.__doc__.split())
    assert "TensorBoard scalars (``RUN_DIR/eval/tb``" in doc


def test_envs_lists_the_families_without_importing_jax(tmp_path):
    # a listing needs names and descriptions only: no JAX (seconds to
    # import), no compilation; measured by what the process imported
    import os
    import subprocess
    import sys
    from pathlib import Path

    import agentrl

    code = (
        "import sys; from agentrl.cli import main; rc = main(['envs']); "
        "print('imported jax' if 'jax' in sys.modules else 'no jax'); sys.exit(rc)"
    )
    root = str(Path(agentrl.__file__).parents[1])
    path = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "no jax"
    assert any(
        line.split()[:1] == ["darkroom"] and "Dark Room" in line for line in lines
    )
    assert any(line.strip().startswith("gymnax:<id>") for line in lines)


def test_registry_lists_a_lazy_entry_before_importing_it():
    import json

    from agentrl.registry import Registry

    reg = Registry("lazy_thing")
    reg.register_lazy("decoder", "json:JSONDecoder", "decodes JSON")
    assert "decoder" in reg and reg.names() == ["decoder"]
    assert reg.describe("decoder") == "decodes JSON"
    assert reg.module_of("decoder") == __name__
    assert reg.get("decoder") is json.JSONDecoder
    assert reg.register("decoder", json.JSONDecoder) is json.JSONDecoder
    with pytest.raises(ValueError, match="already registered"):
        reg.register("decoder", json.JSONEncoder)
    assert reg.items() == [("decoder", json.JSONDecoder)]


def test_envs_table(capsys):
    assert main(["envs", "darkroom", "--tasks", "8"]) == 0
    out = capsys.readouterr().out
    assert "| darkroom | 20 |" in out


def test_envs_says_why_a_gymnax_family_is_not_measured(capsys):
    assert main(["envs"]) == 0
    assert "no oracle, so not measured here" in capsys.readouterr().out
    assert main(["envs", "gymnax:CartPole-v1"]) == 2
    assert "gymnax:<id> families have no oracle" in capsys.readouterr().err


def test_train_bad_field_fails_before_compiling(capsys):
    assert main(["train", "ad_darkroom", "--train.lrr", "1"]) == 2
    err = capsys.readouterr().err
    assert "unknown config field 'train.lrr'" in err and "train.lr" in err


def test_unrecognized_flag_for_a_command_without_overrides(capsys):
    try:
        main(["envs", "--bogus", "1"])
    except SystemExit as e:
        assert e.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_bench_lists_benchmarks_and_refuses_unknown_names(capsys):
    assert main(["bench"]) == 0
    out = capsys.readouterr().out
    assert "env_throughput" in out and "hlo_tools" not in out and "common" not in out
    assert "Random-policy environment throughput" in out  # one-line docstrings
    assert main(["bench", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown benchmark 'nope'" in err and "loader" in err


def test_bench_passes_the_remaining_arguments_to_the_benchmark(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "env_throughput", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "usage: agentrl bench env_throughput [-h] [--quick]" in out


def test_bench_mujoco_families_must_be_known(capsys):
    """A subset of the MuJoCo throughput families: an unknown name is refused
    (exit 2) with the allowed ones, before anything is built or compiled."""
    argv = ["bench", "env_throughput", "--mujoco", "--mujoco-families", "hopper,ant"]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--mujoco-families" in err and "['hopper', 'ant']" in err
    assert "allowed: halfcheetah_vel, halfcheetah_dir, ant_dir" in err


@pytest.mark.long
def test_demo_runs_the_pipeline_end_to_end(tmp_path, capsys):
    """``make demo``'s command at smoke size: data, training, evaluation."""
    out = tmp_path / "demo"
    assert main(["demo", "--preset", "smoke", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "return ep 1" in printed and "improvement" in printed
    assert (out / "eval" / "results.md").is_file()
