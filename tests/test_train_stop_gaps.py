"""Stop signals in one process: the flag, nested blocks, handlers, the message."""

import signal
from pathlib import Path

import pytest

from agentrl.train.stop import (
    StopFlag,
    Stopped,
    raise_if_stopped,
    stop_requested,
    stop_signals,
)


def test_a_second_signal_stops_at_once():
    flag = StopFlag()
    flag._handle(signal.SIGINT, None)
    assert flag.signum == signal.SIGINT
    with pytest.raises(Stopped, match="at once by a second SIGTERM") as info:
        flag._handle(signal.SIGTERM, None)
    assert info.value.at_once and info.value.exit_code == 128 + signal.SIGTERM


def test_the_innermost_block_decides_and_handlers_are_put_back():
    def mine(signum, frame):
        pass

    before = signal.signal(signal.SIGTERM, mine)
    try:
        with stop_signals() as outer:
            with stop_signals() as inner:
                inner.signum = signal.SIGINT
                assert stop_requested()
            assert not stop_requested()  # the outer block got no signal
            assert outer.signum is None
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_stop_after_the_last_update_is_no_stop():
    flag = StopFlag()
    raise_if_stopped(flag, Path("c"), [4], 8)  # no signal
    flag.signum = signal.SIGINT
    raise_if_stopped(flag, Path("c"), [8], 8)  # the run ended anyway
    with pytest.raises(Stopped, match="by SIGINT at step 5; its checkpoint"):
        raise_if_stopped(flag, Path("c"), [5], 8)
    with pytest.raises(Stopped, match="before its first checkpoint"):
        raise_if_stopped(flag, Path("c"), [], 8)


def test_the_rerun_command_drops_and_adds_arguments():
    stop = Stopped(signal.SIGTERM, "stopped")
    stop.drop, stop.add = ("--no-resume",), ("--x",)
    argv = ["train", "--no-resume", "run"]
    assert stop.command(argv) == "agentrl train run --x"
