"""Bad input gets a clear error: exit code 2, the argument or file named, no traceback.

Table-driven: each command line of :data:`bad_inputs.CLI_ROWS` has one bad
argument; each damage of :data:`bad_inputs.DATASET_DAMAGE` and
:data:`bad_inputs.RUN_DAMAGE` is applied to a copy of a small dataset or run
directory. Nothing here compiles or trains: the run directory is written
from an initial training state, and a guard fails any test that would reach
a compile (or a data generation, an evaluation or a sweep).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from bad_inputs import CLI_ROWS, DATASET_DAMAGE, RUN_DAMAGE, count
from checkout import link_checkout
from flax import nnx

import agentrl
from agentrl import configtools, envs
from agentrl.cli import main
from agentrl.data import DatasetIntegrityError, open_dataset, write_dataset
from agentrl.models import DecisionModel
from agentrl.sources import source_histories
from agentrl.train.checkpoint import Checkpointer
from agentrl.train.config import complete_config
from agentrl.train.experiments import load_experiment
from agentrl.train.rundir import write_run_files
from agentrl.train.step import init_train_state

RUN_OVERRIDES = {
    "train.batch_size": 4,
    "model.d_model": 16,
    "model.d_ff": 32,
    "model.num_layers": 1,
}


class Accepted(Exception):
    """Raised by the guard: a bad input got as far as a compile or a write."""


@pytest.fixture(autouse=True)
def guard(monkeypatch, tmp_path):
    """Nothing may compile, train, generate, evaluate or sweep here."""

    def refuse(*args, **kwargs):
        raise Accepted("a bad input was accepted")

    import agentrl.data.writer
    import agentrl.evaluate.evaluate
    import agentrl.sweep.run
    import agentrl.train.data
    import agentrl.train.loop

    monkeypatch.setattr(agentrl.train.loop, "make_train_step", refuse)
    monkeypatch.setattr(agentrl.train.data, "write_dataset", refuse)
    monkeypatch.setattr(agentrl.data.writer, "write_dataset", refuse)
    monkeypatch.setattr(agentrl.evaluate.evaluate, "evaluate_methods", refuse)
    monkeypatch.setattr(agentrl.sweep.run, "run_sweep", refuse)
    monkeypatch.chdir(tmp_path)  # default run and result folders land here
    link_checkout(tmp_path)  # experiments and benchmarks found by name


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    """``(exit code, stderr)`` of ``agentrl ARGV`` run in this process."""
    try:
        code = main(argv)
    except SystemExit as exit_info:  # argparse's usage errors
        code = exit_info.code
    return code, capsys.readouterr().err


def assert_refused(argv: list[str], fragment: str, capsys) -> str:
    code, err = run_cli(argv, capsys)
    assert code == 2, (argv, code, err)
    assert "error:" in err and "Traceback" not in err, err
    assert fragment in err, (fragment, err)
    return err


def _run_dir(path: Path, dataset: Path, **overrides) -> Path:
    """A run directory as ``fit`` leaves it after step 3, without training."""
    config = configtools.override(
        load_experiment("ad_darkroom", "smoke"),
        {**RUN_OVERRIDES, "data.path": str(dataset), **overrides},
    )
    env = envs.make(config.data.env)
    full = complete_config(config, env, open_dataset(dataset))
    path.mkdir(parents=True)
    write_run_files(path, full, open_dataset(dataset))
    model = DecisionModel(full.model, rngs=nnx.Rngs(0))
    _, state = init_train_state(model, full)
    ckpt = Checkpointer(path / "checkpoints", 3)
    ckpt.save(3, state, {"config": configtools.to_dict(full)})
    ckpt.close()
    return path


@pytest.fixture(scope="module")
def run_dir(darkroom_dataset, tmp_path_factory):
    return _run_dir(tmp_path_factory.mktemp("run") / "run", darkroom_dataset)


@pytest.fixture
def places(tmp_path, run_dir, darkroom_dataset):
    (tmp_path / "file").write_text("a file, not a directory")
    (tmp_path / "empty").mkdir()
    return {
        "run": str(run_dir),
        "data": str(darkroom_dataset),
        "file": str(tmp_path / "file"),
        "tmp": str(tmp_path / "empty"),
    }


@pytest.mark.parametrize("command, fragment", CLI_ROWS, ids=[c for c, _ in CLI_ROWS])
def test_each_bad_argument_is_refused(command, fragment, places, capsys):
    argv = shlex.split(command.format(**places))
    assert_refused(argv, fragment, capsys)


def test_refused_training_leaves_no_run_directory(tmp_path, capsys):
    """A bad source setting is refused before the run directory is made."""
    target = tmp_path / "new_run"
    argv = ["train", "ad_darkroom", "--run-dir", str(target)]
    assert_refused([*argv, "--data.source_args", "nope=1"], "nope", capsys)
    assert not target.exists()


def test_missing_data_path_is_refused_before_any_directory_or_model(
    monkeypatch, tmp_path, capsys
):
    """It was found after the model was built and the default run
    directory's parents made: ``runs/`` was left behind."""
    import agentrl.train.loop

    def refuse(*args, **kwargs):
        raise Accepted("the model was built")

    monkeypatch.setattr(agentrl.train.loop, "build_model", refuse)
    argv = ["train", "ad_darkroom", "--data.path", str(tmp_path / "nonexistent")]
    assert_refused(argv, "no such dataset directory", capsys)
    assert not (tmp_path / "runs").exists()


def test_late_refusal_removes_the_parents_it_made(darkroom_dataset, tmp_path, capsys):
    """A dataset of another family is refused once opened, after the run
    directory is made: its parents made for it go with it."""
    target = tmp_path / "new" / "deeper" / "run"
    argv = ["train", "dpt_bandit", "--data.path", str(darkroom_dataset)]
    assert_refused([*argv, "--run-dir", str(target)], "holds 'darkroom'", capsys)
    assert not (tmp_path / "new").exists()


def test_empty_run_dir_is_refused_by_fit():
    from agentrl.train.loop import fit

    with pytest.raises(ValueError, match="run_dir must be a directory path"):
        fit(load_experiment("ad_darkroom", "smoke"), "")


def test_unknown_baseline_is_refused_before_the_run_is_loaded(
    monkeypatch, run_dir, capsys
):
    """It was refused only once the run was loaded and the model's program
    built (seconds), as an 'unknown source' naming neither the flag nor
    the baselines."""
    import agentrl.evaluate.run

    def refuse(*args, **kwargs):
        raise Accepted("the run was loaded")

    monkeypatch.setattr(agentrl.evaluate.run, "load_run", refuse)
    argv = ["eval", str(run_dir), "--baselines", "random,orcale"]
    err = assert_refused(argv, "--baselines", capsys)
    assert "'orcale'" in err and "oracle, random" in err and "q_learning" in err
    assert "'random'" not in err  # a known name is not called unknown


def test_the_run_directory_fixture_opens(run_dir):
    run = agentrl.load_run(run_dir)  # so the damage below is what fails
    assert run.step == 3 and run.split is not None


# --------------------------------------------------------------- datasets
@pytest.mark.parametrize(
    "damage, fragment",
    [(d, f) for _, d, f in DATASET_DAMAGE],
    ids=[name for name, _, _ in DATASET_DAMAGE],
)
def test_damaged_dataset_is_refused_naming_the_file(
    damage, fragment, darkroom_dataset, tmp_path, capsys
):
    path = shutil.copytree(darkroom_dataset, tmp_path / "ds")
    damage(path)
    err = assert_refused(["data", "verify", str(path)], fragment, capsys)
    assert str(path) in err
    # without checksums, the damage is found when opening or at first read
    with pytest.raises((DatasetIntegrityError, FileNotFoundError)) as info:
        ds = open_dataset(path, verify="none")
        ds.env  # noqa: B018
        ds.check_values()
    assert str(path) in str(info.value) and fragment in str(info.value)


@pytest.mark.parametrize("bad", [np.nan, np.inf], ids=["nan", "inf"])
def test_non_finite_values_are_refused_at_first_read(bad, tmp_path, capsys):
    env = envs.make("darkroom")
    q = source_histories("q_learning", env)

    def histories(params, key, num_episodes, task_id):
        h = q(params, key, num_episodes, task_id)
        return h.replace(reward=h.reward.at[1, 5].set(bad))

    path = write_dataset(tmp_path / "nan", env, histories, 3, 2, env_name="darkroom")
    ds = open_dataset(path)  # checksums match: the file is as written
    ds.record("train", 0)  # other records read fine
    with pytest.raises(DatasetIntegrityError, match="record 1 .*non-finite.*reward"):
        ds.load_history("train")
    assert_refused(["data", "verify", str(path)], "non-finite", capsys)


# ---------------------------------------------------------- run directories
EVAL = ["--episodes", "1", "--tasks", "1", "--baselines", "random"]


@pytest.mark.parametrize(
    "damage, fragment",
    [(d, f) for _, d, f in RUN_DAMAGE],
    ids=[name for name, _, _ in RUN_DAMAGE],
)
def test_damaged_run_directory_is_refused_naming_the_file(
    damage, fragment, run_dir, tmp_path, capsys
):
    path = shutil.copytree(run_dir, tmp_path / "run")
    damage(path)
    err = assert_refused(["eval", str(path), *EVAL], fragment, capsys)
    assert str(path) in err
    with pytest.raises((ValueError, FileNotFoundError), match=re.escape(fragment)):
        agentrl.load_run(path)


def test_checkpoint_of_another_model_with_the_same_shapes(
    run_dir, darkroom_dataset, tmp_path, capsys
):
    other = _run_dir(tmp_path / "other", darkroom_dataset, **{"model.dropout": 0.1})
    path = shutil.copytree(run_dir, tmp_path / "run")
    shutil.rmtree(path / "checkpoints")
    shutil.copytree(other / "checkpoints", path / "checkpoints")
    assert_refused(["eval", str(path), *EVAL], "model.dropout: 0.1 vs 0.0", capsys)


def test_resuming_from_a_damaged_checkpoint_is_refused(
    run_dir, darkroom_dataset, tmp_path, capsys
):
    path = shutil.copytree(run_dir, tmp_path / "run")
    for file in (path / "checkpoints/3/state").rglob("manifest.ocdbt"):
        file.write_bytes(file.read_bytes()[:10])
    fields = [f"--{k}={v}" for k, v in RUN_OVERRIDES.items()]
    argv = ["train", "ad_darkroom", "--run-dir", str(path), "--no-progress"]
    argv += [f"--data.path={darkroom_dataset}", *fields]
    assert_refused(argv, "checkpoints/3/state", capsys)


def test_resuming_a_run_without_config_json_under_another_config_is_refused(
    run_dir, darkroom_dataset, tmp_path, capsys
):
    """With config.json gone the resume went unchecked (another learning
    rate, seed ...); it is compared with the config its checkpoint recorded."""
    path = shutil.copytree(run_dir, tmp_path / "run")
    (path / "config.json").unlink()
    fields = [f"--{k}={v}" for k, v in RUN_OVERRIDES.items()]
    argv = ["train", "ad_darkroom", "--run-dir", str(path), "--no-progress"]
    argv += [f"--data.path={darkroom_dataset}", *fields, "--train.lr", "0.05"]
    err = assert_refused(argv, "train.lr: 0.001 -> 0.05", capsys)
    assert "config.json is missing" in err
    assert not (path / "config.json").exists()


@pytest.mark.long
def test_truncated_checkpoint_leaves_no_traceback_in_a_fresh_process(run_dir, tmp_path):
    """Orbax's restore used to fail inside its event loop ('Event loop is
    closed' tracebacks printed by tensorstore's threads at exit)."""
    path = shutil.copytree(run_dir, tmp_path / "run")
    for file in (path / "checkpoints/3/state").rglob("*"):
        if file.name == "manifest.ocdbt" or file.parent.name == "d":
            file.write_bytes(file.read_bytes()[:10])
    out = subprocess.run(
        [sys.executable, "-m", "agentrl.cli", "eval", str(path), *EVAL],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and "Event loop" not in out.stderr
    assert "agentrl eval: error:" in out.stderr and str(path) in out.stderr


def test_count_of_bad_inputs_matches_the_docs():
    numbers = count()
    print("bad inputs covered:", numbers)
    doc = (Path(__file__).parents[1] / "docs" / "reliability.md").read_text()
    match = re.search(r"([\d,]+)\s+distinct\s+bad\s+inputs", doc)
    assert match, "docs/reliability.md states the count"
    assert int(match.group(1).replace(",", "")) == numbers["total"], numbers
