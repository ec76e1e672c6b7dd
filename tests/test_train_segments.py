"""Which code trained a run: ``run.json``'s segments and the reproduction's
account of them."""

import json

import pytest

from agentrl import configtools
from agentrl.evaluate import reproduce
from agentrl.evaluate.reproduce_report import _code_note
from agentrl.provenance import code_digest
from agentrl.train.loop import fit
from agentrl.train.segments import provenance, trained_by_other_code, training_code


def _segments(run_dir):
    return json.loads((run_dir / "run.json").read_text())["segments"]


def _edit_run_json(run_dir, edit):
    """Rewrite ``run_dir/run.json`` as ``edit(info)`` leaves it (a run made
    by other code, or before segments were recorded)."""
    info = json.loads((run_dir / "run.json").read_text())
    edit(info)
    (run_dir / "run.json").write_text(json.dumps(info))


def _small(tiny_ad_config, steps):
    overrides = {"train.checkpoint_every": 2, "train.log_every": 2}
    return configtools.override(tiny_ad_config(steps), overrides)


@pytest.mark.long
def test_each_call_that_trains_records_its_steps_and_code(tiny_ad_config, tmp_path):
    run = tmp_path / "run"
    fit(_small(tiny_ad_config, 4), run, progress=False, stop_at_step=2)
    fit(_small(tiny_ad_config, 4), run, progress=False)
    fit(_small(tiny_ad_config, 4), run, progress=False)  # finished: trains nothing
    segments = _segments(run)
    assert [(s["from_step"], s["to_step"]) for s in segments] == [(0, 2), (2, 4)]
    assert {s["code_sha256"] for s in segments} == {code_digest([])}
    assert training_code(run) == [code_digest([])]
    assert not trained_by_other_code(provenance(run))


def test_a_run_resumed_by_other_code_names_both(tiny_ad_config, tmp_path):
    run = tmp_path / "run"
    fit(_small(tiny_ad_config, 4), run, progress=False, stop_at_step=2)
    _edit_run_json(run, lambda i: i["segments"][0].update(code_sha256="0" * 64))
    fit(_small(tiny_ad_config, 4), run, progress=False)
    assert training_code(run) == ["0" * 64, code_digest([])]
    assert trained_by_other_code(provenance(run))


@pytest.mark.long
def test_a_run_without_segments_counts_as_unrecorded_code(tiny_ad_config, tmp_path):
    run = tmp_path / "run"
    fit(_small(tiny_ad_config, 2), run, progress=False)
    _edit_run_json(run, lambda i: i.pop("segments"))  # written before them
    assert training_code(run) is None
    assert trained_by_other_code(provenance(run))


def test_reproduce_says_when_a_reused_run_was_trained_by_other_code(
    tiny_ad_config, tmp_path, capsys
):
    run = tmp_path / "run"
    fit(_small(tiny_ad_config, 2), run, progress=False)
    assert not trained_by_other_code(reproduce._training_code(run))
    assert "trained by other agentrl code" not in capsys.readouterr().out
    _edit_run_json(run, lambda i: i["segments"][0].update(code_sha256="ab" * 32))
    record = reproduce._training_code(run)
    assert record["trained_by"] == ["ab" * 32]
    assert record["evaluated_by"] == code_digest([])
    out = capsys.readouterr().out
    assert "trained by other agentrl code (abababababab)" in out


def _seed_record(seed, trained_by, expert=None):
    record = {
        "seed": seed,
        "training_code": {"trained_by": trained_by, "evaluated_by": "c" * 64},
    }
    if expert is not None:
        evaluated = {"trained_by": expert, "evaluated_by": "c" * 64}
        record["expert_distillation"] = {"training_code": evaluated}
    return record


def test_the_record_names_the_seeds_trained_by_other_or_unrecorded_code():
    same = [_seed_record(0, ["c" * 64]), _seed_record(1, ["c" * 64], ["c" * 64])]
    assert _code_note("ad", same).startswith("Every seed's ad run was trained")
    assert "cccccccccccc" in _code_note("ad", same)
    mixed = [
        _seed_record(0, ["c" * 64]),
        _seed_record(1, ["d" * 64, "c" * 64]),  # resumed by this code
        _seed_record(2, None),  # not recorded
        {"seed": 3},  # a record from before the account
        _seed_record(4, ["c" * 64], expert=["d" * 64]),
    ]
    note = _code_note("ad", mixed)
    assert "the runs of seeds [1, 2, 3]" in note
    assert "the expert-distillation runs of seeds [4]" in note
    assert _code_note("ad", []) is None


def test_damaged_segments_are_refused_naming_the_file(tmp_path):
    from agentrl.train.segments import kept_segments

    path = tmp_path / "run.json"
    for text in ("[1, 2]", "{not json", '{"segments": "abc"}', '{"segments": [{}]}'):
        path.write_text(text)
        with pytest.raises(ValueError, match="run.json"):
            kept_segments(path)
