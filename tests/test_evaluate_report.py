"""Result files (JSON, markdown, PNG) and the ``agentrl eval RUN_DIR`` command."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agentrl import envs
from agentrl.evaluate import EvalResult, summarize, write_results
from agentrl.evaluate.run import evaluate_run
from agentrl.train.rundir import held_out_params

PNG = b"\x89PNG\r\n\x1a\n"


def _result(name, seed, offset, tasks=10, episodes=6, steps=12):
    rng = np.random.default_rng(seed)
    returns = offset + np.arange(episodes) + rng.normal(0, 0.1, (tasks, episodes))
    normalized = returns / 10.0
    normalized[0] = np.nan  # one task without a defined score
    regret = np.cumsum(rng.uniform(0, 1, (tasks, steps)), axis=1)
    return EvalResult(
        name, returns, normalized, regret, np.zeros(tasks), np.full(tasks, 10.0)
    )


def test_summary_pools_seeds_and_drops_undefined_tasks():
    runs = [_result("m", 0, 1.0), _result("m", 1, 2.0)]
    s = summarize({"m": runs}, last_k=3)["m"]
    assert (s["runs"], s["tasks"], s["episodes"], s["last_k"]) == (2, 10, 6, 3)
    returns = np.stack([r.returns for r in runs])
    assert s["return_first"]["mean"] == pytest.approx(returns[..., 0].mean())
    assert s["return_last"]["mean"] == pytest.approx(returns[..., -3:].mean())
    assert s["score_last"]["dropped"] == 1 and s["score_last"]["tasks"] == 9
    lo, hi = s["return_last"]["mean_ci"]
    assert lo <= s["return_last"]["mean"] <= hi
    curve = s["curve"]
    assert curve["metric"] == "normalized score" and len(curve["mean"]) == 6
    assert np.all(np.diff(curve["mean"]) > 0)  # improvement across episodes
    assert s["regret_final"]["mean"] == pytest.approx(
        np.mean([r.regret[:, -1] for r in runs])
    )
    with pytest.raises(ValueError, match="differ"):
        summarize({"m": [runs[0], _result("m", 2, 0.0, tasks=3)]})


def test_write_results_files(tmp_path):
    results = {
        "model": [_result("model", 0, 2.0), _result("model", 1, 2.5)],
        "random": _result("random", 2, 0.0),
    }
    paths = write_results(results, tmp_path / "out", title="unit")
    assert set(paths) == {
        "json",
        "markdown",
        "improvement",
        "regret",
        "csv",
        "tensorboard",
    }
    for key in ("improvement", "regret"):
        assert paths[key].read_bytes()[:8] == PNG
    payload = json.loads(paths["json"].read_text())  # strict JSON (no NaN)
    assert payload["title"] == "unit"
    assert len(payload["runs"]["model"]) == 2
    run = payload["runs"]["model"][0]
    assert run["normalized"][0][0] is None
    assert np.allclose(run["returns"], results["model"][0].returns)
    assert len(run["regret_final"]) == 10
    assert payload["summary"]["random"]["runs"] == 1
    md = paths["markdown"].read_text()
    assert "| model | 2 x 10 |" in md and "| random | 1 x 10 |" in md
    assert "improvement.png" in md and "regret.png" in md
    assert not list((tmp_path / "out").glob("*.tmp"))


def test_held_out_params_use_the_recorded_split():
    env = envs.make("darkroom", size=3, horizon=4)
    split = env.task_split(0.5, seed=7)
    params, ids = held_out_params(env, split.to_json(), None, 0)
    assert ids == [int(i) for i in split.test]
    np.testing.assert_array_equal(params.goal[:, 0] + 3 * params.goal[:, 1], ids)
    params, ids = held_out_params(env, split.to_json(), 2, 0)
    assert len(ids) == 2 and set(ids) <= {int(i) for i in split.test}
    np.testing.assert_array_equal(params.goal[:, 0] + 3 * params.goal[:, 1], ids)
    bandit = envs.make("bernoulli_bandit")
    params, ids = held_out_params(bandit, None, 5, 0)
    assert ids is None and params.means.shape == (5, 5)


def test_a_subset_of_held_out_tasks_is_a_uniform_draw_not_the_first_ids():
    # Key-to-Door's ids are key cell major: the first 16 of its 648 test
    # pairs all have the key in cells 0-2
    env = envs.make("dark_key_to_door")
    split = env.task_split(0.8, seed=0, validation_share=0.5).to_json()
    _, ids = held_out_params(env, split, 16, 0)
    again = held_out_params(env, split, 16, 0)[1]
    other_seed = held_out_params(env, split, 16, 1)[1]
    validation = held_out_params(env, split, 16, 0, "validation")[1]
    assert ids == again == sorted(ids) and len(set(ids)) == 16
    assert set(ids) <= set(split["test"])
    assert set(validation) <= set(split["validation"])
    assert ids != other_seed
    key_cells = {i // 80 for i in ids}
    assert max(key_cells) > 2 and len(key_cells) > 8  # spread over the room


def test_eval_of_a_missing_run_is_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        evaluate_run(tmp_path)


def test_source_baseline_runs_as_it_made_the_data():
    from agentrl.evaluate.run import baseline_methods
    from agentrl.train.experiments import load_experiment

    config = load_experiment("ad_darkroom", "cpu")  # explore 30% of 60 episodes
    env = envs.make("darkroom")
    methods = baseline_methods(config, env, ["random", "q_learning"], 50)
    q = methods["q_learning"]
    assert q.decay_episodes == round(0.3 * config.data.num_episodes) == 18
    assert type(methods["random"]).__name__ != "QLearning"
    config = load_experiment("ad_eps_darkroom", "cpu")  # ε 1 -> 0.3 over 36 of 40
    oracle = baseline_methods(config, env, ["noisy_oracle"], 100)["noisy_oracle"]
    assert oracle.epsilon_end == pytest.approx(0.3)
    assert oracle.decay_episodes == 36


def test_compressed_results_hold_the_same_payload_and_leave_one_copy(tmp_path):
    """``compress=True`` (reproduction records) writes ``results.json.gz``
    with the payload of ``results.json`` and removes a plain copy left from
    before; :func:`read_results` reads either."""
    from agentrl.evaluate.report import read_results

    results = {"model": [_result("model", 0, 2.0)], "random": _result("r", 2, 0.0)}
    plain = write_results(results, tmp_path / "plain", title="unit")["json"]
    out = tmp_path / "packed"
    out.mkdir()
    (out / "results.json").write_text('{"stale": true}')
    packed = write_results(results, out, title="unit", compress=True)["json"]
    assert packed.name == "results.json.gz" and packed.stat().st_size > 0
    assert not (out / "results.json").exists()
    a, b = json.loads(plain.read_text()), read_results(out)
    a.pop("date"), b.pop("date")
    assert a == b
    assert read_results(tmp_path / "plain")["title"] == "unit"
    write_results(results, out, title="again")  # back to plain: no .gz left
    assert read_results(out)["title"] == "again"
    assert not (out / "results.json.gz").exists()


def test_read_results_takes_the_newer_of_two_left_by_a_stopped_write(tmp_path):
    """A plain write stopped before it removed the packed one (or the other
    way round) leaves both: the newer is the one written last."""
    import os

    from agentrl.evaluate.report import read_results
    from agentrl.tables import write_json, write_json_gz

    write_json_gz(tmp_path / "results.json.gz", {"v": "old"})
    write_json(tmp_path / "results.json", {"v": "new"})
    os.utime(tmp_path / "results.json.gz", ns=(1, 1))
    assert read_results(tmp_path) == {"v": "new"}
    os.utime(tmp_path / "results.json", ns=(0, 0))
    assert read_results(tmp_path) == {"v": "old"}
