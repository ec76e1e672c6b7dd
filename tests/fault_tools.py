"""Helpers of the fault-injection tests: run agentrl's CLI in a subprocess that
SIGKILLs itself at a chosen moment, and check what it left on disk.

A kill is ``{"target": "module:attr", "nth": n, "delay": s}``: the subprocess
wraps ``attr`` of ``module`` (a function or a method, ``Class.method``) and,
at its ``n``-th call, kills itself with SIGKILL after ``delay`` seconds
(immediately, before the call runs, when ``delay`` is 0); with ``"signal":
NAME`` (``"SIGTERM"``, ``"SIGINT"``) it sends itself that signal instead
and runs on; with ``"hold":
PATH`` it instead creates ``PATH`` there and sleeps, for the test to act
while the command is half way (and kill it). With ``record`` it
instead writes, at exit, the times of every call of the ``watch`` targets,
so a test learns how long each phase of an uninterrupted run takes.
"""

from __future__ import annotations

import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

#: ``AGENTRL_FAULTS=long`` runs the long variant (more kills per scenario).
LONG = os.environ.get("AGENTRL_FAULTS", "").strip().lower() == "long"

RUNNER = textwrap.dedent(
    """
    import atexit, importlib, json, os, signal, sys, threading, time

    spec = json.loads(os.environ["AGENTRL_FAULT_SPEC"])
    start = time.monotonic()
    calls = []

    def kill(signum=signal.SIGKILL):
        os.kill(os.getpid(), signum)

    def wrap(target, kill_at):
        module, attr = target.split(":")
        owner = importlib.import_module(module)
        *parents, name = attr.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        original = getattr(owner, name)
        count = [0]

        def wrapper(*args, **kwargs):
            count[0] += 1
            calls.append((target, count[0], time.monotonic() - start))
            if kill_at is not None and count[0] == kill_at["nth"]:
                if kill_at.get("hold"):  # say so, then wait to be killed
                    open(kill_at["hold"], "w").close()
                    time.sleep(600)
                signum = getattr(signal, kill_at.get("signal", "SIGKILL"))
                if kill_at["delay"] <= 0:
                    kill(signum)  # SIGKILL never returns; a stop signal does
                else:
                    timer = threading.Timer(kill_at["delay"], kill, (signum,))
                    timer.daemon = True
                    timer.start()
            return original(*args, **kwargs)

        setattr(owner, name, wrapper)

    kill_spec = spec.get("kill")
    for target in spec.get("watch", []):
        hit = kill_spec if kill_spec and kill_spec["target"] == target else None
        wrap(target, hit)
    if kill_spec and kill_spec["target"] not in spec.get("watch", []):
        wrap(kill_spec["target"], kill_spec)
    if spec.get("record"):
        def record():
            end = time.monotonic() - start
            with open(spec["record"], "w") as f:
                json.dump({"calls": calls, "end": end}, f)
        atexit.register(record)

    from agentrl.cli import main

    sys.exit(main(sys.argv[1:]))
    """
)


def _env(tmpdir: Path, spec: dict) -> dict[str, str]:
    return {
        **os.environ,
        "TMPDIR": str(tmpdir),
        "AGENTRL_FAULT_SPEC": json.dumps(spec),
        # many short runs of the same small programs: cache every compile
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    }


def run_cli(
    args: list[str],
    tmpdir: Path,
    *,
    kill: dict | None = None,
    watch: list[str] = (),
    record: Path | None = None,
    prefix: list[str] = (),
    timeout: float = 600,
) -> subprocess.CompletedProcess:
    """``agentrl ARGS`` in a fresh process with ``TMPDIR=tmpdir``."""
    spec = {"kill": kill, "watch": list(watch), "record": str(record or "")}
    return subprocess.run(
        [*prefix, sys.executable, "-c", RUNNER, *map(str, args)],
        env=_env(tmpdir, spec),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_cli(args: list[str], tmpdir: Path, *, kill: dict) -> subprocess.Popen:
    """:func:`run_cli` without waiting (e.g. with a ``hold`` kill)."""
    return subprocess.Popen(
        [sys.executable, "-c", RUNNER, *map(str, args)],
        env=_env(tmpdir, {"kill": kill, "watch": [], "record": ""}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 300) -> None:
    """Wait until ``path`` exists (``proc`` must still be running)."""
    deadline = time.monotonic() + timeout
    while not Path(path).exists():
        if proc.poll() is not None:
            raise AssertionError(f"exited with {proc.returncode}: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{path} did not appear in {timeout} s")
        time.sleep(0.05)


def read_record(path: Path) -> dict:
    """``{"calls": [(target, nth, seconds)], "end": seconds}`` of a recorded run."""
    return json.loads(Path(path).read_text())


def killed(proc: subprocess.CompletedProcess) -> bool:
    return proc.returncode == -signal.SIGKILL


class Tally:
    """Kills tried and survived in one scenario; printed as one line."""

    def __init__(self, name: str, seed: int):
        self.name = name
        self.rng = random.Random(seed)
        self.tried = 0
        self.survived = 0
        self.completed_first = 0  # runs that ended before their kill fired
        self.left: collections.Counter = collections.Counter()
        self.started = time.monotonic()

    def report(self) -> str:
        left = ", ".join(f"{n} {what}" for what, n in sorted(self.left.items()))
        line = (
            f"faults[{self.name}]: {self.survived}/{self.tried} kills survived "
            f"({self.completed_first} runs finished before their kill; "
            f"{time.monotonic() - self.started:.0f} s); the kills left: {left}"
        )
        print(line)
        return line


def temporaries(directory: Path) -> list[Path]:
    """Temporary leftovers under ``directory`` (agentrl's and orbax's names)."""
    out = []
    for path in Path(directory).rglob("*"):
        name = path.name
        if (
            ".tmp-" in name
            or ".old-" in name
            or name.endswith(".tmp")
            or "orbax-checkpoint-tmp" in name
            or name.startswith("incomplete.")
        ):
            out.append(path)
    return out


def unprivileged_prefix() -> list[str] | None:
    """A command prefix under which file permissions hold (``None``: no way).

    root ignores a read-only directory (CAP_DAC_OVERRIDE); ``setpriv`` drops
    that capability for the child process.
    """
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    prefix = [
        setpriv,
        "--bounding-set",
        "-dac_override,-dac_read_search",
        "--inh-caps=-all",
    ]
    probe = subprocess.run([*prefix, "true"], capture_output=True)
    return prefix if probe.returncode == 0 else None


def png_complete(path: Path) -> bool:
    data = Path(path).read_bytes()
    return data.startswith(b"\x89PNG\r\n\x1a\n") and data.endswith(b"IEND\xaeB`\x82")


def tiny(dataset: Path) -> list[str]:
    """Overrides of ``ad_darkroom --preset smoke``: a 1-layer width-16 model."""
    return [
        "--data.path",
        str(dataset),
        "--train.batch_size",
        "4",
        "--train.warmup_steps",
        "1",
        "--model.d_model",
        "16",
        "--model.d_ff",
        "32",
        "--model.num_layers",
        "1",
        "--eval.num_tasks",
        "3",
        "--eval.num_episodes",
        "2",
    ]


def train_args(dataset: Path, run_dir: Path, steps: int, *more: str) -> list[str]:
    """``agentrl train ad_darkroom --preset smoke`` with :func:`tiny` into
    ``run_dir``: ``steps`` steps, a checkpoint every 2, then ``more``."""
    return [
        "train",
        "ad_darkroom",
        "--preset",
        "smoke",
        "--run-dir",
        str(run_dir),
        "--no-progress",
        *tiny(dataset),
        "--train.steps",
        str(steps),
        "--train.checkpoint_every",
        "2",
        *more,
    ]


def complete_steps(checkpoints: Path) -> list[int]:
    """The steps with a finished checkpoint under ``checkpoints`` (read from disk,
    independently of agentrl's own reader)."""
    if not checkpoints.is_dir():
        return []
    return sorted(
        int(p.name)
        for p in checkpoints.iterdir()
        if p.name.isdigit() and (p / "_CHECKPOINT_METADATA").is_file()
    )


def params_of(run_dir: Path) -> list:
    """The trained parameters of a run, as numpy arrays in tree order."""
    import jax
    import numpy as np
    from flax import nnx

    from agentrl.train.rundir import load_model

    model, _ = load_model(run_dir)
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(model, nnx.Param))]
