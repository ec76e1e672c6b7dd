"""Every experiment's ``gpu`` preset starts and trains a few steps on CPU.

The gpu presets run at their own shapes (environment, context, model
layers, heads and width) with the sizes that only set the cost turned down
(steps, batch, number of histories, parallel trials, evaluation), so a
preset that cannot build its data, model or evaluation fails here, not on
the GPU. ``xland_ad``'s (PPO histories of 243-step XLand episodes, about six
minutes on 2 cores) and ``rl2_xland``'s (about a minute, most of it compiling
the XLand trainer) are the longest. ``make test-long`` (CI) runs one preset
per algorithm; ``make test-heavy`` runs the others.
"""

from __future__ import annotations

import json

import pytest
from tiny_runs import by_experiment, tiny_overrides

from agentrl.train.experiments import known_experiments, load_experiment
from agentrl.train.loop import fit

# 15-70 s each on 2 cores (xland_ad's 6 minutes): one per algorithm in CI
EXPERIMENTS = by_experiment(known_experiments())


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_gpu_preset_starts_and_trains_on_cpu(name, tmp_path):
    config = load_experiment(name, "gpu")
    tiny = load_experiment(name, "gpu", tiny_overrides(config, eval_episodes=1))
    assert tiny.model == config.model and tiny.data.env_args == config.data.env_args
    run = fit(tiny, tmp_path / "run", progress=False)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert sum('"loss"' in x for x in lines) == 2
    saved = json.loads((run / "config.json").read_text())
    assert saved["model"]["d_model"] == config.model.d_model
