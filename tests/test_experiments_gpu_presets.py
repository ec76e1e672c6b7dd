"""Every experiment's ``gpu`` preset starts and trains a few steps on CPU.

The gpu presets run at their own shapes (environment, context, model
layers, heads and width) with the sizes that only set the cost turned down
(steps, batch, number of histories, parallel trials, evaluation), so a
preset that cannot build its data, model or evaluation fails here, not on
the GPU. ``xland_ad``'s (PPO histories of 243-step XLand episodes, about two
minutes on 2 cores) and ``rl2_xland``'s (about a minute, most of it compiling
the XLand trainer) are the longest. ``make test`` runs one preset
(``ad_eps_darkroom``); ``make test-long`` runs them all.
"""

from __future__ import annotations

import json

import pytest

from agentrl import envs
from agentrl.train.experiments import known_experiments, load_experiment
from agentrl.train.loop import fit

# 15-70 s each on 2 cores: one in `make test`, every one in `make test-long`
FAST = {"ad_eps_darkroom"}
EXPERIMENTS = [
    name if name in FAST else pytest.param(name, marks=pytest.mark.long)
    for name in known_experiments()
]


def _env(config):
    return envs.make(config.data.env, **dict(config.data.env_args))


def _tiny(config) -> dict[str, object]:
    """Overrides that cut a gpu preset's cost but keep its shapes."""
    algo = getattr(config.algo, "base", config.algo)
    span = getattr(algo, "context_episodes", 1) * getattr(algo, "episode_stride", 1)
    # DPT: enough steps with a known successor for its context
    horizon = _env(config).horizon
    context = getattr(algo, "context_size", 0)
    episodes = min(max(span + 1, -(-context // (horizon - 1)) + 1), 200)
    episodes = -(-episodes // 4) * 4  # PPO sources update every 4 episodes
    online = {}
    if hasattr(algo, "num_minibatches"):  # PPO learners: the fewest parallel trials
        online = {"algo.num_envs": algo.num_minibatches}
    elif hasattr(algo, "grad_steps"):  # off-policy (AMAGO): one trial, one step
        online = {"algo.num_envs": 1, "algo.grad_steps": 1, "algo.batch_size": 1}
    return {
        **online,
        "train.steps": 2,
        "train.batch_size": 2,
        "train.log_every": 1,
        "train.checkpoint_every": 2,
        "train.warmup_steps": 1,
        "data.num_tasks": 4,
        "data.num_episodes": min(episodes, config.data.num_episodes),
        "eval.num_tasks": 2,
        "eval.num_episodes": 1,
    }


@pytest.mark.long
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_gpu_preset_starts_and_trains_on_cpu(name, tmp_path):
    config = load_experiment(name, "gpu")
    tiny = load_experiment(name, "gpu", _tiny(config))
    assert tiny.model == config.model and tiny.data.env_args == config.data.env_args
    run = fit(tiny, tmp_path / "run", progress=False)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert sum('"loss"' in x for x in lines) == 2
    saved = json.loads((run / "config.json").read_text())
    assert saved["model"]["d_model"] == config.model.d_model
