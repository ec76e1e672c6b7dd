"""The training loop's calls, saves, logs and resume, with a counting fake learner."""

import json

import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import configtools
from agentrl.train.checkpoint import Checkpointer, complete_steps
from agentrl.train.experiments import load_experiment
from agentrl.train.logger import read_metrics
from agentrl.train.runner import (
    Learner,
    NonFiniteLossError,
    calls_finite,
    device_metrics,
    run_updates,
)


def counting_learner(steps, log_every, checkpoint_every, calls, per_call=2, bad=None):
    """A learner whose state ``w`` counts its updates; each call appends
    ``(first step, count)`` to ``calls`` and reports ``loss``: the step it
    ended at, ``ok``: False for the call ending at step ``bad``. Its log
    values are the mean loss of the calls since the last log line and their
    number."""
    config = configtools.override(
        load_experiment("ad_darkroom", "smoke"),
        {
            "train.steps": steps,
            "train.log_every": log_every,
            "train.checkpoint_every": checkpoint_every,
            "train.keep_checkpoints": 2,
        },
    )

    def begin(start):
        position = [start]

        def advance(state, count):
            calls.append((position[0], count))
            position[0] += count
            end = position[0]
            return {"w": state["w"] + count}, {"loss": end, "ok": end != bad}

        return advance

    return Learner(
        config=config,
        state={"w": jnp.zeros(2, jnp.float32)},
        begin=begin,
        log_values=lambda c: {"loss": np.mean([m["loss"] for m in c]), "n": len(c)},
        finite=lambda c: all(m["ok"] for m in c),
        steps_per_call=per_call,
    )


def train(learner, run_dir, stop_at_step=None):
    if not (run_dir / "run.json").exists():
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "run.json").write_text("{}")  # fit's run record comes first
    run_updates(
        learner, run_dir, resume=True, progress=False, stop_at_step=stop_at_step
    )


def saved_count(run_dir, step):
    """``w`` (the updates the state has counted) of checkpoint ``step``."""
    ckpt = Checkpointer(run_dir / "checkpoints", 1, create=False)
    state, meta = ckpt.restore({"w": jnp.zeros(2, jnp.float32)}, step)
    ckpt.close()
    assert meta["step"] == step
    return int(state["w"][0])


def logged(run_dir):
    return [(m["step"], m["loss"], m["n"]) for m in read_metrics(run_dir)]


def test_calls_end_at_log_checkpoint_and_last_steps_and_the_last_two_are_kept(
    tmp_path,
):
    calls = []
    # 7 steps, 2 a call, log every 4, checkpoint every 3, keep 2; a stop
    # asked beyond the end stops at the end
    train(counting_learner(7, 4, 3, calls), tmp_path, stop_at_step=100)
    assert calls == [(0, 2), (2, 1), (3, 1), (4, 2), (6, 1)]
    assert complete_steps(tmp_path / "checkpoints") == [6, 7]  # saved 3, 6, 7
    assert saved_count(tmp_path, 6) == 6 and saved_count(tmp_path, 7) == 7
    # step 4: calls ending 2, 3, 4; the last line at the end: calls 6, 7
    assert logged(tmp_path) == [(4, 3.0, 3), (7, 6.5, 2)]


def test_a_resumed_run_goes_on_from_its_checkpoint_with_its_log_window(tmp_path):
    first, second, third = [], [], []
    train(counting_learner(7, 4, 3, first), tmp_path, stop_at_step=3)
    assert first == [(0, 2), (2, 1)] and complete_steps(tmp_path / "checkpoints")
    train(counting_learner(7, 4, 3, second), tmp_path)
    assert second == [(3, 1), (4, 2), (6, 1)]
    assert saved_count(tmp_path, 7) == 7  # 3 restored + 4 more
    # the stop's own line at 3; step 4 averages the calls ending 2, 3 and 4
    # as an uninterrupted run does
    assert logged(tmp_path) == [(3, 2.5, 2), (4, 3.0, 3), (7, 6.5, 2)]
    train(counting_learner(7, 4, 3, third), tmp_path)  # nothing left to train
    assert third == []
    segments = json.loads((tmp_path / "run.json").read_text())["segments"]
    assert [(s["from_step"], s["to_step"]) for s in segments] == [(0, 3), (3, 7)]


def test_a_call_that_went_non_finite_is_never_checkpointed(tmp_path):
    calls = []
    learner = counting_learner(4, 4, 2, calls, per_call=1, bad=2)
    with pytest.raises(NonFiniteLossError, match="by update 2 .*no checkpoint"):
        train(learner, tmp_path)
    assert calls == [(0, 1), (1, 1)]
    assert complete_steps(tmp_path / "checkpoints") == []


def test_a_data_learners_calls_are_finite_only_if_every_one_was():
    calls = [{"finite": np.bool_(v), "loss": np.float32(1)} for v in (1, 0, 1)]
    assert calls_finite(calls) is False and calls_finite(calls[2:]) is True
    assert device_metrics(calls[1]) == {"loss": 1.0}
