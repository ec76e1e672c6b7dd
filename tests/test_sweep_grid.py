"""Sweeps of an experiment: a static grid gives one row per setting and files."""

import pytest

from agentrl.sweep import run_sweep


@pytest.mark.long
def test_static_grid_one_row_per_setting(tiny_ad_config, tmp_path):
    config = tiny_ad_config(steps=2)
    grid = {"lr": ["1e-3", "3e-4"], "d_model": ["8", "16"]}
    out = run_sweep(
        config,
        [0, 1],
        grid,
        tmp_path / "sw",
        evaluate=False,
        steps_per_call=2,
        progress=False,
    )
    assert len(out.rows) == 4
    labels = [r["setting"] for r in out.rows]
    assert len(set(labels)) == 4 and "d_model=8 lr=0.001" in labels
    for row in out.rows:
        assert row["seeds"] == 2
        assert row["loss_ci_low"] <= row["final_loss"] <= row["loss_ci_high"]
        assert "score" not in row
    for name in ("md", "csv", "json", "png"):
        assert out.paths[name].stat().st_size > 0
    csv_lines = out.paths["csv"].read_text().strip().splitlines()
    assert len(csv_lines) == 5 and "loss_ci_low" in csv_lines[0]
