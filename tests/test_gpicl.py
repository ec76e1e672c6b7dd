"""The GPICL study's pieces: N distinct training tasks, train-task scores, plot.

``data.num_train_tasks`` restricts the training histories to N distinct
tasks (finite and continuous families), held-out tasks stay disjoint, the
histories are really made on those N tasks, and a sweep with
``eval_train_tasks`` reports both scores and draws ``transition.png``.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import agentrl.configtools as configtools
from agentrl.data.reader import open_dataset
from agentrl.data.task_plan import plan_tasks, training_tasks
from agentrl.data.writer import write_dataset
from agentrl.envs.registry import make as make_env
from agentrl.sources.registry import source_histories
from agentrl.sweep.grid import check_train_task_eval, make_grid
from agentrl.sweep.report import plot_transition, setting_rows
from agentrl.train.config import DataConfig
from agentrl.train.experiments import load_experiment
from agentrl.train.rundir import held_out_params

PNG = b"\x89PNG\r\n\x1a\n"


def test_finite_family_restricted_to_n_tasks():
    env = make_env("darkroom")
    full = plan_tasks(env, 40, 0.8, seed=3)
    plan = plan_tasks(env, 40, 0.8, seed=3, num_train_tasks=5)
    ids = plan.task_ids["train"]
    assert len(ids) == 40 and len(set(ids.tolist())) == 5
    # every distinct task trains 8 times: the histories cycle over them
    assert sorted(np.bincount(ids)[np.unique(ids)].tolist()) == [8] * 5
    assert set(ids.tolist()) <= set(plan.split.train.tolist())
    held_out = set(plan.split.validation.tolist()) | set(plan.split.test.tolist())
    assert held_out and not held_out & set(ids.tolist())
    # the held-out split is the unrestricted one's
    assert np.array_equal(plan.split.test, full.split.test)
    assert np.array_equal(plan.split.validation, full.split.validation)


def test_continuous_family_restricted_to_n_tasks():
    env = make_env("gaussian_bandit", num_arms=3, horizon=4)
    plan = plan_tasks(env, 50, 0.8, seed=0, num_train_tasks=4)
    ids = plan.task_ids["train"]
    assert len(ids) == 40 and len(set(ids.tolist())) == 4
    assert not set(ids.tolist()) & set(plan.task_ids["test"].tolist())
    unrestricted = plan_tasks(env, 50, 0.8, seed=0).task_ids["train"]
    assert len(set(unrestricted.tolist())) == 40


@pytest.mark.parametrize("bad", [0, 41, 2.5, True])
def test_bad_num_train_tasks_is_refused(bad):
    env = make_env("gaussian_bandit", num_arms=3, horizon=4)
    with pytest.raises(ValueError, match="data.num_train_tasks"):
        plan_tasks(env, 50, 0.8, seed=0, num_train_tasks=bad)


def test_config_checks_num_train_tasks():
    with pytest.raises(ValueError, match="data.num_train_tasks"):
        DataConfig(num_train_tasks=0)
    with pytest.raises(ValueError, match="data.num_train_tasks"):
        DataConfig(num_tasks=8, num_train_tasks=9)
    assert DataConfig(num_tasks=8, num_train_tasks=8).num_train_tasks == 8


def test_histories_are_made_on_the_n_tasks(tmp_path):
    """The records' own params (stored with each history) are N distinct
    bandits, the ones :func:`training_tasks` rebuilds; held-out bandits are
    none of them."""
    env = make_env("gaussian_bandit", num_arms=3, horizon=4)
    histories = source_histories("random", env)
    out = write_dataset(
        tmp_path / "d", env, histories, 20, 1, seed=5, num_train_tasks=3
    )
    dataset = open_dataset(out)
    assert dataset.metadata["num_train_tasks"] == 3
    assert dataset.summary()["split"]["distinct_train_tasks"] == 3
    stored = np.asarray(dataset.load_history("train").params.means)
    distinct = np.unique(stored.round(6), axis=0)
    assert len(stored) == 16 and len(distinct) == 3
    params, ids = training_tasks(env, dataset.metadata)
    rebuilt = np.asarray(params.means)
    assert len(ids) == 3
    np.testing.assert_allclose(np.unique(rebuilt.round(6), axis=0), distinct)
    held, _ = held_out_params(env, dataset.metadata["split"], 32, seed=1234)
    gaps = np.abs(np.asarray(held.means)[:, None] - rebuilt[None]).max(-1)
    assert gaps.min() > 1e-4  # no held-out bandit is a training bandit


def test_a_runs_training_bandits_are_its_datasets(tmp_path):
    """``agentrl eval --split train`` on a continuous family: the distinct
    bandits the run's histories were made on, rebuilt from its dataset (a
    seeded draw of them where more are asked for fewer), never an online
    learner's."""
    from agentrl.train.rundir import Run

    env = make_env("gaussian_bandit", num_arms=3, horizon=4)
    histories = source_histories("random", env)
    write_dataset(tmp_path / "run" / "dataset", env, histories, 40, 1, seed=5,
                  num_train_tasks=6)  # fmt: skip
    stored = np.asarray(
        open_dataset(tmp_path / "run" / "dataset").load_history("train").params.means
    )
    config = load_experiment("gpicl_bandit", "smoke")
    run = Run(tmp_path / "run", config, None, env, None, 0)  # no model needed
    params, ids = run.held_out(8, 0, "train")
    assert ids is None and np.asarray(params.means).shape == (6, 3)  # all 6
    np.testing.assert_allclose(
        np.unique(np.asarray(params.means).round(6), axis=0),
        np.unique(stored.round(6), axis=0),
    )
    four = [np.asarray(run.held_out(4, seed, "train")[0].means) for seed in (0, 0, 1)]
    assert four[0].shape == (4, 3) and np.array_equal(four[0], four[1])
    assert not np.array_equal(four[0], four[2])  # seeded draws
    assert (np.abs(four[0][:, None] - stored[None]).max(-1).min(-1) < 1e-6).all()
    # an explicit --tasks beyond them is refused, not quietly fewer
    from agentrl.evaluate.run import _held_out

    with pytest.raises(ValueError, match="train split has only 6 tasks"):
        _held_out(run, env, None, 8, 0, "train")
    online = Run(tmp_path / "run", load_experiment("rl2_bandit", "smoke"), None, env,
                 None, 0)  # fmt: skip
    with pytest.raises(ValueError, match="learns online"):
        online.held_out(4, 0, "train")


def test_train_task_eval_needs_a_dataset_learner():
    config = load_experiment("rl2_bandit", "smoke")
    with pytest.raises(ValueError, match="trained online"):
        check_train_task_eval(config, True, True)
    gpicl = load_experiment("gpicl_bandit", "smoke")
    with pytest.raises(ValueError, match="--no-eval"):
        check_train_task_eval(gpicl, False, True)
    check_train_task_eval(gpicl, True, True)
    with pytest.raises(ValueError, match="data.num_train_tasks"):
        make_grid(config, {"num_train_tasks": ["4", "8"]})
    grid = make_grid(gpicl, {"num_train_tasks": ["4", "None"], "d_model": [8, 16]})
    assert grid.static["data.num_train_tasks"] == (4, None)


def test_a_sweep_refuses_a_setting_its_data_cannot_hold_before_training(
    tmp_path, monkeypatch
):
    """N above the split's training histories (51 of the smoke preset's 64)
    in the last cell: refused before the first cell trains or anything is
    written."""
    import agentrl.sweep.run as sweep_run

    def no_training(*args, **kwargs):
        raise AssertionError("a setting was trained")

    monkeypatch.setattr(sweep_run, "_static_setting", no_training)
    config = load_experiment("gpicl_bandit", "smoke")
    with pytest.raises(ValueError, match=r"data.num_train_tasks.*\[1, 51\]"):
        sweep_run.run_sweep(config, [0], {"num_train_tasks": [4, 60]}, tmp_path / "s")
    assert not (tmp_path / "s").exists()


def test_cli_refuses_train_task_scores_for_an_online_learner(capsys):
    from agentrl.cli import main

    assert main(["sweep", "rl2_bandit", "--eval-train-tasks"]) == 2
    err = capsys.readouterr().err
    assert "trained online" in err and "Traceback" not in err


def _rows(rng):
    rows = []
    for width in (8, 16):
        for n in (4, 16, None):
            fields = {"data.num_train_tasks": n, "model.d_model": width}
            metrics = {"loss": rng.normal(size=(3, 20))}
            held = rng.uniform(size=(3, 8))
            train = held + (0.5 if n == 4 else 0.0)
            rows.append(setting_rows(f"n={n}", fields, metrics, held, train))
    return rows


def test_rows_and_transition_plot(tmp_path):
    rows = _rows(np.random.default_rng(0))
    assert all("train_score_ci_low" in r for r in rows)
    np.testing.assert_allclose(rows[0]["generalization_gap"], 0.5, atol=1e-9)
    assert abs(rows[1]["generalization_gap"]) < 1e-9
    path = plot_transition(tmp_path / "transition.png", rows, "data.num_train_tasks")
    assert path.read_bytes()[:8] == PNG


@pytest.mark.long
def test_tiny_sweep_reports_train_and_held_out(tmp_path):
    """Two values of N: both scores per cell and transition.png; the held-out
    scores are those of a sweep that does not score the training tasks."""
    from agentrl.sweep.run import run_sweep

    config = load_experiment("gpicl_bandit", "smoke", {"train.steps": 6})
    config = configtools.override(config, {"eval.num_tasks": 4})
    grid = {"num_train_tasks": [2, 8]}
    outcome = run_sweep(
        config, [0, 1], grid, tmp_path / "s", progress=False, eval_train_tasks=True
    )
    assert [r["data.num_train_tasks"] for r in outcome.rows] == [2, 8]
    for row in outcome.rows:
        assert 0 <= row["train_score_ci_low"] <= row["train_score"] + 1e-9
        assert np.isfinite(row["generalization_gap"])
    assert outcome.paths["transition"].read_bytes()[:8] == PNG
    assert "train_score" in outcome.paths["md"].read_text()
    plain = run_sweep(config, [0, 1], grid, tmp_path / "plain", progress=False)
    assert "transition" not in plain.paths
    for a, b in zip(outcome.rows, plain.rows, strict=True):
        assert "train_score" not in b and "train_task_scores" not in b
        np.testing.assert_allclose(a["score"], b["score"], rtol=1e-6)
        np.testing.assert_allclose(a["task_scores"], b["task_scores"], rtol=1e-6)
        assert np.shape(a["task_scores"]) == (2, 4)  # [seed, task]
    # every N faces the same held-out bandits (pairable), not the same training ones
    assert len({r["task_set"] for r in outcome.rows + plain.rows}) == 1
    assert len({r["train_task_set"] for r in outcome.rows}) == 2


def _benchmark():
    """``benchmarks/gpicl_bandit.py`` as a module.

    By path, under its own name: ``gpicl_bandit`` is also the experiment's
    module, which an earlier test in this process may have imported.
    """
    import importlib.util
    import sys
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "benchmarks"
    sys.path.insert(0, str(folder))  # its ``import common``
    spec = importlib.util.spec_from_file_location(
        "gpicl_bandit_benchmark", folder / "gpicl_bandit.py"
    )
    gpicl_bandit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpicl_bandit)
    return gpicl_bandit


def test_the_benchmark_calls_a_rise_only_when_the_cis_are_apart():
    gpicl_bandit = _benchmark()

    def row(n, score, low, high, train=0.5):
        return {
            "data.num_train_tasks": n,
            "model.d_model": 64,
            "score": score,
            "score_ci_low": low,
            "score_ci_high": high,
            "generalization_gap": train - score,
        }

    noisy = gpicl_bandit._targets(
        [row(4, 0.49, 0.39, 0.59, 0.76), row(16384, 0.50, 0.43, 0.56)]
    )
    memorised, _, rise = noisy
    assert memorised["met"] and not rise["met"]  # +0.01 inside the noise
    assert rise["value"] == pytest.approx(0.43 - 0.59)
    assert rise["paired"] is None and "task_scores" in rise["unpaired_because"]
    clear = gpicl_bandit._targets([row(16384, 0.8, 0.7, 0.9), row(4, 0.4, 0.3, 0.5)])
    assert clear[2]["met"] and clear[2]["value"] == pytest.approx(0.2)


def _paired_rows(offset: float, held_out: tuple[str, str] = ("h", "h")):
    """The smallest and largest N of one width, on the same held-out tasks
    (``held_out`` names their task sets): a wide task-to-task spread and
    the largest N ``offset`` higher on every (seed, task)."""
    rng = np.random.default_rng(5)
    small = rng.uniform(0.0, 0.8, size=32) + rng.normal(0, 0.01, size=(3, 32))
    rows = []
    for n, held, name in ((4, small, held_out[0]), (64, small + offset, held_out[1])):
        fields = {"data.num_train_tasks": n, "model.d_model": 64}
        metrics = {"loss": np.ones((3, 10))}
        train = held + 0.2
        rows.append(setting_rows(f"n={n}", fields, metrics, held, train, task_set=name))
    return rows


def test_the_benchmark_judges_the_rise_paired_when_it_can():
    """A constant rise the overlapping CIs cannot tell is resolved by the
    pairs; cells on different held-out tasks fall back to CI to CI."""
    gpicl_bandit = _benchmark()
    small, large = _paired_rows(0.05)
    assert large["score_ci_low"] < small["score_ci_high"]  # CI to CI: no rise
    rise = gpicl_bandit._targets([large, small])[2]
    assert rise["met"] and "paired over 96 (seed, task) pairs" in rise["name"]
    assert rise["paired"]["mean"] == pytest.approx(0.05, abs=1e-9)
    assert rise["value"] == pytest.approx(rise["paired"]["ci"][0]) and rise["value"] > 0
    fell = gpicl_bandit._targets(_paired_rows(-0.05))[2]
    assert not fell["met"] and fell["paired"]["ci"][1] < 0
    apart = gpicl_bandit._targets(_paired_rows(0.05, ("h", "other")))[2]
    assert apart["paired"] is None and "different tasks" in apart["unpaired_because"]
    assert not apart["met"] and "CI to CI" in apart["name"]
    assert apart["value"] == pytest.approx(
        large["score_ci_low"] - small["score_ci_high"]
    )


def _gap_row(n: int, held: np.ndarray, train: np.ndarray) -> dict:
    """A cell whose held-out and training-task scores are ``[seed, task]``."""
    fields = {"data.num_train_tasks": n, "model.d_model": 64}
    metrics = {"loss": np.ones((held.shape[0], 10))}
    return setting_rows(f"n={n}", fields, metrics, held, train, task_set="h")


def test_the_benchmark_judges_the_gap_by_its_ci():
    """Generalisation is met only when the train - held-out gap's CI lies in
    [-0.05, 0.05] (a gap of 0 over wide scores is not shown); memorisation
    only when it lies above 0.1."""
    gpicl_bandit = _benchmark()
    rng = np.random.default_rng(3)
    wide = rng.uniform(-0.5, 1.5, size=(3, 32))  # the same mean, a wide spread
    narrow = 0.6 + rng.normal(0, 0.01, size=(3, 32))
    noisy = _gap_row(64, wide, wide[:, ::-1].copy())
    assert abs(noisy["generalization_gap"]) < 0.05  # the point estimate agrees
    generalised = gpicl_bandit._targets([_gap_row(4, narrow, narrow + 0.3), noisy])
    memorised, general, _ = generalised
    assert not general["met"] and general["gap"]["ci"][0] < -0.05
    assert general["value"] == pytest.approx(max(map(abs, general["gap"]["ci"])))
    assert memorised["met"] and memorised["gap"]["ci"][0] > 0.25
    tight = gpicl_bandit._targets(
        [_gap_row(4, wide, wide + 0.15), _gap_row(64, narrow, narrow)]
    )
    assert tight[1]["met"]  # a gap of 0 on tight scores: agreement shown
    assert not tight[0]["met"] and tight[0]["gap"]["mean"] == pytest.approx(0.15)


# Mutants the tests above let through (session 56's mutation pass).


def test_finite_histories_cycle_over_a_seeded_shuffle_of_the_training_ids():
    """Dark Room: the records go over the split's training ids in a seeded
    shuffle (not in id order, which would put the N tasks of a GPICL cell
    in the grid's first rows), and the N distinct tasks of a restricted
    plan are the first N of that same order."""
    env = make_env("darkroom")
    full = plan_tasks(env, 65, 0.8, seed=3)  # 65 = the split's training ids
    ids = full.task_ids["train"]
    assert sorted(ids.tolist()) == sorted(full.split.train.tolist())
    assert ids.tolist() != sorted(ids.tolist())  # shuffled
    five = plan_tasks(env, 40, 0.8, seed=3, num_train_tasks=5).task_ids["train"]
    assert five[:5].tolist() == ids[:5].tolist()  # nested in one order
    # the split is the env's own for these arguments (what eval re-derives)
    assert full.split.to_json() == env.task_split(0.8, 3, 0.5).to_json()


def test_continuous_train_and_test_records_partition_the_indices():
    """Bandits, 10 records, seed 0: ``default_rng(0).permutation(10)`` =
    [4 6 2 7 3 5 9 0 8 1]; 8 train, sorted [0 2 3 4 5 6 7 9]; test [1 8].
    Restricted to 2 tasks: the first 2 training indices [0 2], cycled."""
    env = make_env("gaussian_bandit", num_arms=3, horizon=4)
    plan = plan_tasks(env, 10, 0.8, seed=0)
    train, test = plan.task_ids["train"].tolist(), plan.task_ids["test"].tolist()
    assert not set(train) & set(test)
    assert sorted(train + test) == list(range(10))
    assert test == [1, 8]
    two = plan_tasks(env, 10, 0.8, seed=0, num_train_tasks=2).task_ids["train"]
    assert two.tolist() == [0, 2] * 4


def test_training_tasks_come_in_the_order_the_records_first_use_them():
    """Records [7 3 7 5 3]: first uses 7 (record 0), 3 (1), 5 (3): ids
    [7 3 5], not the id order [3 5 7]; params are those of the ids."""
    env = make_env("darkroom")
    meta = {
        "task_ids": {"train": [7, 3, 7, 5, 3]},
        "task_space": "finite",
        "split": env.task_split(0.8, 0, 0.5).to_json(),
        "seed": 0,
    }
    params, ids = training_tasks(env, meta)
    assert ids.tolist() == [7, 3, 5]
    want = jax.vmap(env.params_for_task)(np.asarray([7, 3, 5], np.int32))
    for got, exp in zip(jax.tree.leaves(params), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(got, exp)
