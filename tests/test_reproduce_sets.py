"""agentrl bench reproduce: --set parsing and the ablation's result name."""

import pytest

from agentrl.benchmarks import reproduce


def test_set_values_become_overrides_and_a_readable_suffix():
    sets = reproduce.parse_sets(["algo.episode_stride=3"])
    assert sets == {"algo.episode_stride": "3"}
    assert reproduce.ablation_suffix(sets) == "_episode_stride3"
    json_value = reproduce.parse_sets(['data.source_args=[["epsilon_end", 0.5]]'])
    assert reproduce.ablation_suffix(json_value) == "_source_args-epsilon_end-0.5"
    two = reproduce.parse_sets(["train.lr=1e-3", "train.steps=6000"])
    assert reproduce.ablation_suffix(two) == "_lr1e-3_steps6000"
    assert reproduce.ablation_suffix({}) == ""


@pytest.mark.parametrize("bad", ["train.steps", "=3", "train.steps="])
def test_set_without_field_or_value_is_refused(bad):
    with pytest.raises(ValueError, match="FIELD=VALUE|train.steps"):
        reproduce.parse_sets([bad])
