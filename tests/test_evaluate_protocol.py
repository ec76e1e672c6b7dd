"""The clean evaluation protocol: three-way splits, controls, selection, per task."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs
from agentrl.agents.agent import Step, run_batched_agent
from agentrl.envs.tasks import TaskSplit, split_task_ids
from agentrl.evaluate import EvalResult, metrics
from agentrl.evaluate.controls import (
    CONTROLS,
    ControlledAgent,
    check_control,
    expert_dataset,
    icl_verdict,
    paired_difference,
)
from agentrl.evaluate.goals import by_distance, goal_grid, goal_layout, per_goal
from agentrl.train.rundir import held_out_params

# ------------------------------------------------------------------ splits


def test_three_way_split_keeps_the_two_way_training_ids():
    two = split_task_ids(81, 0.8, seed=3)
    three = split_task_ids(81, 0.8, seed=3, validation_share=0.5)
    np.testing.assert_array_equal(two.train, three.train)  # 65 training goals
    assert (len(three.train), len(three.validation), len(three.test)) == (65, 8, 8)
    held = sorted([*three.validation, *three.test])
    assert held == sorted(two.test)
    assert not set(three.validation) & set(three.test)
    assert TaskSplit.from_json(three.to_json()).to_json() == three.to_json()
    # Point-Robot's 45/5: 2 validation, 3 test; one held-out task: two-way
    pr = split_task_ids(50, 0.9, 0, 0.5)
    assert (len(pr.validation), len(pr.test)) == (2, 3)
    assert len(split_task_ids(4, 0.75, 0, 0.5).validation) == 0
    with pytest.raises(ValueError, match="validation_share"):
        split_task_ids(81, 0.8, 0, 1.0)
    env = envs.make("darkroom")
    assert env.task_split(0.8, 3, 0.5).to_json() == three.to_json()


def test_a_two_way_split_has_no_validation_tasks():
    two = split_task_ids(5, 0.6, seed=0).to_json()
    assert two["validation"] == [] and len(two["test"]) == 2
    env = envs.make("darkroom")
    _, ids = held_out_params(env, two, None, 0, "test")
    assert ids == two["test"]
    with pytest.raises(ValueError, match="no validation tasks"):
        held_out_params(env, two, None, 0, "validation")
    with pytest.raises(ValueError, match="'validation', 'test' or 'train'"):
        held_out_params(env, two, None, 0, "training")


def test_training_tasks_are_a_draw_of_the_trained_ids():
    split = envs.make("dark_key_to_door").task_split(0.8, 0, 0.5).to_json()
    env = envs.make("dark_key_to_door")
    trained = split["train"][::3]  # the ids a run trained on: some of the split's

    def train_ids(seed):
        return held_out_params(env, split, 16, seed, "train", trained=trained)

    params, ids = train_ids(3)
    assert len(ids) == 16 == len(set(ids)) and set(ids) <= set(trained)
    assert ids == sorted(ids) and ids != trained[:16]
    assert ids == train_ids(3)[1] and ids != train_ids(4)[1]  # seeded
    first = jax.vmap(env.params_for_task)(jnp.asarray(ids[:1]))
    assert jax.tree.map(lambda a: a[:1].tolist(), params) == jax.tree.map(
        lambda a: a.tolist(), first
    )
    # never the split's training ids, most of which a small run never saw
    with pytest.raises(ValueError, match="pass trained"):
        held_out_params(env, split, 16, 3, "train")
    # a continuous family's training tasks are not recorded
    with pytest.raises(ValueError, match="finite task space"):
        held_out_params(envs.make("gaussian_bandit"), None, 8, 0, "train")


def test_a_runs_training_tasks_are_its_datasets(
    darkroom_dataset, tiny_ad_config, tmp_path
):
    """``--split train``: the tasks the run's histories were made on (8 of the
    split's 65 training goals here), not any of the split's training ids."""
    from agentrl import configtools
    from agentrl.data import open_dataset
    from agentrl.train.experiments import load_experiment
    from agentrl.train.rundir import Run

    meta = open_dataset(darkroom_dataset, verify="none").metadata
    split, trained = meta["split"], sorted(set(meta["task_ids"]["train"]))
    assert len(split["train"]) > 4 * len(trained)  # the case that went wrong
    env = envs.make("darkroom")
    run = Run(tmp_path, tiny_ad_config(2), None, env, split, 0)  # no model needed
    assert run.trained_task_ids() == trained
    for count, seed in ((4, 0), (4, 1), (6, 2)):
        _, ids = run.held_out(count, seed, "train")
        assert len(ids) == count and set(ids) <= set(trained), (count, seed)
    assert run.held_out(64, 0, "train")[1] == trained  # all, where fewer
    # a run whose dataset is gone: refused, naming where it was looked for
    gone = configtools.override(tiny_ad_config(2), {"data.path": str(tmp_path / "x")})
    with pytest.raises(ValueError, match="no dataset to read the tasks"):
        Run(tmp_path, gone, None, env, split, 0).held_out(4, 0, "train")
    # an online learner draws from all the split's training ids
    online = load_experiment("rl2_darkroom", "smoke")
    assert Run(tmp_path, online, None, env, split, 0).trained_task_ids() == sorted(
        split["train"]
    )


def test_continuous_validation_and_test_tasks_are_different_draws():
    env = envs.make("gaussian_bandit")
    val, _ = held_out_params(env, None, 8, 0, "validation")
    test, _ = held_out_params(env, None, 8, 0, "test")
    again, _ = held_out_params(env, None, 8, 0, "test")
    np.testing.assert_array_equal(test.means, again.means)
    assert not np.allclose(val.means, test.means)


def test_datasets_record_three_way_splits(darkroom_dataset):
    from agentrl.data import open_dataset

    split = open_dataset(darkroom_dataset).metadata["split"]
    assert split["validation"] and split["test"] and split["validation_share"] == 0.5
    ids = set(split["train"]), set(split["validation"]), set(split["test"])
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    assert len(ids[0] | ids[1] | ids[2]) == 81


# ---------------------------------------------------------------- controls


class _Seen:
    """A batched agent that keeps every reward it is shown (fixed-size buffer)."""

    batched = True

    def __init__(self, n):
        self.n = n

    def init(self, key, params):
        return jnp.zeros((key.shape[0], self.n)), jnp.int32(0)

    def act(self, key, state, obs, env_state, params):
        return jnp.zeros(key.shape[0], jnp.int32)

    def update(self, state, step):
        seen, t = state
        return seen.at[:, t].set(jnp.asarray(step.reward, jnp.float32)), t + 1


def _run(control, n=40):
    env = envs.make("bernoulli_bandit", num_arms=2, horizon=n)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 3))
    agent = ControlledAgent(_Seen(n), control, n)
    hist, state = run_batched_agent(env, agent, params, jax.random.key(1), n)
    return np.asarray(hist.reward), np.asarray(state.inner[0]), state


def test_zeroed_rewards_hide_every_reward_but_the_env_still_pays():
    paid, seen, _ = _run("zero_rewards")
    assert paid.sum() > 0 and np.all(seen == 0)


def test_shuffled_rewards_are_draws_from_the_rewards_paid_so_far():
    paid, seen, _ = _run("shuffle_rewards")
    assert not np.array_equal(paid, seen)  # the order is broken
    for task in range(paid.shape[0]):
        for t in range(paid.shape[1]):  # each shown reward was paid by then
            assert seen[task, t] in set(paid[task, : t + 1].tolist())


def test_empty_context_never_updates_the_agent():
    _, seen, state = _run("empty_context")
    assert np.all(seen == 0) and int(state.inner[1]) == 0


def test_unknown_control_is_refused_with_the_allowed_names():
    with pytest.raises(ValueError, match="zero_rewards, shuffle_rewards"):
        check_control("nope")
    with pytest.raises(ValueError, match="training run"):
        check_control("expert_distillation")


def _er(returns):
    returns = np.asarray(returns, float)
    return EvalResult("m", returns)


def test_verdict_needs_every_control_beaten_with_a_ci_above_zero():
    rng = np.random.default_rng(0)
    good = [_er(5 + rng.normal(0, 0.1, (20, 12))) for _ in range(3)]
    worse = [_er(1 + rng.normal(0, 0.1, (20, 12))) for _ in range(3)]
    same = [_er(r.returns + rng.normal(0, 0.1, r.returns.shape)) for r in good]
    all_worse = {c: worse for c in CONTROLS}
    v = icl_verdict(good, all_worse)
    assert v["learns_in_context"] and v["missing"] == []
    assert v["controls"]["zero_rewards"]["low"] > 3.5
    v = icl_verdict(good, {**all_worse, "empty_context": same})
    assert not v["learns_in_context"]
    assert not v["controls"]["empty_context"]["beaten"]
    v = icl_verdict(good, {"zero_rewards": worse})
    assert not v["learns_in_context"] and "empty_context" in v["missing"]
    with pytest.raises(ValueError, match="seeds"):
        icl_verdict(good, {"zero_rewards": worse[:2]})
    # 1 seed x 3 tasks, far apart: a CI above 0, too few pairs to tell
    few = icl_verdict(
        [_er(good[0].returns[:3])], {"zero_rewards": [_er(worse[0].returns[:3])]}
    )
    d = few["controls"]["zero_rewards"]
    assert d["low"] > 3.5 and d["pairs"] == 3 and not d["beaten"]
    # ahead on 1 of 11 tasks, level on the rest: the CI's low end is exactly
    # 0 (a resample misses that task with probability 0.35), not above it
    level = np.zeros((11, 12))
    ahead = level.copy()
    ahead[0] = 1.0
    tie = icl_verdict([_er(ahead)], {"zero_rewards": [_er(level)]})
    d = tie["controls"]["zero_rewards"]
    assert d["low"] == 0.0 and d["pairs"] == 11 and not d["beaten"]
    # a control that does not apply to the learner is refused, not counted
    with pytest.raises(ValueError, match="do not apply"):
        icl_verdict(good, all_worse, applicable=CONTROLS[:3])


def test_a_paired_difference_needs_the_same_tasks_and_episodes():
    def run(episodes, ids=None):
        return EvalResult("m", np.ones((3, episodes)), metadata={"task_ids": ids})

    same = paired_difference([run(4, [1, 2, 5])], [run(4, [1, 2, 5])], 2)
    assert same["mean"] == 0.0 and same["pairs"] == 3
    with pytest.raises(ValueError, match=r"\(3, 4\) vs \(3, 6\)"):
        paired_difference([run(4)], [run(6)], 2)  # once: each its own last 2
    with pytest.raises(ValueError, match=r"task ids \[1, 2, 5\] vs \[1, 2, 6\]"):
        paired_difference([run(4, [1, 2, 5])], [run(4, [1, 2, 6])], 2)
    # one side's tasks unrecorded: not shown to be the same (once it passed)
    with pytest.raises(ValueError, match=r"task ids \[1, 2, 5\] vs None"):
        paired_difference([run(4, [1, 2, 5])], [run(4)], 2)
    # ids as arrays (not lists) compare as one answer, not elementwise
    with pytest.raises(ValueError, match="task ids"):
        a, b = np.array([1, 2, 5]), np.array([1, 2, 6])
        paired_difference([run(4, a)], [run(4, b)], 2)

    def drawn(oracle):  # a drawn family: no ids, the oracle's return per task
        return EvalResult("m", np.ones((3, 4)), oracle_return=np.asarray(oracle))

    assert paired_difference([drawn([1, 2, 3])], [drawn([1, 2, 3])], 2)["pairs"] == 3
    with pytest.raises(ValueError, match="not evaluated on the same tasks"):
        paired_difference([drawn([1, 2, 3])], [drawn([1, 2, 4])], 2)
    # results with neither ids nor oracle returns pair within one run (a
    # method and its controls), but not when evaluated apart (shown=True)
    assert paired_difference([run(4)], [run(4)], 2)["pairs"] == 3
    with pytest.raises(ValueError, match="cannot be shown"):
        paired_difference([run(4)], [run(4)], 2, shown=True)


def test_choice_margin_is_paired_per_task_and_names_the_runner_up():
    from agentrl.evaluate.selection import choice_margin

    rng = np.random.default_rng(1)
    base = rng.normal(0, 1.0, 32)  # task difficulty, shared by the candidates
    values = {
        "sample": base + 0.3 + rng.normal(0, 0.05, 32),
        "greedy": base + rng.normal(0, 0.05, 32),
        "sample_then_greedy": base - 1.0,
    }
    m = choice_margin(values, "sample", 1.0)
    # paired: the shared task spread (sd 1) cancels, so +0.3 is resolved,
    # where the two unpaired CIs (half-width ~0.35) overlap
    assert m["runner_up"] == "greedy" and m["resolved"] and m["tasks"] == 32
    assert abs(m["mean"] - 0.3) < 0.05 and 0.2 < m["ci"][0] < 0.3
    close = {"sample": base + rng.normal(0, 0.05, 32), "greedy": base}
    assert not choice_margin(close, "sample", 1.0)["resolved"]
    # a margin of one sign on 5 tasks cannot be resolved (sign test p 0.0625);
    # on 6 it can (0.031), and the bootstrap CI is above 0 on both
    for n, resolved in ((2, False), (5, False), (6, True)):
        m = choice_margin({"a": base[:n] + 1.0, "b": base[:n]}, "a", 1.0)
        assert m["ci"][0] > 0 and m["resolved"] is resolved, n
    # regret: lower is better, the sign makes a positive margin favour the choice
    m = choice_margin({"a": base + 2.0, "b": base}, "b", -1.0)
    assert m["runner_up"] == "a" and m["mean"] == pytest.approx(2.0)
    # undefined tasks are left out; one candidate has no margin
    values["greedy"][:4] = np.nan
    left_out = choice_margin(values, "sample", 1.0)
    assert (left_out["tasks"], left_out["dropped"]) == (28, 4)
    assert choice_margin({"sample": base}, "sample", 1.0) is None
    # a rule that scored exactly as the chosen one is no rival
    same = {"sample": base, "sample_then_greedy": base.copy(), "greedy": base - 0.5}
    assert choice_margin(same, "sample", 1.0)["runner_up"] == "greedy"
    assert choice_margin({"sample": base, "again": base.copy()}, "sample", 1.0) is None


def test_criterion_values_average_to_the_summary_fields():
    from agentrl.evaluate.report import summarize_method
    from agentrl.evaluate.selection import criterion_values

    rng = np.random.default_rng(2)
    result = EvalResult(
        "m",
        rng.normal(0, 1, (6, 12)),
        normalized=rng.uniform(0, 1, (6, 12)),
        regret=np.cumsum(rng.uniform(0, 1, (6, 30)), -1),
    )
    summary = summarize_method(result, last_k=4)
    for field in ("score_last", "return_last", "regret_final", "auc"):
        values = criterion_values(result, field, summary["last_k"])
        assert values.shape == (6,)
        assert values.mean() == pytest.approx(summary[field]["mean"]), field


def test_auc_values_leave_out_tasks_without_a_normalized_score_as_the_summary_does():
    from agentrl.evaluate.report import summarize_method
    from agentrl.evaluate.selection import criterion_values

    rng = np.random.default_rng(3)
    normalized = rng.uniform(0, 1, (5, 8))
    normalized[1] = np.nan  # a task without an oracle
    result = EvalResult("m", rng.normal(0, 1, (5, 8)), normalized=normalized)
    values = criterion_values(result, "auc", 10)
    assert np.isnan(values[1]) and np.isfinite(np.delete(values, 1)).all()
    assert np.nanmean(values) == pytest.approx(summarize_method(result)["auc"]["mean"])


def test_recorded_field_reads_old_records_from_their_rule():
    from agentrl.evaluate.selection import recorded_field

    assert recorded_field({"field": "return_last", "rule": "x"}) == "return_last"
    old = "max over candidates of -mean regret_final on validation tasks; ties"
    assert recorded_field({"rule": old}) == "regret_final"
    assert recorded_field({"rule": "something else"}) is None
    assert recorded_field({}) is None


def test_expert_dataset_keeps_the_last_episodes_of_each_history(
    darkroom_dataset, tmp_path
):
    from agentrl.data import open_dataset

    src = open_dataset(darkroom_dataset)
    out = expert_dataset(darkroom_dataset, tmp_path / "expert", 5)
    ed = open_dataset(out)
    assert ed.metadata["num_episodes"] == 5
    assert ed.metadata["split"]["train"] == src.metadata["split"]["train"]
    np.testing.assert_array_equal(ed.task_ids("train"), src.task_ids("train"))
    a, b = src.load_history("train"), ed.load_history("train")
    np.testing.assert_array_equal(b.reward, a.reward[:, -5 * 20 :])
    np.testing.assert_array_equal(b.obs, a.obs[:, -5 * 20 :])
    assert int(b.episode[:, 0].max()) == 0 and int(b.episode.max()) == 4
    with pytest.raises(ValueError, match=r"\[1, 30\]"):
        expert_dataset(darkroom_dataset, tmp_path / "bad", 31)


# ------------------------------------------------------ sample efficiency


def test_auc_and_episodes_to_threshold():
    curve = np.array([[0.0, 0.2, 0.6, 0.9], [0.0, 0.0, 0.1, 0.2], [np.nan, 1, 1, 1]])
    np.testing.assert_allclose(metrics.curve_auc(curve[:2]), [0.425, 0.075])
    np.testing.assert_array_equal(
        metrics.episodes_to_threshold(curve, 0.5), [3, 5, 2]
    )  # 5 = never (censored at episodes + 1); NaN never reaches


def test_summary_reports_auc_and_episodes_to_threshold():
    from agentrl.evaluate import summarize

    returns = np.tile(np.arange(6.0), (4, 1))
    r = EvalResult("m", returns, returns / 5.0, None, np.zeros(4), np.full(4, 5.0))
    s = summarize({"m": [r, r]}, last_k=2)["m"]
    assert s["auc"]["mean"] == pytest.approx(0.5)
    e = s["episodes_to_threshold"]
    assert (e["mean_curve"], e["median"], e["reached"]) == (4, 4.0, 1.0)


def test_a_threshold_never_reached_reads_never_not_episodes_plus_one():
    from agentrl.evaluate.report import markdown_table, summarize

    returns = np.zeros((4, 6))  # a flat curve: score 0 in all 6 episodes
    r = EvalResult("m", returns, returns.copy(), None, np.zeros(4), np.ones(4))
    summary = summarize({"m": [r]}, last_k=2)
    assert summary["m"]["episodes_to_threshold"]["mean_curve"] == 7  # censored
    row = markdown_table(summary).splitlines()[-1]
    assert "never (>6) (>= 0.5; 0% reach)" in row and "| 7 (" not in row


# ----------------------------------------------------------------- per task


def test_per_goal_cells_and_distance_groups():
    env = envs.make("darkroom")  # 9x9, start (4, 4)
    size, start = goal_layout(env)
    assert size == 9 and list(start) == [4, 4]
    assert goal_layout(envs.make("bernoulli_bandit")) is None
    ids = [[4 * 9 + 5, 0], [4 * 9 + 5, 80]]  # (5, 4) twice, (0, 0), (8, 8)
    norm = [np.array([[1.0], [0.0]]), np.array([[0.5], [0.25]])]
    runs = [EvalResult("m", n, n) for n in norm]
    cells = per_goal(env, runs, ids, last_k=1)
    assert cells == {(5, 4): [1.0, 0.5], (0, 0): [0.0], (8, 8): [0.25]}
    grid = goal_grid(size, cells)
    assert grid[4, 5] == 0.75 and grid[0, 0] == 0.0 and np.isnan(grid[1, 1])
    rows = by_distance(env, runs, ids, last_k=1)
    assert [(r["distance"], r["pairs"]) for r in rows] == [(1, 2), (8, 2)]
    assert rows[0]["mean"] == 0.75 and rows[1]["mean"] == 0.125


def test_write_results_draws_the_goal_heatmap(tmp_path):
    from agentrl.evaluate import write_results

    env = envs.make("darkroom")
    runs = []
    for seed in range(2):
        r = EvalResult("m", np.ones((3, 4)), np.ones((3, 4)), None,
                       np.zeros(3), np.ones(3))  # fmt: skip
        r.metadata["task_ids"] = [seed, 10 + seed, 40]
        runs.append(r)
    paths = write_results({"m": runs}, tmp_path, env=env)
    assert paths["heatmap"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = paths["markdown"].read_text()
    assert "Per goal" in md and "goal_heatmap.png" in md
    assert json.loads(paths["json"].read_text())["summary"]["m"]["auc"]["mean"] == 1


# ---------------------------------------------- a trained run end to end


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_ad_config):
    from agentrl import configtools
    from agentrl.train.loop import fit

    config = configtools.override(tiny_ad_config(2), {"train.checkpoint_every": 1})
    return fit(config, tmp_path_factory.mktemp("runs") / "ad", progress=False)


@pytest.mark.long
def test_selection_uses_validation_tasks_and_records_its_choice(tiny_run):
    from agentrl.evaluate.selection import (
        acting_candidates,
        checkpoint_candidates,
        evaluate_choice,
        select,
    )
    from agentrl.train.rundir import load_run

    split = load_run(tiny_run).split
    sel = select(acting_candidates(tiny_run), last_k=1)
    assert sel.field == "score_last"
    # 3 validation tasks (a seeded draw of the split's: test_evaluate_report)
    assert len(set(sel.task_ids)) == 3 and set(sel.task_ids) <= set(split["validation"])
    vals = {n: v["mean"] for n, v in sel.validation.items()}
    assert vals[sel.choice.name] == max(vals.values())
    assert list(vals) == ["sample", "greedy", "sample_then_greedy"]
    margin = sel.to_json()["margin"]
    if margin is None:  # no rival: every rule scored as the chosen one
        assert len(set(vals.values())) == 1
    else:
        rival = vals[margin["runner_up"]]
        assert margin["runner_up"] != sel.choice.name and margin["tasks"] == 3
        assert margin["mean"] == pytest.approx(vals[sel.choice.name] - rival)
    results, title = evaluate_choice(sel, baselines=["random"])
    model = results[next(iter(results))]
    tested = model.metadata["task_ids"]
    assert len(set(tested)) == 3 and set(tested) <= set(split["test"])
    assert model.metadata["tasks"] == "test" and "chosen on validation" in title
    assert model.metadata["selection"]["choice"]["name"] == sel.choice.name
    assert model.metadata["acting"] == sel.choice.eval["acting"]
    steps = [c.step for c in checkpoint_candidates(tiny_run)]
    assert steps == sorted(steps) and steps[-1] == 2


@pytest.mark.long
def test_eval_with_a_control_writes_its_verdict(tiny_run, tmp_path):
    from agentrl.evaluate.run import evaluate_run

    paths = evaluate_run(
        tiny_run, out_dir=tmp_path / "e", baselines=["random"],
        control="zero_rewards", tasks="validation",
    )  # fmt: skip
    payload = json.loads(paths["json"].read_text())
    assert set(payload["summary"]) == {"ad", "ad/zero_rewards", "random"}
    verdict = json.loads(paths["verdict"].read_text())
    assert set(verdict["controls"]) == {"zero_rewards"}
    assert verdict["learns_in_context"] is False  # the other controls are missing
    meta = payload["runs"]["ad/zero_rewards"][0]["metadata"]
    assert meta["control"] == "zero_rewards" and meta["tasks"] == "validation"


@pytest.mark.long
def test_agentrl_eval_control_and_split_flags(tiny_run, tmp_path, capsys):
    from agentrl.cli import main

    out = tmp_path / "cli"
    argv = ["eval", str(tiny_run), "--split", "validation", "--control",
            "empty_context", "--tasks", "2", "--episodes", "1",
            "--baselines", "random", "--step", "1", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    payload = json.loads((out / "results.json").read_text())
    meta = payload["runs"]["ad/empty_context"][0]["metadata"]
    assert meta["step"] == 1 and meta["tasks"] == "validation"
    assert (out / "verdict.json").is_file()
    capsys.readouterr()
    assert main(["eval", str(tiny_run), "--control", "nope"]) == 2
    assert "--control" in capsys.readouterr().err


@pytest.mark.long
def test_agentrl_eval_on_training_tasks(tiny_run, tmp_path):
    from agentrl.cli import main
    from agentrl.train.rundir import load_run

    out = tmp_path / "train"
    argv = ["eval", str(tiny_run), "--split", "train", "--tasks", "2",
            "--episodes", "1", "--baselines", "random", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    meta = json.loads((out / "results.json").read_text())["runs"]["ad"][0]["metadata"]
    assert meta["tasks"] == "train" and len(meta["task_ids"]) == 2
    # tasks its histories were made on, not just any of the split's train ids
    assert set(meta["task_ids"]) <= set(load_run(tiny_run).trained_task_ids())


def test_validation_tasks_set_how_many_validation_tasks_choices_see():
    from types import SimpleNamespace

    from agentrl.evaluate.run import _held_out
    from agentrl.train.config import EvalConfig

    def run_with(ev):
        # the ids stand for the count; the flag says whether tasks beyond
        # the split may be drawn (only validation tasks asked for by count)
        return SimpleNamespace(
            config=SimpleNamespace(eval=ev),
            held_out=lambda count, seed, which, draw: (draw, list(range(count))),
        )

    run = run_with(EvalConfig(num_tasks=16, validation_tasks=64))
    assert _held_out(run, None, {}, None, 0, "validation") == (True, [*range(64)])
    assert _held_out(run, None, {}, None, 0, "test") == (False, [*range(16)])
    assert _held_out(run, None, {}, 8, 0, "validation") == (True, [*range(8)])
    plain = run_with(EvalConfig(num_tasks=16))
    assert _held_out(plain, None, {}, None, 0, "validation") == (False, [*range(16)])
    assert _held_out(plain, None, {}, 4, 0, "test") == (False, [*range(4)])
    with pytest.raises(ValueError, match="eval.validation_tasks"):
        EvalConfig(validation_tasks=0)


def test_ad_darkroom_auc_target_needs_a_ci_above_zero():
    """AD's area under the curve must be *above* Q-learning's: identical
    curves (a CI of exactly [0, 0]) once met it (``low >= 0``)."""
    from agentrl.evaluate.targets import ad_darkroom

    curve = np.tile(np.linspace(0.0, 1.0, 10), (2, 4, 1))  # [seed, task, episode]
    runs = [EvalResult("ad", c) for c in curve]
    summary = {"ad": {"score_last": {"mean": 0.8, "mean_ci": (0.7, 0.9)}}}
    rows = ad_darkroom("ad", summary, {"ad": runs, "q_learning": runs}, [])
    assert rows[1]["value"] == 0.0 and not rows[1]["met"]
    better = [EvalResult("ad", c + 0.1 + 0.01 * i) for i, c in enumerate(curve)]
    rows = ad_darkroom("ad", summary, {"ad": better, "q_learning": runs}, [])
    assert rows[1]["met"]


# Mutants the tests above let through (session 56's mutation pass).


# ---------------------------------------------------------------- selection


def _select_with(monkeypatch, per_candidate):
    """``select`` over candidates whose validation results are given:
    ``{name: EvalResult}``; no run is opened, nothing is trained."""
    import agentrl.evaluate.selection as selection

    asked = []

    def fake_run_results(run_dir, num_episodes, num_tasks, seed, baselines,
                         tasks, step, eval_overrides, run):  # fmt: skip
        asked.append(tasks)
        return {"m": per_candidate[eval_overrides["acting"]]}, "title"

    monkeypatch.setattr(selection, "load_run", lambda run_dir, step: object())
    monkeypatch.setattr(selection, "run_results", fake_run_results)
    cands = [selection.Candidate(n, "run", None, {"acting": n}) for n in per_candidate]
    sel = selection.select(cands, last_k=1)
    assert asked == ["validation"] * len(cands)
    return sel


def _scored(last):
    """Normalized scores of 2 episodes per task; the last episode's are ``last``."""
    last = np.asarray(last, float)
    norm = np.stack([np.zeros_like(last), last], -1)
    ids = {"task_ids": [1, 2, 3, 4]}
    return EvalResult("m", norm.copy(), normalized=norm, metadata=ids)


def test_select_picks_the_best_and_breaks_ties_to_the_first_listed(monkeypatch):
    # last-episode scores (last_k=1): a and b both average 0.75, c 0.25
    sel = _select_with(
        monkeypatch,
        {
            "a": _scored([1.0, 0.5, 1.0, 0.5]),
            "b": _scored([0.5, 1.0, 0.5, 1.0]),
            "c": _scored([0.25] * 4),
        },
    )
    assert sel.field == "score_last"
    # the tie a = b goes to a, listed first (not b, and never the worst, c)
    assert sel.choice.name == "a"
    # runner-up: b (0.75 > 0.25); paired a - b = [.5, -.5, .5, -.5], mean 0
    assert sel.margin["runner_up"] == "b"
    assert sel.margin["mean"] == pytest.approx(0.0) and sel.margin["tasks"] == 4


def test_select_takes_the_lowest_regret(monkeypatch):
    def regret(final):  # [task, step] cumulative regret ending at ``final``
        final = np.asarray(final, float)
        return EvalResult(
            "m", np.zeros((4, 2)), regret=np.stack([final / 2, final], -1)
        )

    # final regret: a 5, b 2.25, c 8 (means); no oracle, so "auto" is regret
    sel = _select_with(
        monkeypatch,
        {"a": regret([5, 5, 5, 5]), "b": regret([2, 2, 2, 3]), "c": regret([8] * 4)},
    )
    assert sel.field == "regret_final" and sel.choice.name == "b"
    # runner-up: a (-5 > -8); margin -(b - a) = [3, 3, 3, 2], mean 2.75
    assert sel.margin["runner_up"] == "a"
    assert sel.margin["mean"] == pytest.approx(2.75)


def test_the_choice_is_evaluated_once_on_the_test_tasks(monkeypatch):
    """Without a trained run (the ``long`` test's ``tiny_run``): the chosen
    candidate alone, on the test tasks, its selection recorded."""
    import agentrl.evaluate.selection as selection

    calls = []

    def fake_run_results(run_dir, num_episodes, num_tasks, seed, baselines, **kw):
        assert kw["control"] is None and kw["source_cache"] is None
        tasks, step, eval_overrides = kw["tasks"], kw["step"], kw["eval_overrides"]
        calls.append((tasks, step, eval_overrides))
        return {"m": EvalResult("m", np.zeros((2, 2)))}, "t"

    sel = _select_with(monkeypatch, {"a": _scored([0.0] * 4), "b": _scored([1.0] * 4)})
    monkeypatch.setattr(selection, "run_results", fake_run_results)
    results, title = selection.evaluate_choice(sel)
    assert calls == [("test", None, {"acting": "b"})]
    assert results["m"].metadata["selection"]["choice"]["name"] == "b"
    assert "(b, chosen on validation tasks)" in title


def test_auto_criterion_prefers_the_normalized_score_to_regret():
    """A bandit has an oracle and a regret: "auto" is its normalized score
    (the module's rule: score where there is an oracle, else regret)."""
    from agentrl.evaluate.selection import resolve_criterion

    both = {"score_last": {}, "regret_final": {}, "return_last": {}}
    assert resolve_criterion("auto", both) == "score_last"
    assert resolve_criterion("auto", {"regret_final": {}, "return_last": {}}) == (
        "regret_final"
    )
    assert resolve_criterion("auto", {"return_last": {}}) == "return_last"


def test_the_runner_up_tie_goes_to_the_first_listed():
    from agentrl.evaluate.selection import choice_margin

    best = np.array([2.0, 2.0, 2.0, 2.0])
    # b and c both average 1.0 (different per task): the runner-up is b
    values = {"best": best, "b": np.array([0.0, 2.0, 0.0, 2.0]), "c": np.ones(4)}
    m = choice_margin(values, "best", 1.0)
    assert m["runner_up"] == "b"
    # best - b = [2, 0, 2, 0]
    assert m["mean"] == pytest.approx(1.0)


# ---------------------------------------------------------------- controls


def _shuffled(batch=400, n=4):
    """``[batch, n]`` rewards the model is shown under ``shuffle_rewards`` when
    step ``t`` pays ``t + 1`` (distinct, so each shown value names its step)."""
    agent = ControlledAgent(_Seen(n), "shuffle_rewards", n)
    state = agent.init(jax.random.split(jax.random.key(0), batch), None)
    z = jnp.zeros((batch,))
    for t in range(n):
        r = jnp.full((batch,), t + 1.0)
        state = agent.update(state, Step(z, z, r, z, z > 0, z > 0, z))
    return np.asarray(state.inner[0])


def test_a_shuffled_reward_may_be_the_current_one():
    """Drawn uniformly from the rewards paid so far *including the current
    one* (the module): at step 1 (rewards 1, 2 paid) the model is shown 2
    with probability 1/2, at step 3 (1..4 paid) 4 with probability 1/4."""
    seen = _shuffled()
    assert np.all(seen[:, 0] == 1.0)  # one reward paid: shown as itself
    assert 0.35 < np.mean(seen[:, 1] == 2.0) < 0.65  # 1/2, sd 0.025
    assert 0.15 < np.mean(seen[:, 3] == 4.0) < 0.35  # 1/4, sd 0.022
    for t in range(4):
        assert set(np.unique(seen[:, t])) <= set(range(1, t + 2))


def test_each_steps_shuffle_draw_has_a_key_of_its_own():
    """The draws at steps 1 and 3 are independent: the index drawn at step 3
    (uniform on 0..3) has the parity of the one at step 1 (uniform on 0, 1)
    half the time. A key reused at every step makes them agree always (JAX's
    randint of one key: ``randint(k, 0, 4) % 2 == randint(k, 0, 2)``)."""
    seen = _shuffled()
    first, third = seen[:, 1] - 1, seen[:, 3] - 1  # the drawn indices
    assert 0.35 < np.mean(third % 2 == first) < 0.65  # 1/2, sd 0.025


def test_the_paired_difference_reads_the_last_episodes():
    """A method ahead by 5 in the first two of four episodes and level in the
    last two: over the last 2 episodes it is not ahead at all (mean 0)."""
    early = np.tile([5.0, 5.0, 1.0, 1.0], (8, 1))
    level = np.tile([0.0, 0.0, 1.0, 1.0], (8, 1))
    d = paired_difference([EvalResult("a", early)], [EvalResult("b", level)], 2)
    assert d["mean"] == 0.0 and d["pairs"] == 8
    # over all 4 episodes: (5 + 5 + 0 + 0) / 4 = 2.5
    assert paired_difference([EvalResult("a", early)], [EvalResult("b", level)], 4)[
        "mean"
    ] == pytest.approx(2.5)


def test_expert_cut_keeps_the_last_labels_and_successors():
    """The expert dataset's DPT labels (``optimal_action``) and explicit
    successors (``next_obs``) are those of the kept last steps, as obs are."""
    from agentrl.evaluate.controls import _last_steps
    from agentrl.history import History

    steps = jnp.arange(6)[None]  # one task, 6 steps, 3 episodes of 2
    h = History(
        obs=steps,
        action=steps,
        reward=steps.astype(jnp.float32),
        terminated=jnp.zeros((1, 6), bool),
        truncated=jnp.zeros((1, 6), bool),
        episode=jnp.array([[0, 0, 1, 1, 2, 2]]),
        optimal_action=steps + 100,
        task_id=jnp.zeros((1,), jnp.int32),
        params=None,
        next_obs=steps + 200,
    )
    cut = _last_steps(h, 2)  # the last episode: steps 4, 5
    assert cut.obs.tolist() == [[4, 5]]
    assert cut.optimal_action.tolist() == [[104, 105]]
    assert cut.next_obs.tolist() == [[204, 205]]
    assert cut.episode.tolist() == [[0, 0]]


# ------------------------------------------------------------------ splits


def test_validation_is_the_first_part_of_the_held_out_ids():
    """seed 0: ``default_rng(0).permutation(10)`` = [4 6 2 7 3 5 9 0 8 1];
    the first 6 train, held out in order [9, 0, 8, 1]: validation the first
    round(0.5 * 4) = 2 of them, test the rest. Datasets and records store
    these ids, so the cut must not move."""
    s = split_task_ids(10, 0.6, seed=0, validation_share=0.5)
    assert s.train.tolist() == [2, 3, 4, 5, 6, 7]
    assert s.validation.tolist() == [0, 9]
    assert s.test.tolist() == [1, 8]


def test_a_small_validation_share_still_gets_one_task():
    """Held out 5 (seed 0: [5 9 0 8 1]); share 0.05 rounds to 0 tasks, and
    the docstring promises at least one: validation [5], test the other 4."""
    s = split_task_ids(10, 0.5, seed=0, validation_share=0.05)
    assert s.validation.tolist() == [5]
    assert s.test.tolist() == [0, 1, 8, 9]


def test_checkpoint_candidates_are_the_complete_steps_oldest_first(tmp_path):
    # Oldest first, so that a tie in the scan goes to the earlier checkpoint;
    # a step without orbax's metadata (a save cut short) is no candidate.
    from agentrl.evaluate.selection import checkpoint_candidates

    for step in (10, 2, 300, 7):
        (tmp_path / "checkpoints" / str(step)).mkdir(parents=True)
        if step != 7:
            (tmp_path / "checkpoints" / str(step) / "_CHECKPOINT_METADATA").touch()
    cands = checkpoint_candidates(tmp_path, {"acting": "greedy"})
    assert [c.step for c in cands] == [2, 10, 300]
    assert [c.name for c in cands] == ["step2", "step10", "step300"]
    assert all(c.eval == {"acting": "greedy"} for c in cands)
