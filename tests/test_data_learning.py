"""``agentrl data info --learning``: how a dataset's episode returns move
along its histories (whole episodes only, per part, rise, rank correlation)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from agentrl.cli import main
from agentrl.data.learning import learning_summary, record_episode_returns


def _record(returns, horizon=3, cut=False):
    """A record whose episodes pay ``returns`` (all on their first step); with
    ``cut`` one more episode is started and cut off after one step."""
    n = len(returns)
    reward = np.zeros(n * horizon + cut)
    reward[: n * horizon : horizon] = returns
    ended = np.zeros(n * horizon + cut, bool)
    ended[horizon - 1 : n * horizon : horizon] = True
    if cut:
        reward[-1] = 100.0  # the cut episode's reward must not count
    return {
        "episode": np.arange(n * horizon + cut) // horizon,
        "reward": reward,
        "terminated": np.zeros_like(ended),
        "truncated": ended,
    }


def _dataset(records):
    return SimpleNamespace(
        path="fake",
        num_records=lambda split: len(records),
        records=lambda split, idx: [records[i] for i in idx],
    )


def test_cut_off_episode_is_left_out():
    np.testing.assert_array_equal(
        record_episode_returns(_record([1.0, 2.0], cut=True)), [1.0, 2.0]
    )
    np.testing.assert_array_equal(record_episode_returns(_record([1.0, 2.0])), [1, 2])


def test_rising_and_flat_histories_are_told_apart():
    rising = _record(np.arange(20.0))  # 0..19: parts of 2 episodes
    falling = _record(np.arange(20.0)[::-1], cut=True)
    out = learning_summary(_dataset([rising, falling]), bins=10)
    assert out["histories"] == 2 and out["episodes"] == 20 and out["bins"] == 10
    # the two mirror each other: a flat mean curve, half the histories rising
    np.testing.assert_allclose(out["curve"], 9.5)
    assert out["rise"] == pytest.approx(0.0) and out["rising"] == 0.5
    assert out["rank_correlation"] == pytest.approx(0.0)
    alone = learning_summary(_dataset([rising]), bins=4)
    np.testing.assert_allclose(alone["curve"], [2.0, 7.0, 12.0, 17.0])
    assert alone["rise"] == pytest.approx(15.0) and alone["rising"] == 1.0
    assert alone["rank_correlation"] == pytest.approx(1.0)


def test_tied_returns_do_not_read_as_a_rise():
    """Dark Room's and the bandits' returns tie: ranks broken by order once
    rose with the episode index, so i.i.d. 0/1 returns read about +0.5 and
    one early success then nothing (a drop) read +0.45."""
    rng = np.random.default_rng(0)
    flat = [_record(rng.integers(0, 2, 60).astype(float)) for _ in range(40)]
    out = learning_summary(_dataset(flat), bins=4)
    assert abs(out["rank_correlation"]) < 0.1
    drop = learning_summary(_dataset([_record([1.0] + [0.0] * 9)]), bins=2)
    # Spearman with tied ranks averaged: -sqrt(3/11)
    assert drop["rank_correlation"] == pytest.approx(-0.5222, abs=1e-4)


def test_short_histories_use_fewer_parts_and_bad_input_says_why():
    out = learning_summary(_dataset([_record([0.0, 1.0, 2.0])]), bins=10)
    assert out["bins"] == 3 and out["curve"] == [0.0, 1.0, 2.0]
    flat = learning_summary(_dataset([_record([1.0, 1.0])]))
    assert np.isnan(flat["rank_correlation"]) and flat["rise"] == 0.0
    with pytest.raises(ValueError, match="1 whole episode"):
        learning_summary(_dataset([_record([1.0], cut=True)]))
    with pytest.raises(ValueError, match="no records"):
        learning_summary(_dataset([]))
    with pytest.raises(ValueError, match="bins must be an int >= 2"):
        learning_summary(_dataset([_record([1.0, 2.0])]), bins=1)


def test_data_info_learning_on_q_learning_histories(darkroom_dataset, capsys):
    assert main(["data", "info", str(darkroom_dataset), "--learning"]) == 0
    text = capsys.readouterr().out
    assert "learning (8 train histories, 30+ whole episodes each)" in text
    assert main(["data", "info", str(darkroom_dataset), "--learning", "--json"]) == 0
    learning = json.loads(capsys.readouterr().out)["learning"]
    # Q-learning learns Dark Room: its returns rise along the histories
    assert learning["rise"] > 0 and learning["rank_correlation"] > 0.2
    assert len(learning["curve"]) == learning["bins"] == 10


def test_data_info_learning_refuses_single_episode_histories(tmp_path, capsys):
    from agentrl import envs
    from agentrl.data import write_dataset
    from agentrl.sources import source_histories

    env = envs.make("darkroom", size=3, horizon=4)
    path = tmp_path / "one_episode"
    overrides = {"size": 3, "horizon": 4}
    write_dataset(
        path,
        env,
        source_histories("random", env),
        num_tasks=2,
        num_episodes=1,
        env_name="darkroom",
        env_overrides=overrides,
    )
    assert main(["data", "info", str(path), "--learning"]) == 2
    err = capsys.readouterr().err
    assert "--learning:" in err and "1 whole episode" in err
