"""Paper reproductions (agentrl.evaluate.reproduce): mutants the tests before
let through.

Pass 11 of the hand-made mutation passes. Each training seed makes its own
histories (and split) from its own data seed, even where the preset or a
``--set`` names a dataset path; the expert keeps the last fifth of the
episodes, rounded up; a method some seeds lack is left out; a cached seed
is redone when a checkpoint scan is newly asked for; a seed chooses its
acting rule on validation, scans checkpoints with that rule and tests with
the controls asked and the shared source-run folder.
"""

from __future__ import annotations

import agentrl.evaluate.reproduce as reproduce


def test_a_seed_generates_its_own_data_even_when_a_path_is_set():
    configs = [
        reproduce.seed_config("ad_darkroom", "smoke", s, {"data.path": "/tmp/h"})
        for s in (0, 3)
    ]
    assert [c.data.path for c in configs] == ["", ""]
    assert configs[1].data.seed == configs[0].data.seed + 3


def test_the_expert_keeps_a_fifth_of_the_episodes_rounded_up():
    from agentrl.train.experiments import load_experiment

    def expert(episodes: int) -> int:
        sets = {"data.num_episodes": str(episodes)}
        config = load_experiment("ad_darkroom", "smoke", sets)
        assert config.algo.context_episodes == 2  # so at least 3 episodes
        return reproduce.default_expert_episodes(config)

    assert expert(23) == 5  # ceil(23 / 5), not 4
    assert expert(26) == 6
    assert expert(11) == 3  # ceil(11 / 5) = 3 = the context + 1
    assert expert(6) == 3  # the context + 1 above ceil(6 / 5) = 2


def test_a_method_some_seeds_lack_is_left_out_not_pooled(tmp_path, monkeypatch, capsys):
    import numpy as np

    from agentrl.evaluate.evaluate import EvalResult

    def fake_seed(config, root, seed, controls, scan, rules):
        names = ["AD", "random"] + (["late_baseline"] if seed == 1 else [])
        return {n: EvalResult(n, np.full((2, 3), seed)) for n in names}, {}

    monkeypatch.setattr(reproduce, "_seed", fake_seed)
    per_method, dirs, _ = reproduce.train_and_evaluate(
        "ad_darkroom", "smoke", 2, tmp_path
    )
    assert sorted(per_method) == ["AD", "random"]  # late_baseline: seed 1 only
    assert [r.returns[0, 0] for r in per_method["AD"]] == [0, 1]
    assert [d.name for d in dirs] == [
        "ad_darkroom-smoke-seed0",
        "ad_darkroom-smoke-seed1",
    ]
    assert "left out (not run for every seed): late_baseline" in capsys.readouterr().out


def test_a_cached_seed_without_a_checkpoint_scan_is_redone_when_one_is_asked(
    tmp_path, monkeypatch
):
    import numpy as np

    from agentrl.evaluate.evaluate import EvalResult

    calls = []

    def fake_seed(config, root, seed, controls, scan, rules):
        calls.append(scan)
        record = {"seed": seed, **({"checkpoint_scan": {"s": 1}} if scan else {})}
        return {"AD": EvalResult("AD", np.ones((2, 3)))}, record

    monkeypatch.setattr(reproduce, "_seed", fake_seed)
    run = dict(name="ad_darkroom", preset="smoke", seeds=1, runs_root=tmp_path)
    reproduce.train_and_evaluate(**run)
    reproduce.train_and_evaluate(**run)  # cached: nothing redone
    assert calls == [False]
    _, _, protocol = reproduce.train_and_evaluate(**run, scan_checkpoints=True)
    assert calls == [False, True] and "checkpoint_scan" in protocol[0]
    reproduce.train_and_evaluate(**run, scan_checkpoints=True)  # now cached
    assert calls == [False, True]


def test_a_seed_tests_its_validation_choice_with_the_controls_asked(
    tmp_path, monkeypatch
):
    """``_seed``: the acting rule is chosen on the run's candidates, the
    checkpoint scan uses the chosen rule's evaluation, and the test
    evaluation gets the three context controls (with --controls) and the
    source-run folder shared by every run under ``--runs``."""
    import types

    calls = {}
    choice = types.SimpleNamespace(eval={"acting": "greedy"})
    selection = types.SimpleNamespace(
        choice=choice, validation={"v": 1}, to_json=lambda: {"choice": "greedy"}
    )
    run_dir = tmp_path / "ad-seed0"
    monkeypatch.setattr(reproduce, "fit_sharing_data", lambda config, root: run_dir)
    monkeypatch.setattr(reproduce, "_training_code", lambda d: {"code": "x"})
    monkeypatch.setattr(
        reproduce, "acting_candidates", lambda d, rules: ("acting", d, rules)
    )
    monkeypatch.setattr(
        reproduce, "checkpoint_candidates", lambda d, ev: ("checkpoints", d, ev)
    )

    def select(candidates):
        calls.setdefault("select", []).append(candidates)
        return selection

    def evaluate_choice(sel, **kwargs):
        calls["evaluate"] = (sel, kwargs)
        return {"AD": "result"}, None

    monkeypatch.setattr(reproduce, "select", select)
    monkeypatch.setattr(reproduce, "evaluate_choice", evaluate_choice)
    rules = {"greedy": {}, "sample": {}}
    root = tmp_path / "ad-seed0"
    for controls in (True, False):
        calls.clear()
        results, record = reproduce._seed(None, root, 0, controls, True, rules)
        assert results == {"AD": "result"} and record["seed"] == 0
        assert calls["select"] == [
            ("acting", run_dir, rules),
            ("checkpoints", run_dir, {"acting": "greedy"}),
        ]
        assert record["checkpoint_scan"] == {"v": 1}
        sel, kwargs = calls["evaluate"]
        assert sel is selection
        used = ["zero_rewards", "shuffle_rewards", "empty_context"]
        assert kwargs["control"] == (used if controls else None)
        assert kwargs["source_cache"] == tmp_path / "source-runs"
