"""Sweep grids (agentrl.sweep.grid): mutants the tests before let through.

Pass 11 of the hand-made mutation passes. Every static combination is
checked against the config's own rules before anything compiles, not only
each value alone.
"""

from __future__ import annotations

import pytest

from agentrl.sweep.grid import make_grid
from agentrl.train.experiments import load_experiment


def test_a_static_combination_invalid_only_together_is_refused_up_front():
    # ad_darkroom smoke: d_model 32, 2 heads; d_model must be a multiple of
    # 2 * num_heads. d_model=24 (with 2 heads) and 8 heads (with d_model 32)
    # are each valid, but 24 with 8 heads is not: 24 % 16 != 0.
    config = load_experiment("ad_darkroom", "smoke")
    assert (config.model.d_model, config.model.num_heads) == (32, 2)
    with pytest.raises(ValueError, match="d_model=24, num_heads=8"):
        make_grid(config, {"model.d_model": [32, 24], "model.num_heads": [2, 8]})
    # the valid product passes and enumerates exactly 2 x 2 settings
    spec = make_grid(config, {"model.d_model": [32, 48], "model.num_heads": [2, 8]})
    assert spec.static_settings() == [
        {"model.d_model": d, "model.num_heads": h} for d in (32, 48) for h in (2, 8)
    ]
