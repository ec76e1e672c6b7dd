"""agentrl reproduce: --set parsing and the ablation's result name."""

import pytest

from agentrl.evaluate.reproduce import parse_sets
from agentrl.evaluate.reproduce_report import ablation_suffix


def test_set_values_become_overrides_and_a_readable_suffix():
    sets = parse_sets(["algo.episode_stride=3"])
    assert sets == {"algo.episode_stride": "3"}
    assert ablation_suffix(sets) == "_episode_stride3"
    json_value = parse_sets(['data.source_args=[["epsilon_end", 0.5]]'])
    assert ablation_suffix(json_value) == "_source_args-epsilon_end-0.5"
    two = parse_sets(["train.lr=1e-3", "train.steps=6000"])
    assert ablation_suffix(two) == "_lr1em3_steps6000"  # a sign is not a dash
    assert ablation_suffix({}) == ""


@pytest.mark.parametrize(
    "first, second",
    [
        ("data.num_episodes=30", "eval.num_episodes=30"),
        ("data.seed=7", "train.seed=7"),
        ("train.seed=7", "eval.seed=7"),
        ("train.lr=1e-3", "train.lr=1e+3"),
        ("algo.batch_size=64", "train.batch_size=64"),
        ("algo.obs_encoding=onehot", "model.obs_encoding=onehot"),
        (
            'data.source_args=[["epsilon_end", -0.5]]',
            'data.source_args=[["epsilon_end", 0.5]]',
        ),
    ],
)
def test_two_different_ablations_never_share_a_name(first, second):
    """Their seeds' caches and records are named by it: two settings once
    met in one name (the field's section dropped, a sign read as a dash)."""
    a, b = (ablation_suffix(parse_sets([s])) for s in (first, second))
    assert a != b


def test_names_of_earlier_records_are_kept():
    """A ``data.`` field and values without signs name as they always did."""
    sets = parse_sets(["data.num_tasks=16", "data.num_episodes=120"])
    assert ablation_suffix(sets) == "_num_tasks16_num_episodes120"
    assert ablation_suffix({"eval.validation_tasks": "32"}) == "_validation_tasks32"
    assert ablation_suffix({"eval.num_episodes": "30"}) == "_eval_num_episodes30"


@pytest.mark.parametrize("bad", ["train.steps", "=3", "train.steps="])
def test_set_without_field_or_value_is_refused(bad):
    with pytest.raises(ValueError, match="FIELD=VALUE|train.steps"):
        parse_sets([bad])


def test_evaluation_only_fields_are_the_acting_settings():
    from agentrl.train.rundir import evaluation_only

    for field in ("eval.acting", "eval.validation_tasks", "algo.eval_context"):
        assert evaluation_only(field), field
    assert evaluation_only("algo.base.eval_context")  # T2MIR-AD's AD
    for field in ("train.lr", "algo.context_episodes", "model.dropout", "evaluate"):
        assert not evaluation_only(field), field


def test_a_leaf_name_set_is_judged_as_its_field():
    """``--set validation_tasks=32`` is ``eval.validation_tasks``: the
    preset's weights are reused for it too (it once trained a second run)."""
    from agentrl.evaluate.reproduce import _evaluation_only
    from agentrl.train.experiments import load_experiment

    t2mir = load_experiment("t2mir_ad_darkroom", "smoke")
    assert _evaluation_only({"validation_tasks": "32"}, t2mir)
    assert _evaluation_only({"eval_context": "window"}, t2mir)  # algo.base.
    assert not _evaluation_only({"validation_tasks": "32", "lr": "1e-3"}, t2mir)


@pytest.mark.long
def test_an_evaluation_ablation_reuses_the_presets_training(tmp_path):
    """The ablation's run is the preset's: its weights, not a second training;
    the checkpoints copied (so the ablation's resume cannot touch the
    preset's files) and the data linked; the preset's run left as it was."""
    import dataclasses
    import os

    import jax
    import numpy as np

    from agentrl.evaluate.reproduce import reuse_training
    from agentrl.train.experiments import load_experiment
    from agentrl.train.loop import fit
    from agentrl.train.rundir import load_run

    config = load_experiment("ad_darkroom", "smoke")
    config = dataclasses.replace(
        config, train=dataclasses.replace(config.train, steps=4, log_every=2)
    )
    base, root = tmp_path / "ad-seed0", tmp_path / "ad_eval_contextwindow-seed0"
    reuse_training(config, base, root)  # trains the preset's run first
    saved = (base / "config.json").read_text()
    window = dataclasses.replace(
        config, algo=dataclasses.replace(config.algo, eval_context="window")
    )

    def checkpoint_files():
        files = (root / "checkpoints").rglob("*")
        return {p: p.stat().st_mtime_ns for p in files if p.is_file()}

    copied = checkpoint_files()
    fit(window, root, progress=False)  # resumes the finished run: no update
    assert checkpoint_files() == copied  # nothing trained, nothing saved
    assert (base / "config.json").read_text() == saved
    ours, theirs = load_run(root), load_run(base)
    assert ours.config.algo.eval_context == "window"
    assert ours.step == theirs.step == 4
    from flax import nnx

    weights = [jax.tree.leaves(nnx.state(r.model, nnx.Param)) for r in (ours, theirs)]
    for a, b in zip(*weights, strict=True):
        np.testing.assert_array_equal(a, b)
    data = next(p for p in (base / "dataset").iterdir() if p.is_file())
    assert os.path.samefile(data, root / "dataset" / data.name)
    checkpoint = next(p for p in (base / "checkpoints").rglob("*") if p.is_file())
    copy = root / checkpoint.relative_to(base)
    assert copy.read_bytes() == checkpoint.read_bytes()
    assert not os.path.samefile(checkpoint, copy)
    before = sorted(p.name for p in tmp_path.iterdir())
    reuse_training(config, base, root)  # made already: nothing more
    assert sorted(p.name for p in tmp_path.iterdir()) == before
