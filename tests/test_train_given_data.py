"""``agentrl data generate`` then ``agentrl train --data.path``: they connect,
and the run records the data it used, not the preset's sizes."""

from __future__ import annotations

from agentrl.cli import main
from agentrl.data.reader import open_dataset
from agentrl.envs.registry import make
from agentrl.train.config import complete_config, data_used
from agentrl.train.experiments import load_experiment


def test_generated_data_is_what_the_run_records(tmp_path, capsys):
    out = tmp_path / "dr_q"
    argv = ["data", "generate", "--env", "darkroom", "--source", "q_learning"]
    argv += ["--tasks", "3", "--episodes", "4", "--seed", "7", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f"agentrl train EXPERIMENT --data.path {out}" in printed

    config = load_experiment("ad_darkroom", "smoke", {"data.path": str(out)})
    preset = config.data
    assert (preset.num_tasks, preset.num_episodes, preset.seed) != (3, 4, 7)
    full = complete_config(config, make("darkroom"), open_dataset(out))
    data = full.data
    assert (data.num_tasks, data.num_episodes, data.seed) == (3, 4, 7)
    assert data.source == "q_learning" and data.path == str(out)
    assert dict(data.source_args) == open_dataset(out).metadata["source"]["settings"]
    # without data.path the run generates its own data: nothing to replace
    assert data_used(preset.__class__(), open_dataset(out)) == preset.__class__()


def test_the_printed_command_trains_on_data_of_other_env_args(tmp_path, capsys):
    """Histories of ``--env-arg max_goal_distance=4``: the train command the
    generator prints carries the env args, which a run must match (it is
    refused without them), so copying it works."""
    import shlex

    from agentrl.configcli import parse
    from agentrl.train.data import _check_same_env

    out = tmp_path / "near"
    argv = ["data", "generate", "--env", "darkroom", "--source", "q_learning"]
    argv += ["--env-arg", "max_goal_distance=4", "--tasks", "3", "--episodes", "2"]
    assert main([*argv, "--out", str(out)]) == 0
    line = next(s for s in capsys.readouterr().out.splitlines() if "train on it" in s)
    command = shlex.split(line.split("train on it: ")[1].split(" (an")[0])
    assert command[:3] == ["agentrl", "train", "EXPERIMENT"]
    config = parse(load_experiment("ad_darkroom", "smoke"), command[3:])
    recorded = open_dataset(out).metadata["env"]
    _check_same_env(config.data, recorded, "data.path")  # no error: the same env
