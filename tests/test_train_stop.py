"""Clean stops (issue 35, items 7 and 8): SIGTERM and Ctrl-C during training.

A training subprocess (``agentrl train``, tiny) sends itself SIGTERM, then
(resumed) SIGINT mid-run (``fault_tools``: at the 3rd update; just before a
checkpoint save). Each time it must stop at the next update boundary with
a complete checkpoint of that step, leave no temporary (orbax's ``*-tmp``
included) and no lock, exit with 143 / 130 (128 + signal) and print the
command that resumes it; that command, run, says ``resumed at step N``,
ends with the final loss and the run directory, and its parameters are
bit-identical to an uninterrupted run's. The online learner (the same runner) stops and
resumes exactly too; ``data generate`` stops without leaving anything.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import threading
from pathlib import Path

import numpy as np
import pytest
from fault_tools import complete_steps, params_of, run_cli, temporaries, train_args

from agentrl.train.stop import Stopped, stop_requested, stop_signals

STEPS = 8
ADVANCE = "agentrl.train.logger:RunLogger.advance"  # once per update (or call)
SAVE = "agentrl.train.checkpoint:Checkpointer.save"


def fresh_tmpdir(root: Path) -> Path:
    path = root / "TMPDIR"
    path.mkdir()
    return path


@pytest.fixture(scope="module")
def straight(darkroom_dataset, tmp_path_factory):
    """An uninterrupted run: ``(run_dir, its stdout)``."""
    root = tmp_path_factory.mktemp("straight")
    run_dir = root / "run"
    proc = run_cli(train_args(darkroom_dataset, run_dir, STEPS), fresh_tmpdir(root))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir, proc.stdout


@pytest.mark.long
def test_train_ends_with_its_final_loss_and_run_directory(straight):
    run_dir, stdout = straight
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["step"] == STEPS
    lines = stdout.strip().splitlines()
    assert lines[-2:] == [
        f"final loss {last['loss']:.4g} at step {STEPS}",
        f"run directory: {run_dir}",
    ]
    assert "resumed at step" not in stdout  # a fresh run


def check_stopped(proc, name: str, run_dir: Path, tmpdir: Path, after: int):
    """``(step, resume command)`` of a run that ``name`` stopped after at
    least ``after`` updates, checked: exit code, message, checkpoint, no
    temporary or lock left."""
    assert proc.returncode == 128 + getattr(signal, name), proc.stderr[-3000:]
    found = re.search(rf"training stopped by {name} at step (\d+);", proc.stderr)
    assert found, proc.stderr[-3000:]
    step = int(found.group(1))
    # the next boundary after the signal, before the end; its checkpoint is
    # complete and nothing temporary or locked is left
    assert after <= step < STEPS
    assert complete_steps(run_dir / "checkpoints")[-1] == step
    assert temporaries(run_dir) == [] and not (run_dir / ".lock").exists()
    assert list(tmpdir.iterdir()) == []
    resume = proc.stderr.strip().splitlines()[-1]
    assert resume.startswith("resume with: agentrl train ")
    return step, shlex.split(resume.removeprefix("resume with: "))


@pytest.mark.long
def test_stop_signals_checkpoint_and_the_printed_command_resumes_exactly(
    darkroom_dataset, straight, tmp_path
):
    """SIGTERM at the 3rd update; the printed command resumes, and SIGINT
    stops it just before its first save; the next printed command ends the
    run bit-identical to an uninterrupted one."""
    tmpdir = fresh_tmpdir(tmp_path)
    run_dir = tmp_path / "run"
    args = train_args(darkroom_dataset, run_dir, STEPS)
    kill = {"target": ADVANCE, "nth": 3, "delay": 0, "signal": "SIGTERM"}
    first = run_cli(args, tmpdir, kill=kill)
    step, command = check_stopped(first, "SIGTERM", run_dir, tmpdir, after=3)
    assert command == ["agentrl", *map(str, args)]

    kill = {"target": SAVE, "nth": 1, "delay": 0, "signal": "SIGINT"}
    second = run_cli(command[1:], tmpdir, kill=kill)
    assert f"resumed at step {step} from " in second.stdout
    step, command = check_stopped(second, "SIGINT", run_dir, tmpdir, after=step + 1)
    assert command == ["agentrl", *map(str, args)]

    final = run_cli(command[1:], tmpdir)
    assert final.returncode == 0, final.stderr[-3000:]
    assert f"resumed at step {step} from " in final.stdout
    assert "final loss " in final.stdout and f"at step {STEPS}\n" in final.stdout
    assert final.stdout.strip().splitlines()[-1] == f"run directory: {run_dir}"
    for a, b in zip(params_of(straight[0]), params_of(run_dir), strict=True):
        np.testing.assert_array_equal(a, b)
    assert temporaries(run_dir) == [] and list(tmpdir.iterdir()) == []


@pytest.mark.long
def test_data_generate_stops_between_chunks_leaving_nothing(tmp_path):
    tmpdir = fresh_tmpdir(tmp_path)
    out = tmp_path / "data" / "dr"
    args = [
        "data",
        "generate",
        "--env",
        "darkroom",
        "--source",
        "q_learning",
        "--tasks",
        "8",
        "--episodes",
        "4",
        "--chunk-size",
        "2",
        "--out",
        str(out),
    ]
    # The signal comes as the first chunk is handed to the shard writer. It
    # is sent from the main thread, where Python runs signal handlers, so the
    # flag is up before that chunk's progress is shown. (Sent from the writer
    # thread, in the progress call itself, the handler waited for the main
    # thread to leave its jitted call: CI once stopped after 6 of 8 tasks.)
    put = "agentrl.data.shards:_ShardWriter.put"
    kill = {"target": put, "nth": 1, "delay": 0, "signal": "SIGINT"}
    proc = run_cli(args, tmpdir, kill=kill)
    assert proc.returncode == 130, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert lines[-2] == (
        f"agentrl data: stopped by SIGINT after 2 of 8 tasks; "
        f"nothing was written to {out}"
    )
    assert lines[-1] == "start again with: " + shlex.join(["agentrl", *args])
    assert not out.exists() and temporaries(out.parent) == []
    assert list(tmpdir.iterdir()) == []


# -- in process: the online learner, the flag, the resume command ----------------


def tiny_rl2():
    from agentrl.algos import RL2
    from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig
    from agentrl.train.experiments import online_train_config

    return ExperimentConfig(
        name="rl2-stop",
        algo=RL2(num_envs=8, rollout_steps=6, hidden=8, embed=8, trial_episodes=2),
        data=DataConfig(
            env="bernoulli_bandit",
            env_args=(("num_arms", 2), ("horizon", 6)),
            source="random",
        ),
        train=online_train_config(
            steps=6, lr=1e-3, schedule="constant", log_every=2, checkpoint_every=2
        ),
        eval=EvalConfig(num_tasks=4, num_episodes=2),
    )


@pytest.mark.long
def test_online_learner_stops_on_sigterm_and_resumes_exactly(
    tmp_path, monkeypatch, capsys
):
    import jax

    from agentrl.train import fit
    from agentrl.train.logger import RunLogger
    from agentrl.train.rundir import load_run

    config = tiny_rl2()
    fit(config, tmp_path / "a", progress=False)
    before = signal.getsignal(signal.SIGTERM)
    advance, calls = RunLogger.advance, []

    def signalling_advance(self, n=1):
        calls.append(n)
        if len(calls) == 3:  # after the third update: off the checkpoint steps
            os.kill(os.getpid(), signal.SIGTERM)
        return advance(self, n)

    monkeypatch.setattr(RunLogger, "advance", signalling_advance)
    with pytest.raises(Stopped, match="training stopped by SIGTERM at step") as info:
        fit(config, tmp_path / "b", progress=False)
    assert info.value.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) is before  # handlers restored
    step = load_run(tmp_path / "b").step
    assert 3 <= step < 6 and f"at step {step};" in str(info.value)
    monkeypatch.undo()

    capsys.readouterr()
    fit(config, tmp_path / "b", progress=False)
    assert f"resumed at step {step} from " in capsys.readouterr().out
    a, b = load_run(tmp_path / "a"), load_run(tmp_path / "b")
    assert a.step == b.step == 6
    for x, y in zip(jax.tree.leaves(a.model), jax.tree.leaves(b.model), strict=True):
        np.testing.assert_array_equal(x, y)
    assert temporaries(tmp_path / "b") == []


def test_stop_signals_record_the_first_signal_and_stop_at_once_on_the_second():
    before = signal.getsignal(signal.SIGINT)
    with stop_signals() as flag:
        assert not stop_requested()
        os.kill(os.getpid(), signal.SIGINT)  # handled here: no KeyboardInterrupt
        assert flag.signum == signal.SIGINT and stop_requested()
        with pytest.raises(Stopped, match="at once by a second SIGTERM") as info:
            os.kill(os.getpid(), signal.SIGTERM)
        assert info.value.exit_code == 143 and info.value.at_once
    assert signal.getsignal(signal.SIGINT) is before and not stop_requested()


def test_stop_signals_off_the_main_thread_install_nothing():
    handlers = []

    def work():
        with stop_signals() as flag:
            handlers.append(signal.getsignal(signal.SIGTERM))
            handlers.append(flag.signum)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert handlers == [signal.getsignal(signal.SIGTERM), None]


def test_the_resume_command_names_the_default_run_directory(
    tmp_path, monkeypatch, capsys
):
    """Without --run-dir the command adds it (absolute); --no-resume is
    dropped; a run stopped at once names the checkpoint it resumes from."""
    import agentrl.train.loop as loop
    from agentrl.cli import main

    stops = [
        Stopped(signal.SIGTERM, "training stopped by SIGTERM at step 3; ..."),
        Stopped(signal.SIGINT, "stopped at once by a second SIGINT", at_once=True),
    ]

    def stopped_fit(config, run_dir, **kwargs):
        raise stops.pop(0)

    monkeypatch.setattr(loop, "fit", stopped_fit)
    experiment = str(Path(__file__).parents[1] / "experiments" / "ad_darkroom.py")
    monkeypatch.chdir(tmp_path)
    argv = ["train", experiment, "--no-resume", "--train.steps", "5"]
    assert main(argv) == 143
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-2] == "agentrl train: training stopped by SIGTERM at step 3; ..."
    run_dir = tmp_path / "runs" / "ad_darkroom-smoke"
    resume = ["agentrl", "train", experiment, "--train.steps", "5"]
    assert lines[-1] == "resume with: " + shlex.join(
        [*resume, "--run-dir", str(run_dir)]
    )

    step = run_dir / "checkpoints" / "2"
    step.mkdir(parents=True)
    (step / "_CHECKPOINT_METADATA").write_text("{}")
    assert main([*argv, "--run-dir", "runs/ad_darkroom-smoke"]) == 130
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-2] == (
        "agentrl train: stopped at once by a second SIGINT; it resumes from "
        "the last complete checkpoint, step 2"
    )
    assert lines[-1] == "resume with: " + shlex.join(
        [*resume, "--run-dir", "runs/ad_darkroom-smoke"]
    )
