"""Clean stops on SIGINT (Ctrl-C) and SIGTERM: finish the step, then stop.

:func:`stop_signals` installs handlers that only record the signal; the
work checks :func:`stop_requested` at its boundaries (the training loop
after each update or jitted call, a dataset writer after each chunk),
finishes what it was doing (a checkpoint written and closed, temporaries
removed) and raises :class:`Stopped`. The command line prints its message
and the command that resumes (or starts again) and exits with
``128 + signal`` (130 for SIGINT, 143 for SIGTERM), the shell's convention
for a command ended by a signal.

A second signal while stopping stops at once (:class:`Stopped` raised from
the handler: the abandon paths still remove temporaries), as a second
Ctrl-C does elsewhere. Handlers are installed only from the main thread
(Python delivers signals there); elsewhere, and with ``enabled=False`` (a
multi-host run, whose processes could not agree on the step to stop at),
signals keep their previous behaviour.
"""

from __future__ import annotations

import contextlib
import shlex
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

#: the signals that request a clean stop
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(BaseException):  # noqa: N818 (it is not an error)
    """A stop signal ended the work early, cleanly.

    A ``BaseException``, like ``KeyboardInterrupt``, so that no ``except
    Exception`` swallows a stop.

    Attributes:
      signum: the signal (``signal.SIGINT`` or ``signal.SIGTERM``).
      exit_code: ``128 + signum``.
      rerun: how the command line introduces the command to run again.
      at_once: stopped by a second signal, not at a boundary.
      detail: said after the message (what the command that stopped knows
        of what is left, e.g. the last complete checkpoint).
      drop, add: the arguments to leave out of / append to the stopped
        command line to get that command (``train``: ``--no-resume`` out).
    """

    def __init__(
        self,
        signum: int,
        message: str,
        *,
        rerun: str = "resume with",
        at_once: bool = False,
    ):
        super().__init__(message)
        self.signum = int(signum)
        self.rerun = rerun
        self.at_once = at_once
        self.detail = ""
        self.drop: tuple[str, ...] = ()
        self.add: tuple[str, ...] = ()

    def __str__(self) -> str:
        message = super().__str__()
        return f"{message}; {self.detail}" if self.detail else message

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def command(self, argv: list[str]) -> str:
        """The ``agentrl`` command line that runs ``argv`` again, edited."""
        args = [a for a in argv if a not in self.drop] + list(self.add)
        return shlex.join(["agentrl", *args])


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


class StopFlag:
    """The first stop signal received inside a :func:`stop_signals` block."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def _handle(self, signum: int, frame) -> None:
        if self.signum is not None:  # asked twice: stop now
            name = signal_name(signum)
            raise Stopped(signum, f"stopped at once by a second {name}", at_once=True)
        self.signum = signum


#: the flags of the active :func:`stop_signals` blocks, innermost last
_active: list[StopFlag] = []


@contextlib.contextmanager
def stop_signals(enabled: bool = True) -> Iterator[StopFlag]:
    """Record SIGINT/SIGTERM in the yielded flag instead of acting on them.

    The previous handlers are back when the block ends. Off the main
    thread, or with ``enabled=False``, nothing is installed and the flag
    stays unset.
    """
    flag = StopFlag()
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = {s: signal.signal(s, flag._handle) for s in STOP_SIGNALS}
    _active.append(flag)
    try:
        yield flag
    finally:
        _active.remove(flag)
        for signum, handler in previous.items():
            # None: a handler set outside Python, which cannot be put back
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def stop_requested() -> bool:
    """Whether the innermost active :func:`stop_signals` block got a signal."""
    return bool(_active) and _active[-1].signum is not None


def raise_if_stopped(
    flag: StopFlag, checkpoints: Path, steps: list[int], end: int
) -> None:
    """Raise :class:`Stopped` if a stop signal ended a training run before
    step ``end``; ``steps``: the complete checkpoints in ``checkpoints``."""
    if flag.signum is None or (steps and steps[-1] >= end):
        return  # not asked to stop, or asked once the last update was done
    where = (
        f"at step {steps[-1]}; its checkpoint is complete in {checkpoints}"
        if steps
        else "before its first checkpoint"
    )
    name = signal_name(flag.signum)
    raise Stopped(flag.signum, f"training stopped by {name} {where}")
