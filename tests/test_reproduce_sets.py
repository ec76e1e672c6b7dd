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
    assert ablation_suffix(two) == "_lr1e-3_steps6000"
    assert ablation_suffix({}) == ""


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
