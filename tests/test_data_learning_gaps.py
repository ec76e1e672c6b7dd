"""Learning diagnostics at their edges: tied ranks, two episodes, flat histories."""

from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import spearmanr

from agentrl.data.learning import learning_summary, rank_correlation


def test_rank_correlation_is_spearmans_with_tied_ranks_averaged():
    for x in ([0.0, 0.0, 1.0, 1.0, 2.0], [3.0, 1.0, 1.0, 2.0, 2.0, 0.0, 5.0]):
        want = spearmanr(np.arange(len(x)), x).statistic
        assert rank_correlation(np.array(x)) == pytest.approx(want)


def test_two_episodes_have_a_correlation_and_one_has_none():
    assert rank_correlation(np.array([0.0, 1.0])) == pytest.approx(1.0)
    assert rank_correlation(np.array([1.0, 0.0])) == pytest.approx(-1.0)
    assert np.isnan(rank_correlation(np.array([1.0])))


def test_a_flat_history_is_not_rising():
    """``rising``: the share of histories whose last part *beats* their first."""
    records = [
        {
            "episode": np.arange(4),
            "reward": np.array(returns, float),
            "terminated": np.zeros(4, bool),
            "truncated": np.ones(4, bool),  # one step an episode
        }
        for returns in ([1, 1, 1, 1], [0, 0, 1, 1])
    ]
    dataset = SimpleNamespace(
        path="fake",
        num_records=lambda split: len(records),
        records=lambda split, idx: [records[i] for i in idx],
    )
    out = learning_summary(dataset, bins=2)
    assert out["rising"] == 0.5  # the second rises, the flat one does not
