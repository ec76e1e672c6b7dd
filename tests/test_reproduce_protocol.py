"""agentrl reproduce: per-seed data and splits, paired ratios, seed cache."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import agentrl.evaluate.reproduce as reproduce
import agentrl.evaluate.reproduce_report as reproduce_report
import agentrl.evaluate.seed_results as seed_results
import agentrl.evaluate.targets as targets
from agentrl.envs.tmaze import TMaze
from agentrl.evaluate.controls import CONTEXT_CONTROLS
from agentrl.evaluate.evaluate import EvalResult
from agentrl.evaluate.report import read_results, summarize
from agentrl.evaluate.reproduce_checks import check_comparable
from agentrl.train.experiments import known_experiments, load_experiment


def test_each_training_seed_gets_its_own_data_seed_split_and_eval_key():
    base = load_experiment("ad_darkroom", "cpu")
    configs = [reproduce.seed_config("ad_darkroom", "cpu", s, None) for s in range(3)]
    assert [c.train.seed for c in configs] == [0, 1, 2]
    assert [c.data.seed for c in configs] == [base.data.seed + s for s in range(3)]
    assert [c.eval.seed for c in configs] == [base.eval.seed + s for s in range(3)]
    assert all(c.data.path == "" for c in configs)  # each generates its own data
    from agentrl import envs

    env = envs.make("darkroom")
    splits = [env.task_split(0.8, c.data.seed, 0.5).test.tolist() for c in configs]
    assert splits[0] != splits[1] != splits[2]


def test_expert_episodes_default_to_the_last_fifth_but_cover_the_context():
    config = load_experiment("ad_darkroom", "cpu")  # 60 episodes, ctx 4
    assert reproduce.default_expert_episodes(config) == 12
    smoke = load_experiment("ad_darkroom", "smoke")  # 40 episodes, ctx 2
    assert reproduce.default_expert_episodes(smoke) == 8


def test_paired_ratio_and_its_ci():
    rng = np.random.default_rng(0)
    b = rng.uniform(10, 20, (3, 50))
    a = 1.5 * b + rng.normal(0, 0.5, b.shape)
    ratio, low, high = targets.paired_ratio(a, b)
    assert ratio == pytest.approx(a.mean() / b.mean())
    assert low < ratio < high and 1.4 < low and high < 1.6
    one = targets.paired_ratio(a[:1], b[:1])  # one seed: tasks resampled only
    assert one[1] < one[0] < one[2]


def test_seed_results_round_trip_through_the_cache(tmp_path):
    r = EvalResult("ad", np.arange(6.0).reshape(2, 3), np.ones((2, 3)) / 2)
    r.metadata["task_ids"] = [4, 7]
    path = tmp_path / "seed0-results.json"
    config = reproduce.seed_config("ad_darkroom", "smoke", 0, None)
    seed_results.save(path, {"ad": r}, {"seed": 0, "selection": {"x": 1}}, config)
    results, record = seed_results.load(path, config)
    np.testing.assert_array_equal(results["ad"].returns, r.returns)
    np.testing.assert_array_equal(results["ad"].normalized, r.normalized)
    assert results["ad"].metadata["task_ids"] == [4, 7] and record["seed"] == 0
    # logging cadence changes no result; an evaluation setting does
    sets = {"train.log_every": "7"}
    quiet = reproduce.seed_config("ad_darkroom", "smoke", 0, sets)
    assert seed_results.load(path, quiet)[0]
    longer = reproduce.seed_config(
        "ad_darkroom", "smoke", 0, {"eval.num_episodes": "9"}
    )
    assert seed_results.load(path, longer) == ({}, {})


def test_a_seed_cache_from_other_code_is_evaluated_again(tmp_path, capsys):
    import json

    r = EvalResult("ad", np.zeros((2, 3)))
    path = tmp_path / "seed0-results.json"
    config = reproduce.seed_config("ad_darkroom", "smoke", 0, None)
    seed_results.save(path, {"ad": r}, {"seed": 0}, config)
    assert seed_results.load(path, config)[0]  # the same code: reused
    saved = json.loads(path.read_text())
    for code in ("0" * 64, None):  # other code; a cache that did not record it
        saved["code_sha256"] = code
        path.write_text(json.dumps(saved))
        assert seed_results.load(path, config) == ({}, {})
        assert "agentrl's code" in capsys.readouterr().out


def _runs(values):
    return [EvalResult("m", np.asarray(v, float)) for v in values]


def test_ad_darkroom_targets_name_value_ci_and_verdict():
    rng = np.random.default_rng(1)
    ad = [EvalResult("ad", np.zeros((8, 12)), rng.uniform(0.7, 1.0, (8, 12)))
          for _ in range(2)]  # fmt: skip
    q = [EvalResult("q", np.zeros((8, 12)), rng.uniform(0.0, 0.3, (8, 12)))
         for _ in range(2)]  # fmt: skip
    combined = {"ad": ad, "q_learning": q}
    summary = summarize(combined, resample="both")
    score, auc = targets.targets_for("ad_darkroom", summary, combined, [])
    low = float(score["ci"].strip("[]").split(",")[0])
    assert score["target"] == 0.75 and score["met"] == (low > 0.75)
    assert auc["met"] and auc["value"] > 0.4 and auc["ci"].startswith("[")


@pytest.mark.parametrize(
    "experiment", ["rl2_darkroom", "transformer_ppo_darkroom", "amago_darkroom"]
)
def test_online_darkroom_targets_score_and_gain_from_episode_one(experiment):
    # 8-episode trials: "last 10" is the whole trial; episode 1 scores ~0.1,
    # later ones ~0.5, so the gain is positive and the 0.8 score is not met
    rng = np.random.default_rng(2)
    curve = np.concatenate([np.full((6, 1), 0.1), np.full((6, 7), 0.5)], 1)
    runs = [EvalResult("m", np.zeros((6, 8)), curve + rng.normal(0, 0.01, (6, 8)))
            for _ in range(3)]  # fmt: skip
    combined = {"m": runs}
    summary = summarize(combined, resample="both")
    score, gain = targets.targets_for(experiment, summary, combined, [])
    assert "last 8 episodes" in score["name"] and score["target"] == 0.8
    assert score["value"] == pytest.approx(0.45, abs=0.01) and not score["met"]
    assert gain["value"] == pytest.approx(0.35, abs=0.01) and gain["met"]
    assert gain["ci"].startswith("[")


@pytest.mark.parametrize(
    "experiment", ["rl2_bandit", "transformer_ppo_bandit", "amago_bandit"]
)
def test_online_bandit_target_is_the_paired_regret_ratio_to_thompson(experiment):
    rng = np.random.default_rng(3)

    def runs(scale):
        return [EvalResult("m", np.zeros((40, 1)),
                           regret=np.outer(rng.uniform(5, 15, 40) * scale,
                                           np.linspace(0, 1, 50)))
                for _ in range(2)]  # fmt: skip

    combined = {"m": runs(2.0), "thompson": runs(1.0)}
    summary = summarize(combined, resample="both")
    (ratio,) = targets.targets_for(experiment, summary, combined, [])
    assert ratio["target"] == 1.5 and not ratio["met"] and ratio["ci"].startswith("[")
    assert 1.5 < ratio["value"] < 2.6


def _spread_scores(mean: float, seeds: int = 2, tasks: int = 6) -> list:
    """Runs whose last-10 score averages ``mean`` with a CI wide on both sides."""
    rng = np.random.default_rng(7)
    spread = rng.normal(0.0, 0.4, (seeds, tasks, 1))
    spread -= spread.mean()
    curve = np.full((seeds, tasks, 12), mean) + spread
    return [EvalResult("m", np.zeros((tasks, 12)), c) for c in curve]


@pytest.mark.parametrize(
    ("experiment", "goal"), [("ad_darkroom", 0.75), ("rl2_darkroom", 0.8)]
)
def test_a_score_target_is_met_only_when_its_ci_clears_the_goal(experiment, goal):
    # the point estimate above the goal, the CI across it: not met
    combined = {"m": _spread_scores(goal + 0.05)}
    summary = summarize(combined, resample="both")
    row = targets.targets_for(experiment, summary, combined, [])[0]
    low, high = summary["m"]["score_last"]["mean_ci"]
    assert row["value"] > goal and low < goal < high and not row["met"]
    sure = {"m": _spread_scores(goal + 2.0)}
    assert targets.targets_for(experiment, summarize(sure, resample="both"), sure, [])[
        0
    ]["met"]


@pytest.mark.parametrize(
    ("low", "high", "goal", "higher", "resolved", "met"),
    [
        (0.2, 0.9, 0.5, True, True, False),  # the point estimate may clear it
        (0.6, 0.9, 0.5, True, True, True),
        (0.6, 0.9, 0.5, True, False, False),  # the caller's condition fails
        (0.5, 0.9, 0.5, True, True, False),  # touching the goal is not clearing
        (0.1, 0.4, 0.5, False, True, True),  # a ceiling: the high end below
        (0.1, 0.6, 0.5, False, True, False),
        (float("nan"), 0.9, 0.5, True, True, False),  # no CI clears nothing
    ],
)
def test_a_target_row_is_judged_by_its_whole_ci(low, high, goal, higher, resolved, met):
    value = 0.7 if higher else 0.3  # on the winning side of the goal every time
    row = targets.with_ci("t", value, low, high, goal, higher, resolved=resolved)
    assert row["met"] is met and row["target"] == goal


@pytest.mark.parametrize(
    ("experiment", "goal"), [("dpt_bandit", 1.2), ("rl2_bandit", 1.5)]
)
def test_a_regret_ratio_is_met_only_when_its_ci_is_below_the_goal(experiment, goal):
    rng = np.random.default_rng(8)
    base = rng.uniform(5, 15, (2, 12))

    def runs(final):
        return [EvalResult("m", np.zeros((12, 1)),
                           regret=np.outer(f, np.linspace(0, 1, 20)))
                for f in final]  # fmt: skip

    # the ratio's point estimate under the goal, its CI across it: not met
    noisy = base * (goal - 0.05) * rng.uniform(0.4, 1.6, base.shape)
    noisy *= (goal - 0.05) * base.sum() / noisy.sum()
    combined = {"m": runs(noisy), "thompson": runs(base), "random": runs(base * 10)}
    summary = summarize(combined, resample="both")
    row = targets.targets_for(experiment, summary, combined, [])[0]
    low, high = (float(x) for x in row["ci"].strip("[]").split(","))
    assert row["value"] < goal and low < goal < high and not row["met"]


@pytest.mark.parametrize("rise", [0.0, 5.0])
def test_the_default_target_judges_the_rise_in_context_paired(rise):
    # task-to-task spread far wider than the rise: only pairing resolves it
    rng = np.random.default_rng(5)
    level = rng.normal(0.0, 50.0, (3, 4, 1))  # [seed, task, 1]
    curve = np.concatenate([np.zeros((3, 4, 1)), np.full((3, 4, 11), rise)], -1)
    returns = level + curve + rng.normal(0.0, 0.5, (3, 4, 12))
    combined = {"m": [EvalResult("m", r) for r in returns]}
    summary = summarize(combined, resample="both")
    score, gain = targets.targets_for("ad_halfcheetah_vel", summary, combined, [])
    assert "last 10 episodes minus episode 1" in gain["name"]
    assert gain["value"] == pytest.approx(rise, abs=0.5)
    assert gain["met"] == (rise > 0) and gain["ci"].startswith("[")
    one = {"m": [EvalResult("m", r[:, :1]) for r in returns]}  # nothing after ep 1
    (score,) = targets.targets_for("ad_halfcheetah_vel", summarize(one), one, [])


def test_every_experiment_declares_a_known_target_kind():
    kinds = {name: targets.target_kind(name) for name in known_experiments()}
    assert kinds["ad_darkroom"] == "ad_darkroom"
    assert kinds["amago_bandit"] == kinds["rl2_bandit"] == "online_bandit"
    assert kinds["amago_darkroom"] == "online_darkroom"
    assert kinds["amago_tmaze"] == "memory_probe"
    assert kinds["t2mir_ad_darkroom"] == targets.DEFAULT_KIND  # declares none


class _TurnAt:
    """A T-Maze policy: right along the corridor, then ``"up"`` always (no
    memory: it ignores the cue) or ``"cue"`` (the side the first
    observation showed, kept in its state: memory)."""

    def __init__(self, turn: str):
        self.turn = turn

    def init(self, key, params):
        return jnp.float32(0.0)  # the cue, once seen

    def start(self, state, obs):
        return obs[1]

    def act(self, key, state, obs, env_state, params):
        side = jnp.float32(1.0) if self.turn == "up" else state
        turn = jnp.where(side > 0, 1, 3)  # up, down
        return jnp.where(obs[0] > 0, turn, 0).astype(jnp.int32)

    def update(self, state, step):
        return jnp.where(step.done, step.reset_obs[1], state)


def _tmaze_results(tmp_path, policy: str, seeds: int) -> tuple[dict, list]:
    """Each seed's results of ``policy`` on 60 drawn T-Maze tasks, evaluated
    as a reproduction evaluates them, and run folders holding the preset's
    config (the family the probe reads)."""
    from agentrl.configtools import to_dict
    from agentrl.evaluate.evaluate import evaluate_online
    from agentrl.tables import write_json

    env = TMaze(corridor_length=3)
    config = load_experiment("amago_tmaze", "smoke")
    runs, dirs = [], []
    for seed, key in enumerate(jax.random.split(jax.random.key(5), seeds)):
        tasks_key, eval_key = jax.random.split(key)
        params = jax.vmap(env.sample_params)(jax.random.split(tasks_key, 60))
        runs.append(evaluate_online(env, _TurnAt(policy), params, eval_key, 1, "m"))
        dirs.append(tmp_path / f"seed{seed}")
        write_json(dirs[-1] / "config.json", to_dict(config))
    return {"m": runs}, dirs


@pytest.mark.parametrize("policy, seeds", [("cue", 2), ("up", 2), ("up", 1)])
def test_memory_probe_balances_the_goal_sides_the_results_record(
    tmp_path, policy, seeds
):
    combined, dirs = _tmaze_results(tmp_path, policy, seeds)
    sides = np.stack([r.metadata["task_parameter"]["values"] for r in combined["m"]])
    assert set(np.unique(sides)) == {-1.0, 1.0}  # both sides drawn
    raw = np.mean([TMaze.success(r.returns).mean() for r in combined["m"]])
    summary = summarize(combined, resample="both" if seeds > 1 else "tasks")
    (row,) = targets.targets_for("amago_tmaze", summary, combined, dirs)
    assert row["target"] == 0.5 and "balanced" in row["name"]
    if policy == "cue":
        assert row["value"] == 1.0 and row["met"] and row["ci"] == "[1, 1]"
    else:  # its raw success is the share of up goals; balanced, exactly 0.5
        assert raw == pytest.approx((sides > 0).mean()) and raw != 0.5
        assert row["value"] == 0.5 and not row["met"] and row["ci"] == "[0.5, 0.5]"


def test_balanced_success_is_the_mean_of_the_two_sides_rates():
    # 3 of 4 up goals reached, 1 of 2 down goals: (0.75 + 0.5) / 2
    success = np.array([[1, 1, 1, 0, 1, 0]], bool)
    side = np.array([[1, 1, 1, 1, -1, -1]])
    rate, low, high = targets.balanced_success(success, side)
    assert rate == pytest.approx(0.625) and low <= rate <= high
    assert targets.balanced_success(success, -side)[0] == pytest.approx(0.625)
    one_side = targets.balanced_success(success, np.ones_like(side))
    assert np.isnan(one_side).all()  # nothing to balance: no verdict


def test_an_unknown_target_kind_is_refused_naming_the_experiment(tmp_path):
    path = tmp_path / "my_exp.py"
    path.write_text("PRESETS = {}\nTARGET = 'beats_everyone'\n")
    with pytest.raises(ValueError, match=r"my_exp\.py: TARGET must be one of"):
        targets.target_kind(str(path))


def test_targets_follow_the_kind_the_experiment_declares(tmp_path):
    # the same results judged as an online bandit experiment: the regret ratio
    path = tmp_path / "bandit_like.py"
    path.write_text("PRESETS = {}\nTARGET = 'online_bandit'\n")
    regret = np.outer(np.linspace(5, 15, 20), np.linspace(0, 1, 10))
    runs = lambda k: [EvalResult("m", np.zeros((20, 1)), regret=k * regret)]  # noqa: E731
    combined = {"m": runs(1.0), "thompson": runs(1.0)}
    summary = summarize(combined, resample="tasks")
    (ratio,) = targets.targets_for(str(path), summary, combined, [])
    assert ratio["value"] == pytest.approx(1.0) and ratio["met"]


def test_a_cache_without_controls_is_completed_not_reused(tmp_path, monkeypatch):
    """A --compare run shares a seed's cache but evaluates no controls; a
    later --controls run must add them (it once reused the cache as is)."""
    calls = []

    def fake_seed(config, root, seed, controls, scan, rules):
        calls.append(controls)
        label = config.algo.label
        names = [label, "random"]
        if controls:
            names += [f"{label}/{c}" for c in CONTEXT_CONTROLS]
        return {n: EvalResult(n, np.ones((2, 3))) for n in names}, {"seed": seed}

    def fake_expert(config, root, episodes, rules):
        return EvalResult("ed", np.zeros((2, 3))), {"episodes": episodes}

    monkeypatch.setattr(reproduce, "_seed", fake_seed)
    monkeypatch.setattr(reproduce, "_expert", fake_expert)
    run = dict(name="ad_darkroom", preset="smoke", seeds=1, runs_root=tmp_path)
    label = reproduce.seed_config("ad_darkroom", "smoke", 0, None).algo.label
    first, _, _ = reproduce.train_and_evaluate(**run)  # the --compare side
    assert calls == [False] and f"{label}/zero_rewards" not in first
    both, _, protocol = reproduce.train_and_evaluate(**run, controls=True)
    assert calls == [False, True]
    expected = {label, "random", f"{label}/expert_distillation"}
    expected |= {f"{label}/{c}" for c in CONTEXT_CONTROLS}
    assert set(both) == expected and "expert_distillation" in protocol[0]
    again, _, _ = reproduce.train_and_evaluate(**run, controls=True)
    assert calls == [False, True] and set(again) == expected  # now reused


def test_checkpoint_scan_becomes_a_report_line_only_when_every_seed_has_one():
    def scan(*values):
        return {
            f"step{s}": {"mean": v, "ci": [v, v], "step": s}
            for s, v in zip((4000, 8000), values, strict=True)
        }

    recs = [{"checkpoint_scan": scan(0.8, 0.85)}, {"checkpoint_scan": scan(0.6, 0.75)}]
    line = reproduce_report._scan_note("dpt_bandit", recs)
    assert "step 4000 0.700 (0.800, 0.600)" in line
    assert "step 8000 0.800 (0.850, 0.750)" in line
    assert reproduce_report._scan_note("dpt_bandit", [recs[0], {}]) is None
    # the value scanned is the selection's field (older records: its rule)
    recs[0]["selection"] = {"field": "normalized_last", "rule": "ignored"}
    assert "value: mean normalized_last;" in reproduce_report._scan_note("x", recs)
    recs[0]["selection"] = {"rule": "max over candidates of mean r on validation"}
    assert "value: mean r;" in reproduce_report._scan_note("x", recs)


@pytest.mark.parametrize(
    "experiment, sets",
    [
        ("rl2_darkroom", []),
        ("dpt_bandit", []),
        # the preset distills Q-learning's histories; --set swaps them for
        # random play, and the report must judge by the run's config too
        ("ad_darkroom", ["--set", "data.source=random"]),
    ],
)
def test_without_learning_histories_the_context_controls_and_no_expert_run(
    tmp_path, monkeypatch, experiment, sets
):
    """RL² (trained online by RL, no dataset), DPT (distilled from random
    roll-ins, which do not learn) and AD told to distill random play:
    --controls evaluates the three context controls, trains no
    expert-distillation control (there are no converged episodes to keep)
    and the verdict judges the method against those three."""
    import json

    rng = np.random.default_rng(0)
    calls = []

    bandit = "bandit" in experiment  # its targets read cumulative regret

    def fake_seed(config, root, seed, controls, scan, rules):
        calls.append(controls)
        label = config.algo.label
        names = [label, "random", *(f"{label}/{c}" for c in CONTEXT_CONTROLS)]
        scores = {n: (0.9 if n == label else 0.1) for n in names}
        if bandit:
            scores["thompson"] = 0.95

        def regret(s):
            return np.cumsum(np.full((6, 12), 1.0 - s), 1) if bandit else None

        return {
            n: EvalResult(n, 10 * s + rng.normal(0, 0.1, (6, 12)),
                          s + rng.normal(0, 0.01, (6, 12)), regret(s))
            for n, s in scores.items()
        }, {"seed": seed, "selection": {"choice": {"name": "sample"}}}  # fmt: skip

    def no_expert(*args):
        raise AssertionError(f"expert distillation trained for {experiment}")

    monkeypatch.setattr(reproduce, "_seed", fake_seed)
    monkeypatch.setattr(reproduce, "_expert", no_expert)
    monkeypatch.setenv("AGENTRL_BENCH_RESULTS", str(tmp_path / "results"))
    reproduce.main([experiment, "--preset", "smoke", "--seeds", "1",
                    "--controls", "--runs", str(tmp_path / "runs"), *sets])  # fmt: skip
    assert calls == [True]
    suffix = reproduce_report.ablation_suffix(reproduce.parse_sets(sets[1::2]))
    tag = f"repro_{experiment}_smoke{suffix}"
    saved = read_results(tmp_path / "results" / tag)
    label = load_experiment(experiment, "smoke").algo.label
    controls = {f"{label}/{c}" for c in CONTEXT_CONTROLS}
    assert controls <= set(saved["runs"])
    assert f"{label}/expert_distillation" not in saved["runs"]
    meta = json.loads((tmp_path / "results" / f"{tag}.json").read_text())
    verdict = meta["results"]["verdict"]
    assert set(verdict["controls"]) == set(CONTEXT_CONTROLS)
    assert verdict["missing"] == [] and verdict["not_applicable"] == [
        "expert_distillation"
    ]
    assert verdict["learns_in_context"]  # beats the three that apply
    assert "expert_distillation" not in meta["results"]["protocol"][experiment][0]
    names = [t["name"] for t in meta["targets"]]
    assert f"{label} learns in context (beats all 3 controls)" in names
    md = (tmp_path / "results" / f"{tag}.md").read_text()
    assert "expert-distillation control does not apply" in md


@pytest.mark.long
def test_every_online_preset_has_validation_and_test_tasks_for_each_seed():
    """Reproductions of online learners choose the acting rule on validation
    tasks: every preset's run records a split with validation *and* test
    tasks, apart from the train ids it trains on, for every training seed
    (a reproduction once stopped here on a split without validation ids)."""
    from agentrl.envs import make as make_env
    from agentrl.online.program import task_split_json
    from agentrl.train.experiments import known_experiments, load_module
    from agentrl.train.rundir import held_out_params

    checked = 0
    for name in known_experiments():
        for preset in load_module(name).PRESETS:
            config = load_experiment(name, preset)
            if not config.algo.trains_online:
                continue
            env = make_env(config.data.env, **dict(config.data.env_args))
            if env.num_tasks is None:  # held-out tasks are fresh draws
                continue
            for seed in (0, 4):
                data = reproduce.seed_config(name, preset, seed, None).data
                split = task_split_json(env, data)
                train = set(env.task_split(data.split_fraction, data.seed).train)
                for which in ("validation", "test"):
                    _, ids = held_out_params(env, split, None, 0, which)
                    assert ids and not set(ids) & train, (name, preset, which)
                checked += 1
    assert checked >= 8  # rl2_darkroom and transformer_ppo_darkroom presets


def test_the_record_says_which_seeds_choices_were_resolved():
    def rec(seed, resolved, mean=0.1, ci=(0.02, 0.2), tasks=16):
        margin = {"runner_up": "greedy", "mean": mean, "ci": list(ci), "tasks": tasks}
        return {"seed": seed, "selection": {"margin": {**margin, "resolved": resolved}}}

    note = reproduce_report._margin_note(
        "ad", [rec(0, True), rec(1, False, 0.03, (-0.1, 0.2))]
    )
    assert "in 1 of 2 seeds" in note and "on 16 validation tasks" in note
    assert "seed 1: +0.03 [-0.1, 0.2] over greedy" in note and "seed 0:" not in note
    assert reproduce_report._margin_note("ad", [rec(0, True)]).endswith(
        "in 1 of 1 seeds."
    )
    # a seed whose rules all scored alike has no rival, and is said apart
    alike = {"seed": 2, "selection": {"margin": None}}
    note = reproduce_report._margin_note("ad", [rec(0, True), alike])
    assert "in 1 of 1 seeds; 1 without a rival" in note
    assert "no rival in any seed" in reproduce_report._margin_note("ad", [alike])
    # a CI above 0 over 2 tasks (an older record's "resolved") is not resolved
    note = reproduce_report._margin_note("ad", [rec(0, True, tasks=2)])
    assert "in 0 of 1 seeds" in note and "fewer than 6 validation tasks" in note
    # records made before selections kept their margin say nothing
    old = {"seed": 0, "selection": {"choice": {"name": "sample"}}}
    assert reproduce_report._margin_note("ad", [rec(1, True), old]) is None


def test_the_record_names_its_training_seeds():
    def protocol(*seeds):
        return {"ad": [{"seed": s} for s in seeds], "dt": [{"seed": 0}]}

    assert reproduce_report._seed_range(protocol(5, 6, 7, 8, 9)) == (
        "Training seeds 5-9. "
    )
    assert reproduce_report._seed_range(protocol(0, 2)) == "Training seeds 0, 2. "
    assert reproduce_report._seed_range(protocol(3)) == "Training seed 3. "
    assert reproduce_report._seed_range({"ad": [{}]}) == ""  # an older record
    assert reproduce_report._seed_range(None) == ""


def test_an_experiment_given_as_a_path_runs_under_runs_by_its_name(
    tmp_path, monkeypatch
):
    """``agentrl reproduce path/to/exp.py``: the runs go under ``--runs`` and
    the record is named by the experiment's own name (the runs once went
    beside the .py file, and the record into folders named after its path)."""
    import shutil
    from pathlib import Path

    mine = tmp_path / "mine"
    mine.mkdir()
    path = mine / "my_copy.py"  # its config is still named "ad_darkroom"
    shutil.copy(Path(__file__).parents[1] / "experiments" / "ad_darkroom.py", path)

    def fake_seed(config, root, seed, controls, scan, rules):
        label, ones = config.algo.label, np.ones((2, 3))
        runs = {n: EvalResult(n, ones, ones / 2) for n in (label, "random")}
        return runs, {"seed": seed, "selection": {"choice": {"name": "sample"}}}

    monkeypatch.setattr(reproduce, "_seed", fake_seed)
    runs, out = tmp_path / "runs", tmp_path / "out"
    argv = [str(path), "--preset", "smoke", "--seeds", "1"]
    assert reproduce.main(argv + ["--runs", str(runs), "--out", str(out)]) == 0
    assert sorted(p.name for p in mine.iterdir()) == ["my_copy.py"]
    assert (runs / "ad_darkroom-smoke-seed0-results.json").is_file()
    assert (out / "repro_ad_darkroom_smoke.json").is_file()
    assert sorted(p.name for p in out.iterdir()) == [
        "repro_ad_darkroom_smoke",
        "repro_ad_darkroom_smoke.json",
        "repro_ad_darkroom_smoke.md",
    ]


def _variant(tmp_path, name):
    """A copy of ``ad_darkroom.py`` under another file, named ``name``."""
    from pathlib import Path

    source = Path(__file__).parents[1] / "experiments" / "ad_darkroom.py"
    text = source.read_text()
    assert text.count('name="ad_darkroom"') == 1
    path = tmp_path / "my_ad.py"
    path.write_text(text.replace('name="ad_darkroom"', f'name="{name}"'))
    return str(path)


def test_a_variant_of_the_learners_algorithm_is_compared_under_its_own_name(
    tmp_path, monkeypatch
):
    """``reproduce my_ad.py --compare ad_darkroom``: both learners are AD, so
    both report as "ad"; the compared one is reported by its experiment's
    name, not dropped (its results once merged into the learner's and the
    paired difference was the learner minus itself, 0)."""
    import json

    def fake_seed(config, root, seed, controls, scan, rules):
        level = 0.8 if config.name == "my_ad" else 0.5
        values = {config.algo.label: level, "random": 0.1}
        runs = {
            n: EvalResult(n, np.full((2, 3), 10 * v), np.full((2, 3), v))
            for n, v in values.items()
        }
        for r in runs.values():  # as every Dark Room evaluation records them
            r.metadata["task_ids"] = [3, 5]
        return runs, {"seed": seed, "selection": {"choice": {"name": "sample"}}}

    monkeypatch.setattr(reproduce, "_seed", fake_seed)
    out = tmp_path / "out"
    argv = [_variant(tmp_path, "my_ad"), "--compare", "ad_darkroom"]
    argv += ["--preset", "smoke", "--seeds", "2", "--runs", str(tmp_path / "runs")]
    assert reproduce.main(argv + ["--out", str(out)]) == 0
    tag = "repro_my_ad_vs_ad_darkroom_smoke"
    saved = read_results(out / tag)
    assert sorted(saved["runs"]) == ["ad", "ad_darkroom", "random"]
    assert saved["runs"]["ad"][0]["returns"][0][0] == 8.0
    assert saved["runs"]["ad_darkroom"][0]["returns"][0][0] == 5.0
    targets = json.loads((out / f"{tag}.json").read_text())["targets"]
    paired = [t for t in targets if t["name"].startswith("ad minus ad_darkroom")]
    assert len(paired) == 1 and paired[0]["value"] == pytest.approx(3.0)


def test_two_experiments_of_one_name_are_refused_before_any_run(tmp_path):
    """A copy that keeps the learner's ``name`` would share its run folders,
    seed caches and results: refused, naming the field, nothing written."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    argv = [_variant(tmp_path, "ad_darkroom"), "--compare", "ad_darkroom"]
    argv += ["--preset", "smoke", "--runs", str(runs), "--out", str(out)]
    with pytest.raises(ValueError, match="both experiments are named 'ad_darkroom'"):
        reproduce.main(argv)
    assert not runs.exists() and not out.exists()


def test_an_edited_experiment_is_evaluated_again_not_read_from_its_cache(
    tmp_path, monkeypatch, capsys
):
    """A seed's cache is named by experiment, preset and ``--set`` only; one
    written with other settings (the file edited, or two ablations whose
    names meet) was once reused silently. Now it is redone, saying why."""
    calls = []

    def fake_seed(config, root, seed, controls, scan, rules):
        calls.append(config.eval.num_episodes)
        runs = {
            n: EvalResult(n, np.ones((2, config.eval.num_episodes)))
            for n in ("ad", "random")
        }
        return runs, {"seed": seed}

    monkeypatch.setattr(reproduce, "_seed", fake_seed)
    path = _variant(tmp_path, "my_ad")
    run = dict(name=path, preset="smoke", seeds=1, runs_root=tmp_path / "runs")
    reproduce.train_and_evaluate(**run)
    reproduce.train_and_evaluate(**run)  # unchanged: read back
    assert calls == [6]
    text = open(path).read()
    assert text.count('"eval.num_episodes": 6') == 1
    open(path, "w").write(
        text.replace('"eval.num_episodes": 6', '"eval.num_episodes": 9')
    )
    again, _, _ = reproduce.train_and_evaluate(**run)
    assert calls == [6, 9] and again["ad"][0].returns.shape == (2, 9)
    assert "eval.num_episodes: 6 -> 9" in capsys.readouterr().out


def test_train_seed_set_by_the_user_is_offset_per_seed_not_dropped():
    base = reproduce.seed_config("ad_darkroom", "smoke", 1, None)
    moved = reproduce.seed_config("ad_darkroom", "smoke", 1, {"train.seed": "7"})
    assert (base.train.seed, moved.train.seed) == (1, 8)
    assert moved.data.seed == base.data.seed and moved.eval.seed == base.eval.seed


def test_the_compared_learners_cached_controls_are_not_the_learners(
    tmp_path, monkeypatch
):
    """``ad_darkroom --controls`` then ``my_ad.py --compare ad_darkroom``
    (both AD): the partner's cached controls once entered the record as the
    learner's own, and the verdict judged ``my_ad`` against them."""
    import json

    def fake_seed(config, root, seed, controls, scan, rules):
        label = config.algo.label
        names = [label, "random"] + [
            f"{label}/{c}" for c in CONTEXT_CONTROLS
        ] * controls
        runs = {n: EvalResult(n, np.ones((2, 3)), np.ones((2, 3)) / 2) for n in names}
        for r in runs.values():  # as every Dark Room evaluation records them
            r.metadata["task_ids"] = [3, 5]
        return runs, {"seed": seed, "selection": {"choice": {"name": "sample"}}}

    monkeypatch.setattr(reproduce, "_seed", fake_seed)
    monkeypatch.setattr(reproduce, "_has_expert_control", lambda config: False)
    common = ["--preset", "smoke", "--seeds", "1", "--runs", str(tmp_path / "runs")]
    out = ["--out", str(tmp_path / "out")]
    assert reproduce.main(["ad_darkroom", "--controls", *common, *out]) == 0
    argv = [_variant(tmp_path, "my_ad"), "--compare", "ad_darkroom", *common, *out]
    assert reproduce.main(argv) == 0
    tag = tmp_path / "out" / "repro_my_ad_vs_ad_darkroom_smoke"
    saved = read_results(tag)
    assert sorted(saved["runs"]) == ["ad", "ad_darkroom", "random"]
    meta = json.loads(tag.with_suffix(".json").read_text())
    assert not any("control" in t["name"] for t in meta["targets"])


def test_a_compare_on_other_tasks_or_episodes_is_refused_before_any_run(
    tmp_path, monkeypatch
):
    """DPT's Dark Room (10x10, horizon 100, 40 episodes) against AD's (9x9,
    20, 50): "paired" by index, it once compared different tasks."""

    def no_training(*args):
        raise AssertionError("a seed was trained")

    monkeypatch.setattr(reproduce, "_seed", no_training)
    runs = tmp_path / "runs"
    argv = ["dpt_darkroom", "--compare", "ad_darkroom", "--preset", "cpu"]
    with pytest.raises(
        ValueError, match=r"differ in data.env_args .*eval.num_episodes 40 vs 50"
    ):
        reproduce.main(argv + ["--runs", str(runs)])
    assert not runs.exists()


def test_a_compare_across_held_out_modes_is_refused():
    """XLand files split by the file's rulesets or by the table's: other
    test rulesets, so no pairs."""
    path = {"data.path": "xland.hdf5"}
    file = load_experiment("xland_ad", "smoke", {**path, "name": "by_file"})
    table = load_experiment(
        "xland_ad", "smoke", {**path, "name": "by_table", "data.held_out": "table"}
    )
    with pytest.raises(ValueError, match="differ in data.held_out 'file' vs 'table'"):
        check_comparable([file, table])


def test_other_expert_episodes_distil_the_control_again(tmp_path, monkeypatch):
    """``--expert-episodes`` changed after a ``--controls`` run: the cached
    control is redone, and a ``-expert`` run trained on the old count is
    removed before distilling (resuming it would keep its weights)."""
    import json

    real_expert, episodes = reproduce._expert, []

    def fake_seed(config, root, seed, controls, scan, rules):
        names = ["ad", "random"] + [f"ad/{c}" for c in CONTEXT_CONTROLS]
        return {n: EvalResult(n, np.ones((2, 3))) for n in names}, {"seed": seed}

    def fake_expert(config, root, n, rules):
        episodes.append(n)
        return EvalResult("ed", np.zeros((2, 3))), {"episodes": n}

    monkeypatch.setattr(reproduce, "_seed", fake_seed)
    monkeypatch.setattr(reproduce, "_expert", fake_expert)
    run = dict(name="ad_darkroom", preset="smoke", seeds=1, runs_root=tmp_path)
    for n in (2, 2, 4):
        reproduce.train_and_evaluate(**run, controls=True, expert_episodes=n)
    assert episodes == [2, 4]

    expert = tmp_path / "ad_darkroom-smoke-seed0-expert"
    expert.mkdir()
    source = {"dataset_source": {"settings": {"expert_episodes": 2}}}
    (expert / "run.json").write_text(json.dumps(source))

    def stop_at_data(*args, **kwargs):
        raise RuntimeError(f"-expert kept: {expert.exists()}")

    monkeypatch.setattr(reproduce.ctl, "expert_dataset", stop_at_data)
    config = reproduce.seed_config("ad_darkroom", "smoke", 0, None)
    root = tmp_path / "ad_darkroom-smoke-seed0"
    with pytest.raises(RuntimeError, match="-expert kept: True"):
        real_expert(config, root, 2, None)  # the same count: resumed
    with pytest.raises(RuntimeError, match="-expert kept: False"):
        real_expert(config, root, 4, None)
