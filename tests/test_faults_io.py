"""Faults other than kills: a second writer, a full disk, an unwritable
directory, and temporaries left behind.

- Two processes training into one run directory: the second refuses with a
  message naming the directory and the holder's pid; once the holder is
  killed, its stale lock is taken over.
- ``OSError(ENOSPC)`` injected into the write paths (TFDS's ArrayRecord
  writer, orbax's checkpoint writer) and read-only directories (a real
  ``EACCES``; as root, the command runs without CAP_DAC_OVERRIDE): a clear
  error naming the path, the previous dataset or checkpoint intact.
- TFDS's ``tmp*tfds`` directory no longer lands in the system temporary
  directory, and no ``*.tmp``/temporary sibling is left beside an output.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import jax
import numpy as np
import pytest
from fault_tools import (
    run_cli,
    start_cli,
    temporaries,
    train_args,
    unprivileged_prefix,
    wait_for,
)
from flax import nnx

from agentrl import configtools, envs
from agentrl.safeio import DirectoryLock, DirectoryLockedError, StorageError

SAVE = "agentrl.train.checkpoint:Checkpointer.save"


@pytest.fixture
def fresh_tempdir(tmp_path, monkeypatch):
    """The system temporary directory of this process, empty at the start."""
    path = tmp_path / "TMPDIR"
    path.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    return path


def generate(out: Path, seed: int = 0, overwrite: bool = False) -> Path:
    from agentrl.data import write_dataset
    from agentrl.sources import source_histories

    env = envs.make("darkroom")
    return write_dataset(
        out,
        env,
        source_histories("q_learning", env),
        num_tasks=8,
        num_episodes=30,
        seed=seed,
        env_name="darkroom",
        overwrite=overwrite,
    )


def files_of(path: Path) -> dict:
    """The dataset's recorded files, after its full integrity check."""
    from agentrl.data.reader import open_dataset

    return open_dataset(path, verify="full").metadata["files"]


def checkpoint_steps(run_dir: Path) -> list[int]:
    path = run_dir / "checkpoints"
    return sorted(int(p.name) for p in path.iterdir() if p.name.isdigit())


def one_line_error(proc) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [x for x in proc.stderr.splitlines() if "error:" in x]
    assert len(lines) == 1, proc.stderr[-3000:]
    return lines[0]


# -- one writer per run directory ------------------------------------------


def test_lock_semantics(tmp_path):
    first = DirectoryLock(tmp_path / "run", "run directory").acquire()
    lock_file = tmp_path / "run" / ".lock"
    assert lock_file.read_text().split()[0] == str(os.getpid())
    with pytest.raises(DirectoryLockedError, match=rf"{tmp_path / 'run'}.*pid "):
        DirectoryLock(tmp_path / "run").acquire()
    first.release()
    assert not lock_file.exists()
    # a lock file left by a dead process is no lock
    lock_file.write_text("999999999 otherhost 2020-01-01T00:00:00+00:00\n")
    with DirectoryLock(tmp_path / "run"):
        assert lock_file.read_text().split()[0] == str(os.getpid())
    assert not lock_file.exists()


@pytest.mark.long
def test_second_trainer_refuses_then_takes_over_stale_lock(darkroom_dataset, tmp_path):
    tmpdir = tmp_path / "TMPDIR"
    tmpdir.mkdir()
    run_dir = tmp_path / "run"
    args = train_args(darkroom_dataset, run_dir, 6)
    held = tmp_path / "held"
    holder = start_cli(
        args, tmpdir, kill={"target": SAVE, "nth": 2, "delay": 0, "hold": str(held)}
    )
    try:
        wait_for(held, holder)  # the holder is inside its second save
        config_before = (run_dir / "config.json").stat().st_mtime_ns
        metrics_before = (run_dir / "metrics.jsonl").read_text()
        second = run_cli(args, tmpdir)
        assert second.returncode == 2
        line = one_line_error(second)
        assert str(run_dir) in line and f"pid {holder.pid}" in line, line
        assert "in use" in line
        # it wrote nothing: no checkpoint past the holder's first, same files
        names = {p.name for p in (run_dir / "checkpoints").iterdir()}
        assert names <= {"2", "2.orbax-checkpoint-tmp"}, names
        assert (run_dir / "config.json").stat().st_mtime_ns == config_before
        assert (run_dir / "metrics.jsonl").read_text() == metrics_before
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate(timeout=60)
    assert (run_dir / ".lock").exists()  # stale: its holder is dead
    third = run_cli(args, tmpdir)
    assert third.returncode == 0, third.stderr[-3000:]
    assert checkpoint_steps(run_dir)[-1] == 6
    assert not (run_dir / ".lock").exists() and temporaries(run_dir) == []
    assert list(tmpdir.iterdir()) == []


# -- datasets: a full disk, an unwritable directory --------------------------


def _array_record_message(path: Path) -> str:
    """What array_record raises on a full disk (a RuntimeError, not an OSError)."""
    return (
        'Failed to finalize writing of split "train": write() failed: No space '
        f"left on device; writing {path}; at byte 102400; Failed to close "
        "chunk_writer"
    )


@pytest.mark.long
@pytest.mark.parametrize("shape", ["oserror", "array_record"])
def test_dataset_full_disk_keeps_previous(
    darkroom_dataset, tmp_path, fresh_tempdir, monkeypatch, shape
):
    from array_record.python import array_record_module

    out = tmp_path / "data" / "d"
    shutil.copytree(darkroom_dataset, out)
    before = files_of(out)

    class FullDisk:
        """array_record's writer on a disk that is full once data arrives."""

        def __init__(self, path, options):
            self.path = path
            open(path, "wb").close()

        def write(self, record):
            if shape == "oserror":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.path)
            raise RuntimeError(_array_record_message(Path(self.path)))

        def close(self):
            pass

    monkeypatch.setattr(array_record_module, "ArrayRecordWriter", FullDisk)
    with pytest.raises(StorageError, match="no space left on device") as info:
        generate(out, seed=1, overwrite=True)
    assert info.value.errno == errno.ENOSPC
    assert str(out) in str(info.value) and "existing dataset is unchanged" in str(
        info.value
    )
    assert files_of(out) == before  # the previous dataset, intact
    with pytest.raises(StorageError, match="no space left on device"):
        generate(tmp_path / "data" / "new")
    assert not (tmp_path / "data" / "new").exists()
    assert temporaries(tmp_path / "data") == []
    assert list(fresh_tempdir.iterdir()) == []


def test_dataset_killed_mid_overwrite_is_put_back(darkroom_dataset, tmp_path):
    from agentrl.safeio import temp_sibling

    out = tmp_path / "d"
    dead = subprocess.Popen(["true"])
    dead.wait()
    # what a writer killed between its two renames leaves: the old dataset
    # aside, its complete new build in its temporary directory, no `out`
    aside = temp_sibling(out, "old")
    aside = aside.with_name(aside.name.replace(f"-{os.getpid()}-", f"-{dead.pid}-"))
    shutil.copytree(darkroom_dataset, aside)
    build = Path(str(aside).replace(".old-", ".tmp-"))
    shutil.copytree(darkroom_dataset, build / "agentrl_history" / "1.0.0")
    with pytest.raises(ValueError, match="put back: a killed overwrite"):
        generate(out)  # refused before anything compiles
    assert files_of(out) == files_of(darkroom_dataset)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


def test_dataset_write_leaves_nothing_in_system_tempdir(tmp_path, fresh_tempdir):
    generate(tmp_path / "d")
    generate(tmp_path / "d", seed=1, overwrite=True)
    assert list(fresh_tempdir.iterdir()) == []  # TFDS made tmp*tfds here before
    assert temporaries(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["TMPDIR", "d"]


@pytest.mark.long
def test_dataset_read_only_directory(darkroom_dataset, tmp_path):
    prefix = unprivileged_prefix()
    if prefix is None:
        pytest.skip("running as root without setpriv: permissions are not enforced")
    tmpdir = tmp_path / "TMPDIR"
    tmpdir.mkdir()
    parent = tmp_path / "ro"
    shutil.copytree(darkroom_dataset, parent / "d")
    before = files_of(parent / "d")
    gen = ["data", "generate", "--env", "darkroom", "--source", "q_learning"]
    gen += ["--tasks", "8", "--episodes", "30"]
    parent.chmod(0o555)
    try:
        over = run_cli(
            [*gen, "--out", parent / "d", "--overwrite"], tmpdir, prefix=prefix
        )
        new = run_cli([*gen, "--out", parent / "new"], tmpdir, prefix=prefix)
    finally:
        parent.chmod(0o755)
    assert over.returncode == 1, over.stderr[-3000:]
    line = one_line_error(over)
    assert f"cannot write the dataset {parent / 'd'}: permission denied" in line
    assert "existing dataset is unchanged" in line
    assert files_of(parent / "d") == before
    assert new.returncode == 1
    assert "permission denied" in one_line_error(new)
    assert sorted(p.name for p in parent.iterdir()) == ["d"]
    assert list(tmpdir.iterdir()) == []


# -- checkpoints: leftovers, a full disk, an unwritable directory --------------


def test_remove_incomplete_checkpoints(tmp_path):
    from agentrl.safeio import temp_sibling
    from agentrl.train.checkpoint import complete_steps, remove_incomplete_checkpoints

    ckpts = tmp_path / "checkpoints"
    for step in (2, 4, 6):  # complete: orbax writes the metadata before renaming
        (ckpts / str(step) / "state").mkdir(parents=True)
        (ckpts / str(step) / "_CHECKPOINT_METADATA").write_text("{}")
    (ckpts / "3" / "state").mkdir(parents=True)  # deletion cut short
    (ckpts / "8.orbax-checkpoint-tmp" / "state").mkdir(parents=True)  # save cut short
    dead = subprocess.Popen(["true"])  # a pid whose process has ended
    dead.wait()
    probe = temp_sibling(ckpts / "probe")  # left by a killed _check_writable
    probe.with_name(probe.name.replace(f"-{os.getpid()}-", f"-{dead.pid}-")).mkdir()
    removed = remove_incomplete_checkpoints(ckpts)
    assert sorted(p.name for p in ckpts.iterdir()) == ["2", "4", "6"]
    assert len(removed) == 3 and complete_steps(ckpts) == [2, 4, 6]
    # the latest step is never touched, complete or not
    (ckpts / "9").mkdir()
    remove_incomplete_checkpoints(ckpts)
    assert (ckpts / "9").is_dir() and complete_steps(ckpts) == [2, 4, 6]


def params_of(run_dir: Path) -> tuple[int, list[np.ndarray]]:
    from agentrl.train.rundir import load_run

    run = load_run(run_dir)
    leaves = jax.tree.leaves(nnx.state(run.model, nnx.Param))
    return run.step, [np.asarray(x) for x in leaves]


@pytest.mark.long
def test_checkpoint_full_disk_and_read_only_keep_last(
    tiny_ad_config, darkroom_dataset, tmp_path, monkeypatch
):
    from orbax.checkpoint._src.handlers import json_checkpoint_handler

    from agentrl.train.loop import fit

    config = configtools.override(
        tiny_ad_config(steps=8), {"train.checkpoint_every": 2, "train.log_every": 2}
    )
    run_dir = tmp_path / "run"
    fit(config, run_dir, progress=False, stop_at_step=4)
    step, params = params_of(run_dir)
    assert step == 4 and checkpoint_steps(run_dir) == [2, 4]

    async def full(self, x, directory):  # orbax's JSON write, in its save thread
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(directory))

    monkeypatch.setattr(json_checkpoint_handler.JsonCheckpointHandler, "_save_fn", full)
    with pytest.raises(StorageError) as info:
        fit(config, run_dir, progress=False)
    message = str(info.value)
    assert f"cannot write the training run {run_dir}: no space left on device" in (
        message
    )
    assert "the last complete checkpoint, step 4, is intact" in message
    monkeypatch.undo()
    assert checkpoint_steps(run_dir) == [2, 4]
    assert temporaries(run_dir) == [] and not (run_dir / ".lock").exists()
    step_after, params_after = params_of(run_dir)
    assert step_after == 4
    for a, b in zip(params, params_after, strict=True):
        np.testing.assert_array_equal(a, b)
    json.loads((run_dir / "config.json").read_text())  # not truncated

    # The same run with its checkpoint directory read-only: a real EACCES.
    prefix = unprivileged_prefix()
    if prefix is None:
        pytest.skip("running as root without setpriv: permissions are not enforced")
    tmpdir = tmp_path / "TMPDIR"
    tmpdir.mkdir()
    # logs at every checkpoint (the eval sizes come with train_args)
    args = train_args(darkroom_dataset, run_dir, 8, "--train.log_every", "2")
    (run_dir / "checkpoints").chmod(0o555)
    try:
        proc = run_cli(args, tmpdir, prefix=prefix)
    finally:
        (run_dir / "checkpoints").chmod(0o755)
    assert proc.returncode == 1, proc.stderr[-3000:]
    line = one_line_error(proc)
    assert f"cannot write the training run {run_dir}: permission denied" in line
    assert "the last complete checkpoint, step 4, is intact" in line
    assert checkpoint_steps(run_dir) == [2, 4] and temporaries(run_dir) == []
    assert list(tmpdir.iterdir()) == []
    # and once it can write again, the run resumes from step 4 to the end
    fit(config, run_dir, progress=False)
    assert checkpoint_steps(run_dir)[-1] == 8
