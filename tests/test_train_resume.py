"""Exact resume after SIGKILL, non-finite loss handling, run directory."""

import dataclasses
import json
import shutil
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from flax import nnx

from agentrl import configtools
from agentrl.train.experiments import load_experiment
from agentrl.train.loop import fit
from agentrl.train.rundir import load_model, load_run
from agentrl.train.runner import NonFiniteLossError


def _config(dataset, **train):
    config = load_experiment("ad_darkroom", "smoke")
    config = dataclasses.replace(
        config,
        data=dataclasses.replace(config.data, path=str(dataset)),
        train=dataclasses.replace(
            config.train, steps=40, checkpoint_every=5, log_every=5, **train
        ),
    )
    return config


def _params(run_dir):
    model, _ = load_model(run_dir)
    return jax.tree.leaves(nnx.state(model, nnx.Param))


KILL_SCRIPT = textwrap.dedent(
    """
    import json, os, signal, sys
    from agentrl import configtools
    from agentrl.train import loop
    from agentrl.train.config import ExperimentConfig
    from agentrl.train.logger import RunLogger

    config = configtools.from_dict(ExperimentConfig, json.loads(sys.argv[1]))
    calls = {"n": 0}
    original = RunLogger.advance

    def advance(self, n=1):
        original(self, n)
        calls["n"] += n  # updates: calls of up to 5 end at the log steps
        if calls["n"] >= 23:  # mid-way: the call to 25 ran, checkpoint 20 started
            os.kill(os.getpid(), signal.SIGKILL)

    RunLogger.advance = advance
    loop.fit(config, sys.argv[2], progress=False)
    """
)


@pytest.mark.long
def test_sigkill_then_resume_gives_identical_parameters(darkroom_dataset, tmp_path):
    config = _config(darkroom_dataset)
    straight = fit(config, tmp_path / "straight", progress=False)

    killed_dir = tmp_path / "killed"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            KILL_SCRIPT,
            json.dumps(configtools.to_dict(config)),
            str(killed_dir),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == -9, proc.stderr[-2000:]
    steps = sorted(
        int(p.name) for p in (killed_dir / "checkpoints").iterdir() if p.name.isdigit()
    )
    assert steps and max(steps) <= 20 and 40 not in steps

    resumed = fit(config, killed_dir, progress=False)
    for a, b in zip(_params(straight), _params(resumed), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # The run directory holds what evaluation needs.
    for name in ["config.json", "run.json", "metrics.jsonl"]:
        assert (resumed / name).is_file()
    run = json.loads((resumed / "run.json").read_text())
    split = run["split"]  # Dark Room 9x9: 65 train, 8 validation, 8 test goals
    assert run["env"] == "darkroom" and len(split["train"]) == 65
    assert len(split["validation"]) == 8 and len(split["test"]) == 8


@pytest.mark.long
def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(
    darkroom_dataset, tmp_path
):
    config = _config(
        darkroom_dataset, lr=1e30, warmup_steps=0, schedule="constant", grad_clip=1e30
    )
    with pytest.raises(NonFiniteLossError, match="non-finite loss"):
        fit(config, tmp_path / "nan", progress=False)
    saved = [
        p.name for p in (tmp_path / "nan" / "checkpoints").iterdir() if p.name.isdigit()
    ]
    for step in saved:  # whatever was saved before the blow-up is finite
        model, _ = load_model(tmp_path / "nan", int(step))
        leaves = jax.tree.leaves(nnx.state(model, nnx.Param))
        assert all(np.isfinite(np.asarray(x)).all() for x in leaves)


@pytest.mark.long
def test_a_run_that_failed_before_its_first_checkpoint_starts_again(
    darkroom_dataset, tmp_path
):
    """Its config and log were written before training; once, neither a
    resume under a mended config nor a fresh run was allowed into it."""
    bad = _config(darkroom_dataset, lr=1e30, warmup_steps=0, grad_clip=1e30)
    bad = dataclasses.replace(
        bad, train=dataclasses.replace(bad.train, checkpoint_every=20)
    )
    run_dir = tmp_path / "run"
    with pytest.raises(NonFiniteLossError, match="no checkpoint was written"):
        fit(bad, run_dir, progress=False)
    assert (run_dir / "config.json").is_file()
    good = _config(darkroom_dataset)
    for resume in (True, False):
        fit(good, run_dir, progress=False, resume=resume, stop_at_step=10)
        steps = [json.loads(line)["step"] for line in open(run_dir / "metrics.jsonl")]
        assert steps == [5, 10] and load_run(run_dir).config.train.lr == good.train.lr
        if resume:  # the fresh run below needs a run without checkpoints
            shutil.rmtree(run_dir / "checkpoints")


@pytest.mark.long
def test_an_update_whose_gradients_overflow_is_not_checkpointed(
    darkroom_dataset, tmp_path
):
    """Gradients that overflow leave NaN weights behind a finite loss (the
    loss is computed before the update): the checkpoint of that step once
    held them, and a resume failed at once. The call's updates now report
    whether they stayed finite."""
    config = _config(darkroom_dataset, lr=1e5, warmup_steps=0, keep_checkpoints=50)
    config = dataclasses.replace(
        config,
        train=dataclasses.replace(config.train, checkpoint_every=1, log_every=1),
    )
    with pytest.raises(NonFiniteLossError, match="non-finite loss or gradients"):
        fit(config, tmp_path / "nan", progress=False)
    saved = sorted(
        int(p.name)
        for p in (tmp_path / "nan" / "checkpoints").iterdir()
        if p.name.isdigit()
    )
    assert saved  # some updates went well first
    model, _ = load_model(tmp_path / "nan", saved[-1])
    leaves = jax.tree.leaves(nnx.state(model, nnx.Param))
    assert all(np.isfinite(np.asarray(x)).all() for x in leaves)


@pytest.mark.long
def test_resume_refuses_a_different_config(darkroom_dataset, tmp_path):
    config = _config(darkroom_dataset)
    run_dir = fit(config, tmp_path / "run", progress=False, stop_at_step=5)
    changed = dataclasses.replace(
        config, train=dataclasses.replace(config.train, lr=config.train.lr * 2)
    )
    with pytest.raises(ValueError, match=r"another config \(train\.lr: "):
        fit(changed, run_dir, progress=False)
    # how long it trains, how it logs and the evaluation may change
    longer = dataclasses.replace(
        config,
        train=dataclasses.replace(config.train, steps=45, log_every=3),
        eval=dataclasses.replace(config.eval, num_episodes=3),
    )
    assert fit(longer, run_dir, progress=False, stop_at_step=5) == run_dir


def test_resume_allows_the_model_computing_the_same_function_differently(
    darkroom_dataset, tmp_path
):
    from agentrl.train.rundir import load_run, resumable_config

    run_dir = fit(
        _config(darkroom_dataset), tmp_path / "r", progress=False, stop_at_step=5
    )
    config = load_run(run_dir).config  # completed as saved (model sizes filled)
    model = config.model
    # implementations tested equal in outputs and gradients may change
    same_function = dataclasses.replace(
        model,
        moe_dispatch="sorted" if model.moe_dispatch != "sorted" else "blocked",
        attention="reference" if model.attention != "reference" else "blockwise",
        remat=not model.remat,
    )
    resumable_config(run_dir, dataclasses.replace(config, model=same_function))
    # a field whose name starts like an allowed one is still compared
    sink = dataclasses.replace(model, attention_sink=not model.attention_sink)
    with pytest.raises(ValueError, match=r"model\.attention_sink: "):
        resumable_config(run_dir, dataclasses.replace(config, model=sink))


@pytest.mark.long
def test_a_run_resumed_for_more_steps_keeps_its_learning_rate_schedule(
    darkroom_dataset, tmp_path
):
    """40 steps, then resumed to 80: the cosine laid over 40 goes on (its
    end value beyond), recorded as ``train.schedule_steps``; once a new
    cosine over 80 restarted it mid-run (0.1 -> 0.63 of the peak here)."""
    from agentrl.schedule import schedule_shape
    from agentrl.train.rundir import load_run

    config = _config(darkroom_dataset)
    run_dir = fit(config, tmp_path / "run", progress=False)
    longer = dataclasses.replace(
        config, train=dataclasses.replace(config.train, steps=80)
    )
    fit(longer, run_dir, progress=False, stop_at_step=45)
    resumed = load_run(run_dir).config.train
    assert (resumed.steps, resumed.schedule_steps) == (80, 40)
    first, kept = schedule_shape(config.train), schedule_shape(resumed)
    fresh = schedule_shape(longer.train)
    for step in (0, 3, 20, 39, 40, 60):
        assert float(kept(step)) == pytest.approx(float(first(step)))
    assert float(kept(60)) == pytest.approx(config.train.cosine_end)
    assert float(fresh(40)) > 0.5  # what a new cosine would have done
    # resumed again, longer still: the same schedule; another one is refused
    longest = dataclasses.replace(
        config, train=dataclasses.replace(config.train, steps=90)
    )
    fit(longest, run_dir, progress=False, stop_at_step=50)
    assert load_run(run_dir).config.train.schedule_steps == 40
    # stopped, then the same command again: it goes on (it was refused, the
    # saved schedule 40 read against an unset one, i.e. 90)
    fit(longest, run_dir, progress=False, stop_at_step=55)
    assert load_run(run_dir).step == 55
    assert load_run(run_dir).config.train.schedule_steps == 40
    other = dataclasses.replace(longest.train, schedule_steps=90)
    with pytest.raises(ValueError, match=r"train\.schedule_steps: 40 -> 90"):
        fit(dataclasses.replace(config, train=other), run_dir, progress=False)


def test_training_afresh_into_a_run_directory_that_holds_a_run_is_refused(
    darkroom_dataset, tmp_path
):
    """``--no-resume`` into a finished run once kept its checkpoints (orbax
    skips saves at steps it already has), dataset and log, under the new
    config: refused before anything is written, the run untouched."""
    config = _config(darkroom_dataset)
    run_dir = fit(config, tmp_path / "run", progress=False, stop_at_step=10)
    before = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    log = (run_dir / "metrics.jsonl").read_text()
    with pytest.raises(ValueError, match=r"holds a run \(checkpoints, "):
        fit(config, run_dir, resume=False, progress=False)
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == before
    assert (run_dir / "metrics.jsonl").read_text() == log
    fresh = fit(config, tmp_path / "new", resume=False, progress=False, stop_at_step=5)
    assert (fresh / "checkpoints").is_dir()


@pytest.mark.long
def test_a_run_resumes_on_its_dataset_moved_but_not_on_other_histories(
    darkroom_dataset, tmp_path
):
    """``data.path`` may move between a run's stops (a resumable field), but
    a resume on other histories is refused, naming both dataset digests:
    here the same settings in chunks of 4 tasks (other keys, other
    histories), which no config field records; before, only their
    environment was compared."""
    from agentrl import envs
    from agentrl.data import write_dataset
    from agentrl.sources import source_histories

    config = _config(darkroom_dataset)
    run_dir = fit(config, tmp_path / "run", progress=False, stop_at_step=5)
    moved = shutil.copytree(darkroom_dataset, tmp_path / "moved")
    at_moved = configtools.override(config, {"data.path": str(moved)})
    assert fit(at_moved, run_dir, progress=False, stop_at_step=10) == run_dir
    env = envs.make("darkroom")
    other = tmp_path / "other"
    source = source_histories("q_learning", env)
    write_dataset(other, env, source, 8, 30, seed=0, chunk_size=4)
    at_other = configtools.override(config, {"data.path": str(other)})
    with pytest.raises(ValueError, match="holds other histories than run_dir"):
        fit(at_other, run_dir, progress=False)


def _saved_run(run_dir, config, step):
    """``(run_dir, completed config)``: a run directory as ``fit`` leaves it
    at checkpoint ``step`` (config.json, run.json, a checkpoint recording
    its config), written without training."""
    from agentrl import envs
    from agentrl.data import open_dataset
    from agentrl.train.checkpoint import Checkpointer
    from agentrl.train.config import complete_config
    from agentrl.train.rundir import write_run_files

    dataset = open_dataset(config.data.path)
    full = complete_config(config, envs.make(config.data.env), dataset)
    run_dir.mkdir(parents=True)
    write_run_files(run_dir, full, dataset)
    ckpt = Checkpointer(run_dir / "checkpoints", full.train.checkpoint_every)
    ckpt.save(step, {"x": np.zeros(1)}, {"config": configtools.to_dict(full)})
    ckpt.close()
    return run_dir, full


def test_a_resume_for_fewer_steps_than_its_checkpoint_is_refused(
    darkroom_dataset, tmp_path
):
    """``train.steps`` below the latest checkpoint's step was accepted: no
    update ran and config.json then said fewer steps than the model had."""
    from agentrl.train.rundir import resumable_config

    config = _config(darkroom_dataset)  # 40 steps
    run_dir, full = _saved_run(tmp_path / "run", config, step=15)
    saved = (run_dir / "config.json").read_text()

    def steps(n):
        return configtools.override(config, {"train.steps": n})

    refused = r"train\.steps 10 is below .*checkpoint, 15.*steps >= 15"
    with pytest.raises(ValueError, match=refused):
        resumable_config(run_dir, configtools.override(full, {"train.steps": 10}))
    with pytest.raises(ValueError, match=refused):
        fit(steps(10), run_dir, progress=False)
    assert (run_dir / "config.json").read_text() == saved  # nothing written
    for n in (15, 20, 60):  # the checkpoint's step or more: allowed
        resumed = resumable_config(
            run_dir, configtools.override(full, {"train.steps": n})
        )
        assert resumed.train.steps == n


def test_a_run_without_its_config_json_is_compared_with_its_checkpoint(
    darkroom_dataset, tmp_path
):
    """With config.json gone, a resume under another config (learning rate,
    seed) was accepted unchecked; every checkpoint records the config."""
    from agentrl.train.rundir import resumable_config

    config = _config(darkroom_dataset)
    run_dir, full = _saved_run(tmp_path / "run", config, step=10)
    (run_dir / "config.json").unlink()
    other = configtools.override(config, {"train.lr": 0.05, "train.seed": 9})
    with pytest.raises(ValueError, match="config.json is missing: compared with"):
        resumable_config(run_dir, other)
    with pytest.raises(ValueError, match=r"train\.lr: 0\.001 -> 0\.05; train\.seed"):
        fit(other, run_dir, progress=False)
    assert not (run_dir / "config.json").exists()  # refused before writing it
    assert resumable_config(run_dir, full) == full  # its own config resumes
    with pytest.raises(ValueError, match=r"train\.steps 5 is below"):
        resumable_config(run_dir, configtools.override(full, {"train.steps": 5}))
