"""The learned sources' shared setting checks (agentrl.sources.settings):
each refusal names the source and the field, through both sources."""

import pytest

from agentrl.envs import make
from agentrl.sources import ppo, sac


class _NoHorizon:
    """An env without ``horizon`` (the checks must refuse it by name)."""

    name = "no_horizon"


@pytest.mark.parametrize("source", [ppo, sac])
@pytest.mark.parametrize(
    "num_episodes, settings, message",
    [
        (0, {}, "num_episodes must be an int >= 1, got 0"),
        (True, {}, "num_episodes must be an int >= 1, got True"),
        (10, {"hidden": True}, "hidden must be an int >= 1, got True"),
        (10, {"hidden": 0}, "hidden must be an int >= 1, got 0"),
        (10, {"nope": 1}, r"unknown setting\(s\) \['nope'\]; valid: .*hidden="),
    ],
)
def test_learned_sources_refuse_by_name(source, num_episodes, settings, message):
    name = source.__name__.rsplit(".", 1)[-1]
    with pytest.raises(ValueError, match=f"^{name}: {message}"):
        source.make_config(make("point_robot"), num_episodes, **settings)


def test_refuses_an_env_without_a_horizon():
    with pytest.raises(ValueError, match="^ppo: env.horizon must be an int >= 1"):
        ppo.make_config(_NoHorizon(), 10)


class _NoOracle:
    """An env with a horizon and no oracle."""

    name = "no_oracle"
    horizon = 10
    has_oracle = False

    def action_space(self, params=None):
        return make("point_robot").action_space(params)


def test_oracle_labels_need_an_oracle():
    with pytest.raises(ValueError, match="^ppo: labels='oracle' needs .* no_oracle"):
        ppo.make_config(_NoOracle(), 10, labels="oracle")
    assert ppo.make_config(_NoOracle(), 10).labels == "none"  # auto
    assert sac.make_config(make("point_robot"), 10).labels == "oracle"  # auto
