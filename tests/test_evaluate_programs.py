"""One compiled program per learner (issue 34, item 4) and what ``eval`` says
about the run it evaluates (issue 35, items 2 and 8).

Acting rules and context controls are lanes of one program
(:mod:`agentrl.evaluate.lanes`): each lane acts exactly as the rule's and the
control's own program did, and choosing among N rules, then testing with
the controls, compiles the model's program once.
"""

import dataclasses
import json
import os
import socket
import subprocess
import sys
import warnings

import jax
import numpy as np
import pytest

from agentrl.evaluate import programs
from agentrl.evaluate.controls import CONTEXT_CONTROLS

#: the model program's name on the per-rule path (``driver.run_policy``)
OLD_PROGRAM = "go"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_ad_config):
    from agentrl import configtools
    from agentrl.train.loop import fit

    config = configtools.override(tiny_ad_config(2), {"train.checkpoint_every": 1})
    return fit(config, tmp_path_factory.mktemp("runs") / "ad", progress=False)


@pytest.fixture(scope="module")
def unfinished_run(tmp_path_factory, tiny_ad_config):
    """Trained to step 1 of 4 (as a run still training would be)."""
    from agentrl import configtools
    from agentrl.train.loop import fit

    config = configtools.override(tiny_ad_config(4), {"train.checkpoint_every": 1})
    out = tmp_path_factory.mktemp("runs") / "ad_unfinished"
    return fit(config, out, progress=False, stop_at_step=1)


@pytest.mark.long
def test_each_lane_acts_as_its_rule_and_control_did_alone(tiny_run):
    from agentrl.agents.driver import run_policy
    from agentrl.evaluate.controls import control_policy
    from agentrl.evaluate.lanes import lane
    from agentrl.train.rundir import load_run

    run = load_run(tiny_run)
    params, _ = run.held_out(3, 0, "test")
    key, steps = jax.random.key(5), 3 * run.env.horizon
    runner = programs.lane_runner(run.config, run.env, "darkroom", run.model, steps)
    # every rule and every control at least once (each pair is one compile)
    settings = [
        ("greedy", None),
        ("sample_then_greedy", "zero_rewards"),
        ("sample", "shuffle_rewards"),
        ("sample", "empty_context"),
        ("sample_above_median", None),
        ("sample_above_median", "zero_rewards"),
    ]
    for rule, control in settings:
        acting = dataclasses.replace(
            run.config, eval=dataclasses.replace(run.config.eval, acting=rule)
        )
        policy = run.policy(acting)
        if control is not None:
            policy = control_policy(policy, control)
        # the same key on both paths, cloned (jax_debug_key_reuse)
        alone = run_policy(run.env, policy, params, jax.random.clone(key), steps)[0]
        laned = runner(params, jax.random.clone(key), lane(rule, control))
        np.testing.assert_array_equal(laned.action, alone.action, (rule, control))
        np.testing.assert_array_equal(laned.reward, alone.reward, (rule, control))


@pytest.mark.long
def test_n_rules_then_test_with_controls_compile_the_model_once(tiny_run):
    from agentrl.evaluate.selection import acting_candidates, evaluate_choice, select

    programs.clear()
    with programs.count_compiles() as counts:
        sel = select(acting_candidates(tiny_run), last_k=1)  # 3 rules
        evaluate_choice(sel, baselines=["random"], control=list(CONTEXT_CONTROLS))
    # validation and test hold 3 tasks each: one shape, one compile
    assert counts[programs.MODEL_PROGRAM] == 1, counts
    assert counts[OLD_PROGRAM] == 0
    with programs.count_compiles() as again:  # e.g. the next seed's run
        evaluate_choice(sel, baselines=["random"], control=list(CONTEXT_CONTROLS))
    assert again[programs.MODEL_PROGRAM] == 0 and again["run_baseline"] == 0, again
    with programs.sharing(False), programs.count_compiles() as before:
        select(acting_candidates(tiny_run), last_k=1)
    assert before[OLD_PROGRAM] == 3  # the old way: one program per rule


@pytest.mark.long
def test_shared_programs_give_the_same_results(tiny_run):
    from agentrl.evaluate.run import run_results

    kwargs = dict(baselines=["random", "oracle"], control=["shuffle_rewards"])
    with programs.sharing(False):
        old, title_old = run_results(tiny_run, **kwargs)
    new, title_new = run_results(tiny_run, **kwargs)
    assert title_old == title_new and list(old) == list(new)
    for name in old:
        np.testing.assert_array_equal(old[name].returns, new[name].returns)
        assert old[name].metadata["kind"] == new[name].metadata["kind"]


# -------------------------------------------- an unfinished run (35.2)


@pytest.mark.long
def test_an_unfinished_run_is_evaluated_with_a_warning_and_says_so_everywhere(
    unfinished_run, tmp_path
):
    from agentrl.evaluate.run import UnfinishedRunWarning, evaluate_run

    with pytest.warns(UnfinishedRunWarning, match="step 1 of 4"):
        paths = evaluate_run(
            unfinished_run, out_dir=tmp_path, baselines=["random"], num_episodes=1
        )
    payload = json.loads(paths["json"].read_text())
    assert payload["checkpoint"] == {
        "checkpoint_step": 1,
        "train_steps": 4,
        "finished": False,
    }
    assert "checkpoint step 1 (not finished)" in payload["title"]
    md = paths["markdown"].read_text()
    assert "step 1 of 4: the run had not finished training" in md
    csv = paths["csv"].read_text().splitlines()
    assert "ad,info,checkpoint_step,0,1,," in csv
    assert "ad,info,finished,0,0,," in csv


@pytest.mark.long
def test_a_finished_run_says_its_step_and_no_warning(tiny_run, tmp_path):
    from agentrl.evaluate.run import evaluate_run

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        paths = evaluate_run(tiny_run, out_dir=tmp_path, baselines=["random"])
    payload = json.loads(paths["json"].read_text())
    assert payload["checkpoint"]["finished"] is True
    assert (
        "Checkpoint: step 2 of 2 (training finished)." in paths["markdown"].read_text()
    )
    assert "ad,info,checkpoint_step,0,2,," in paths["csv"].read_text()


@pytest.mark.long
def test_a_live_lock_holder_is_named_as_still_training(tiny_run):
    from agentrl.evaluate.run import training_process
    from agentrl.safeio import LOCK_FILE

    lock = tiny_run / LOCK_FILE
    assert training_process(tiny_run) is None
    host = socket.gethostname()
    try:
        lock.write_text(f"{os.getpid()} {host} 2026-01-01T00:00:00+00:00\n")
        assert training_process(tiny_run) == f"pid {os.getpid()} on {host}"
        child = subprocess.Popen([sys.executable, "-c", "pass"])
        child.wait()  # a dead pid: a lock left by a killed run
        lock.write_text(f"{child.pid} {host} 2026-01-01T00:00:00+00:00\n")
        assert training_process(tiny_run) is None
    finally:
        lock.unlink(missing_ok=True)


# ---------------------------------------- progress and summary (35.8)


@pytest.mark.long
def test_agentrl_eval_shows_progress_warns_and_ends_with_a_summary(
    unfinished_run, tmp_path, capsys
):
    from agentrl.cli import main

    argv = ["eval", str(unfinished_run), "--episodes", "1", "--tasks", "2",
            "--baselines", "random", "--out", str(tmp_path / "a")]  # fmt: skip
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "eval: 100%" in err  # the bar, one tick per method
    assert "agentrl eval: warning:" in err and "step 1 of 4" in err
    assert "return ep 1" in out and "return last" in out
    lines = out.splitlines()
    assert any(line.split()[:1] == ["ad"] for line in lines)
    assert any(line.split()[:1] == ["random"] for line in lines)
    assert "not finished training" in out
    argv[-1] = str(tmp_path / "b")
    assert main([*argv, "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert "eval: " not in err.replace("agentrl eval: ", "") and "return ep 1" in out
