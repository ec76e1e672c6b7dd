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
