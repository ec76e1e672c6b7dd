"""Vectorized sweeps: many seeds and hyperparameters in one compiled program.

>>> from agentrl import sweep
>>> from agentrl.train.experiments import load_experiment
>>> config = load_experiment("ad_darkroom", "smoke")
>>> out = sweep.run_sweep(config, seeds=[0, 1], grid={"lr": [1e-3, 3e-4]},
...                       out_dir="sweeps/ad")   # results.md/.csv/.json/.png
>>> q = sweep.source_sweep("q_learning", env, params, key, num_episodes=100,
...                        num_seeds=64, grid={"learning_rate": [0.1, 0.8]})

- :mod:`agentrl.sweep.grid`: which fields are traced (one program) or static
  (one program per combination), validated before compiling;
- :mod:`agentrl.sweep.train`: ``S`` seeds x ``H`` traced settings trained by
  one vmapped, scanned update step, and evaluated in context in one program;
- :mod:`agentrl.sweep.online`: the same for online learners (RL²,
  transformer PPO, AMAGO): their training programs vmapped, in resumable
  chunks;
- :mod:`agentrl.sweep.sources`: source algorithms (Q-learning ...) over
  seeds x traced settings in one program;
- :mod:`agentrl.sweep.report`: the results table (mean, bootstrap CI), CSV,
  JSON and plot;
- :mod:`agentrl.sweep.paired`: two rows' per-task scores compared paired
  over the same tasks;
- :mod:`agentrl.sweep.run`: :func:`run_sweep`, the whole sweep.

The command line is ``agentrl sweep`` (:mod:`agentrl.sweep.cli`).
"""

from agentrl.sweep.grid import SweepGrid, make_grid, parse_grid_args, traced_paths
from agentrl.sweep.online import OnlineSweep, evaluate_online_members, online_sweep
from agentrl.sweep.report import write_sweep_results
from agentrl.sweep.run import SweepOutcome, run_sweep
from agentrl.sweep.sources import SourceSweep, curve_rows, source_sweep
from agentrl.sweep.train import (
    TrainSweep,
    evaluate_members,
    held_out_tasks,
    init_member_states,
    member_hparams,
    train_sweep,
)

__all__ = [
    "OnlineSweep",
    "evaluate_online_members",
    "online_sweep",
    "SourceSweep",
    "SweepGrid",
    "SweepOutcome",
    "TrainSweep",
    "curve_rows",
    "evaluate_members",
    "held_out_tasks",
    "init_member_states",
    "make_grid",
    "member_hparams",
    "parse_grid_args",
    "run_sweep",
    "source_sweep",
    "traced_paths",
    "train_sweep",
    "write_sweep_results",
]
