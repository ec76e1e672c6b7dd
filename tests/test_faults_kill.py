"""Fault injection: SIGKILL agentrl's commands at random (seeded) moments.

Each scenario runs the real CLI (``agentrl data generate``, ``train``,
``eval``, ``sweep``) in subprocesses that kill themselves with SIGKILL,
either at a random moment after the command's main phase began or just
inside a write (an orbax checkpoint save in flight, a rename of a finished
temporary file), chaining kills: the next run starts from what the killed
one left. After every kill the output is checked (no half dataset, no
half-written result file, the checkpoints intact, the sweep's progress
kept); a last uninterrupted run must then succeed and give exactly what an
uninterrupted run gives (the same dataset bytes, bit-identical parameters,
the same evaluation summary, the same sweep table), resuming rather than
restarting, with nothing temporary left beside the outputs or in
``TMPDIR`` (a fresh directory per scenario).

Each scenario prints ``faults[NAME]: S/T kills survived``. The fast variant
(``make test``) tries 2 kills per scenario. The long variant tries 20 per
scenario with longer runs::

    AGENTRL_FAULTS=long .venv/bin/python -m pytest tests/test_faults_kill.py -s
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from fault_tools import (
    LONG,
    Tally,
    complete_steps,
    killed,
    params_of,
    png_complete,
    read_record,
    run_cli,
    temporaries,
    tiny,
    train_args,
)

KILLS = 20 if LONG else 2
STEPS = 16 if LONG else 8
SWEEP_EVERY = 4  # steps between member checkpoints (2 steps per call)
SAVE = "agentrl.train.checkpoint:Checkpointer.save"
RESTORE = "agentrl.train.checkpoint:Checkpointer.restore"


#: the training chain's runs keep two checkpoints and log at each
CHAIN_ARGS = ("--train.keep_checkpoints", "2", "--train.log_every", "2")


def chain_kill(
    tally: Tally,
    attempt: int,
    start: str,
    duration: float,
    saves_left: int,
    saves: int,
    save_gap: float,
) -> dict:
    """The kill of a resuming chain's ``attempt``-th run.

    Odd attempts: a random moment (restore, compile, steps) of what is left
    of the run, whose ``start`` phase lasts ``duration`` uninterrupted and
    has ``saves_left`` of its ``saves`` checkpoint saves to go; even ones:
    while one of the saves left is in flight (``save_gap`` seconds apart).
    """
    if attempt % 2:
        delay = tally.rng.uniform(0, 0.8 * duration * saves_left / saves)
        return {"target": start, "nth": 1, "delay": delay}
    return {
        "target": SAVE,
        "nth": tally.rng.randint(1, max(saves_left, 1)),
        "delay": tally.rng.uniform(0, save_gap),
    }


def fresh_tmpdir(tmp_path: Path) -> Path:
    path = tmp_path / "TMPDIR"
    path.mkdir()
    return path


def phase(record: dict, target: str) -> tuple[float, list[float]]:
    """``(seconds from the first call of target to exit, call times)``."""
    times = [t for name, _, t in record["calls"] if name == target]
    return record["end"] - times[0], times


@pytest.fixture(scope="module")
def straight_run(darkroom_dataset, tmp_path_factory):
    """An uninterrupted training run, with the times of its saves."""
    root = tmp_path_factory.mktemp("straight")
    run_dir = root / "run"
    record = root / "record.json"
    proc = run_cli(
        train_args(darkroom_dataset, run_dir, STEPS, *CHAIN_ARGS),
        fresh_tmpdir(root),
        watch=["agentrl.train.loop:run_updates", SAVE],
        record=record,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir, read_record(record)


# -- dataset generation ------------------------------------------------------


def same_dataset(path: Path, reference: Path) -> bool:
    """``path`` opens, passes its full integrity check and holds the same data.

    (The same data, not the same bytes: two writes of the same arrays give
    different ArrayRecord files.)
    """
    import jax

    from agentrl.data.reader import open_dataset

    got, want = open_dataset(path, verify="full"), open_dataset(reference)
    keys = ("task_ids", "split", "num_tasks", "num_episodes", "env", "source")
    if any(got.metadata[k] != want.metadata[k] for k in keys):
        return False
    a, b = got.load_history("train"), want.load_history("train")
    return all(
        np.array_equal(x, y)
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


@pytest.mark.long
def test_kill_dataset_generation(darkroom_dataset, tmp_path):
    tally = Tally("data generate", seed=1)
    tmpdir = fresh_tmpdir(tmp_path)

    def args(out: Path) -> list[str]:
        return [
            "data",
            "generate",
            "--env",
            "darkroom",
            "--source",
            "q_learning",
            "--tasks",
            "8",
            "--episodes",
            "30",
            "--seed",
            "0",
            "--out",
            str(out),
        ]

    write = "agentrl.data.writer:write_dataset"
    record = tmp_path / "record.json"
    ref = run_cli(args(tmp_path / "ref"), tmpdir, watch=[write], record=record)
    assert ref.returncode == 0, ref.stderr[-3000:]
    duration, _ = phase(read_record(record), write)

    out = tmp_path / "data" / "darkroom_q"
    attempts, replace = 0, False
    while tally.tried < KILLS and attempts < KILLS + 4:
        attempts += 1
        # the killed run's arguments again (--overwrite if it had it), with
        # --overwrite if --out exists
        replace = replace or out.exists()
        if attempts % 2:  # a random moment of the generation
            kill = {"target": write, "nth": 1, "delay": tally.rng.uniform(0, duration)}
        else:  # just before a rename: the new dataset is complete, or the old
            # one is moved aside and the new one not yet in place
            nth = tally.rng.randint(1, 2 if replace else 1)
            kill = {"target": "pathlib:Path.rename", "nth": nth, "delay": 0.0}
        proc = run_cli(
            args(out) + (["--overwrite"] if replace else []), tmpdir, kill=kill
        )
        if not killed(proc):
            assert proc.returncode == 0, proc.stderr[-3000:]
            tally.completed_first += 1
            replace = False
            continue
        tally.tried += 1
        names = " ".join(p.name for p in temporaries(out.parent))
        tally.left[
            "the old dataset aside"
            if ".old-" in names
            else "a temporary build"
            if names
            else "a complete dataset"
            if out.exists()
            else "nothing"
        ] += 1
        # never a half dataset at --out: absent, or complete and verified
        tally.survived += (not out.exists()) or same_dataset(out, darkroom_dataset)

    # The next run with the same arguments (--overwrite if --out exists) succeeds.
    replace = replace or out.exists()
    final = run_cli(args(out) + (["--overwrite"] if replace else []), tmpdir)
    assert final.returncode == 0, final.stderr[-3000:]
    assert same_dataset(out, darkroom_dataset)  # same arguments, same data
    assert temporaries(out.parent) == [] and list(tmpdir.iterdir()) == []
    tally.report()
    assert tally.tried >= 1 and tally.survived == tally.tried


# -- training: kills during checkpoint saves ----------------------------------


@pytest.mark.long
def test_kill_training_resumes_bit_identical(darkroom_dataset, straight_run, tmp_path):
    tally = Tally("train", seed=2)
    tmpdir = fresh_tmpdir(tmp_path)
    straight, record = straight_run
    duration, _ = phase(record, "agentrl.train.loop:run_updates")
    _, saves = phase(record, SAVE)
    save_gap = float(np.mean(np.diff(saves))) if len(saves) > 1 else 0.5
    run_dir = tmp_path / "killed"
    args = train_args(darkroom_dataset, run_dir, STEPS, *CHAIN_ARGS)
    checkpoints = run_dir / "checkpoints"

    attempts, last = 0, 0
    while tally.tried < KILLS and attempts < KILLS + 4:
        attempts += 1
        left = len([s for s in range(2, STEPS + 1, 2) if s > last])
        kill = chain_kill(
            tally,
            attempts,
            "agentrl.train.loop:run_updates",
            duration,
            left,
            STEPS // 2,
            save_gap,
        )
        proc = run_cli(args, tmpdir, kill=kill)
        if not killed(proc):  # finished first: start the chain again
            assert proc.returncode == 0, proc.stderr[-3000:]
            tally.completed_first += 1
            shutil.rmtree(run_dir)
            last = 0
            continue
        tally.tried += 1
        steps = complete_steps(checkpoints)
        names = [p.name for p in checkpoints.iterdir()] if checkpoints.exists() else []
        tally.left[
            "a save in flight"
            if any("orbax-checkpoint-tmp" in n for n in names)
            else "a deletion cut short"
            if len([n for n in names if n.isdigit()]) > len(steps)
            else f"{len(steps)} checkpoints"
        ] += 1
        ok = all(
            json.loads((run_dir / name).read_text())
            for name in ("config.json", "run.json")
            if (run_dir / name).exists()
        )
        # progress is never lost: the last complete checkpoint only moves on
        ok = ok and (not steps or steps[-1] >= last)
        last = steps[-1] if steps else last
        tally.survived += ok

    # The last run resumes from the last complete checkpoint (restores it and
    # trains only the remaining steps) and ends bit-identical.
    record_path = tmp_path / "final.json"
    final = run_cli(args, tmpdir, watch=[SAVE, RESTORE], record=record_path)
    assert final.returncode == 0, final.stderr[-3000:]
    calls = read_record(record_path)["calls"]
    restored = [c for c in calls if c[0] == RESTORE]
    saved = [c for c in calls if c[0] == SAVE]
    assert len(restored) == (1 if last else 0)
    assert len(saved) == len([s for s in range(2, STEPS + 1, 2) if s > last])
    for a, b in zip(params_of(straight), params_of(run_dir), strict=True):
        np.testing.assert_array_equal(a, b)
    assert temporaries(run_dir) == [] and not (run_dir / ".lock").exists()
    assert list(tmpdir.iterdir()) == []
    tally.report()
    assert tally.tried >= 1 and tally.survived == tally.tried


# -- evaluation ----------------------------------------------------------------


def results_complete(out: Path) -> bool:
    """Every result file present is whole (a file may be absent)."""
    ok = True
    if (out / "results.json").exists():
        ok &= "summary" in json.loads((out / "results.json").read_text())
    if (out / "results.md").exists():
        ok &= "| method" in (out / "results.md").read_text()
    for png in out.glob("*.png"):
        ok &= png_complete(png)
    return ok


@pytest.mark.long
def test_kill_evaluation(straight_run, tmp_path):
    tally = Tally("eval", seed=3)
    tmpdir = fresh_tmpdir(tmp_path)
    run_dir, _ = straight_run
    evaluate = "agentrl.evaluate.run:evaluate_run"
    replace = "pathlib:Path.replace"

    def args(out: Path) -> list[str]:
        return ["eval", str(run_dir), "--out", str(out)]

    record = tmp_path / "record.json"
    ref = run_cli(
        args(tmp_path / "ref"), tmpdir, watch=[evaluate, replace], record=record
    )
    assert ref.returncode == 0, ref.stderr[-3000:]
    rec = read_record(record)
    duration, _ = phase(rec, evaluate)
    writes = len([c for c in rec["calls"] if c[0] == replace])
    assert writes >= 3  # results.json, results.md, improvement.png

    out = tmp_path / "eval"
    attempts, pending = 0, set()
    while tally.tried < KILLS and attempts < KILLS + 4:
        attempts += 1
        if attempts % 2:
            kill = {
                "target": evaluate,
                "nth": 1,
                "delay": tally.rng.uniform(0, duration),
            }
        else:  # a result file written to its temporary name, not yet renamed
            kill = {"target": replace, "nth": tally.rng.randint(1, writes), "delay": 0}
        proc = run_cli(args(out), tmpdir, kill=kill)
        if not killed(proc):
            assert proc.returncode == 0, proc.stderr[-3000:]
            tally.completed_first += 1
            continue
        tally.tried += 1
        now = set(temporaries(out)) if out.exists() else set()
        written = len(list(out.glob("*.*"))) - len(now)
        new_pending = now - pending
        pending = now
        tally.left["a file not yet renamed" if new_pending else f"{written} files"] += 1
        tally.survived += results_complete(out)

    final = run_cli(args(out), tmpdir)
    assert final.returncode == 0, final.stderr[-3000:]
    assert results_complete(out)
    got = json.loads((out / "results.json").read_text())["summary"]
    assert got == json.loads((tmp_path / "ref" / "results.json").read_text())["summary"]
    assert temporaries(out) == [] and list(tmpdir.iterdir()) == []
    tally.report()
    assert tally.tried >= 1 and tally.survived == tally.tried


# -- sweeps --------------------------------------------------------------------


def sweep_args(dataset: Path, out: Path) -> list[str]:
    return [
        "sweep",
        "ad_darkroom",
        "--preset",
        "smoke",
        "--seeds",
        "2",
        "--grid",
        "model.num_layers=1,2",
        "--out",
        str(out),
        "--steps-per-call",
        "2",
        "--no-progress",
        *tiny(dataset),
        "--train.steps",
        str(STEPS),
        "--train.checkpoint_every",
        str(SWEEP_EVERY),
    ]


def sweep_progress(out: Path) -> tuple[int, int]:
    """``(complete static settings, latest member checkpoint step)``."""
    settings = out / "settings"
    if not settings.is_dir():
        return 0, 0
    done = len(list(settings.glob("*.json")))
    steps = [s for d in settings.glob("*.ckpt") for s in complete_steps(d)]
    return done, max(steps, default=0)


@pytest.mark.long
def test_kill_sweep_resumes(darkroom_dataset, tmp_path):
    tally = Tally("sweep", seed=4)
    tmpdir = fresh_tmpdir(tmp_path)
    start = "agentrl.sweep.run:run_sweep"
    record = tmp_path / "record.json"
    ref = run_cli(
        sweep_args(darkroom_dataset, tmp_path / "ref"),
        tmpdir,
        watch=[start, SAVE],
        record=record,
    )
    assert ref.returncode == 0, ref.stderr[-3000:]
    rec = read_record(record)
    duration, _ = phase(rec, start)
    _, saves = phase(rec, SAVE)
    total_saves = len(saves)  # 2 settings x STEPS / SWEEP_EVERY
    save_gap = float(np.mean(np.diff(saves)))

    out = tmp_path / "sweep"
    args = sweep_args(darkroom_dataset, out)
    attempts, progress = 0, (0, 0)
    while tally.tried < KILLS and attempts < KILLS + 4:
        attempts += 1
        done_saves = progress[0] * total_saves // 2 + progress[1] // SWEEP_EVERY
        left = total_saves - done_saves
        kill = chain_kill(tally, attempts, start, duration, left, total_saves, save_gap)
        proc = run_cli(args, tmpdir, kill=kill)
        if not killed(proc):  # finished first: start the chain again
            assert proc.returncode == 0, proc.stderr[-3000:]
            tally.completed_first += 1
            shutil.rmtree(out)
            progress = (0, 0)
            continue
        tally.tried += 1
        now = sweep_progress(out)
        in_flight = any(
            "orbax-checkpoint-tmp" in p.name for p in out.glob("settings/*.ckpt/*")
        )
        tally.left[
            "a member save in flight"
            if in_flight
            else f"{now[0]} settings done, members at step {now[1]}"
        ] += 1
        tally.survived += now >= progress  # nothing done is lost
        progress = now

    final = run_cli(args, tmpdir)
    assert final.returncode == 0, final.stderr[-3000:]
    got = json.loads((out / "results.json").read_text())
    want = json.loads((tmp_path / "ref" / "results.json").read_text())
    assert got["rows"] == want["rows"] and got["curves"] == want["curves"]
    # It resumed: what was complete is read back, what was checkpointed goes on.
    resumed = [t.get("resumed") for t in got["timings"]]
    assert resumed[: progress[0]] == ["complete"] * progress[0]
    if progress[1] and progress[0] < len(resumed):
        assert resumed[progress[0]] == f"from step {progress[1]}"
    assert list(out.glob("settings/*.ckpt")) == []
    assert temporaries(out) == [] and not (out / ".lock").exists()
    assert list(tmpdir.iterdir()) == []
    tally.report()
    assert tally.tried >= 1 and tally.survived == tally.tried
