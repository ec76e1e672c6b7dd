"""AMAGO on the passive T-Maze: how long a gap its memory bridges.

The passive T-Maze of Ni et al. (2023), AMAGO's memory probe
(``agentrl.envs.tmaze``): the goal's side is shown at the first step only,
``L = corridor_length`` steps before the turn that needs it; moving right
is free, any other action before the turn costs ``1 / L``, and the turn
pays 1 on the goal. *Success* is the fraction of test episodes that reach
the goal, balanced over the two sides (the mean of the two sides' rates):
a policy without memory turns the same way whatever the cue, so it scores
0.5 (the ceiling a memory probe is read against); the oracle scores 1.
The causal transformer (2 layers, width 32) is the shared sequence model
of AMAGO's multi-gamma actor and 4 critics, trained off-policy from a
replay of trials of one episode (``L + 1`` steps, the whole episode in
context), both sides drawn at random; evaluated greedily (as AMAGO's
T-Maze example) on 200 episodes whose sides come from an evaluation-only
key, one episode each::

    agentrl train amago_tmaze --preset smoke
    agentrl bench tmaze_memory --lengths 10,25,50,100 --seeds 2
    agentrl reproduce amago_tmaze --preset cpu --seeds 2

The memory length is ``data.env_args``' ``corridor_length`` (10 in the
presets but ``full`` / ``gpu``). To run the cpu preset at another length
keep the exploration anneal at the same number of updates:
``explore_steps = 150 * (L + 1)`` (:func:`length_overrides`; the
``tmaze_memory`` benchmark does it), e.g. for ``L = 50``::

    agentrl reproduce amago_tmaze --preset cpu --seeds 2 \\
        --set 'data.env_args=(("corridor_length",50),)' \\
        --set algo.explore_steps=7650

``agentrl reproduce`` judges it by the balanced success too (``TARGET =
"memory_probe"``: its 95% CI above the memoryless 0.5, seeds then test
episodes resampled), beside the returns and scores (random 0, oracle 1) of
its protocol (the acting rule chosen on validation episodes); the probe's
numbers below are the benchmark's (greedy, Wilson bounds per side).

Settings from AMAGO's T-Maze (``examples/04_tmaze.py``, ``TMazeAltPassive``
with ``penalty = -1 / L``; ``docs/references.md``, "AMAGO"): trials of one
episode of ``L + 1`` steps, the whole episode in context; reward multiplier
100; its ``TMazeExploration``: randomised epsilon-greedy from 1.0 to 0.01 at
the first step and the last 4 of an episode (``t = 0`` and ``t >= L - 3``:
its window ``(0, 3)`` counts from ``L``, agentrl's from the ``L + 1``
steps, hence ``algo.explore_window=(0, 4)``), a constant low epsilon on
the corridor steps between (``0.5 / (L + 1)``; the example's ``0.5 /
L``); greedy evaluation. AMAGO's agent settings otherwise as
``amago_darkroom`` (discounts, 4 critics with the min over 2 for the
target, ``tau``, coefficients, batch of 24 trials, AdamW weight decay
1e-3, clip 1.0).

Deviations (reasons): as ``amago_darkroom``, no PopArt (critics predict
``(1 - gamma)`` x return), linear actor read-outs, critics of 128 units,
learning rate 3e-4 without warm-up; the acting discount 0.999, not the
example's 0.9999 (with critics of ``(1 - gamma)`` x return the goal's
value at 0.9999 is 1e-4 x the reward multiplier: too small a signal); the
epsilon anneal over 150 updates (``150 * (L + 1)`` steps per env), not 100k
steps per actor (the CPU budget is 600 updates); collection samples the
policy, where AMAGO's example acts by the argmax (one tuning run at ``L =
100``, 1 seed, this preset's settings but the window ``(0, 3)``: with the
argmax the greedy success stayed at 50% through 700 updates; sampling
reached 100% at update 550, then fell back to about 50% by update 600);
a model of 2 layers of width 32 (AMAGO's CLI: 3 layers of 256), 16 envs
and 4 gradient steps an update, to fit 2 cores.

- ``smoke``: ``L = 4``, 2 updates; plumbing.
- ``cpu``: ``L = 10``, 16 envs x 600 updates (9,600 episodes), 4 gradient
  steps an update: 1-6 min a seed on the 2-core CPU from ``L = 10`` to
  ``L = 100`` (compile included; load 2-8). Measured, ``agentrl bench
  tmaze_memory --lengths 10,25,50,100 --seeds 2`` (balanced success, 200
  test episodes a seed): ``L = 10`` and ``25``: 1.00 in both seeds;
  ``L = 50``: 1.00 and 0.50 (that seed always turned down); ``L = 100``:
  0.50 in both (always up: the memoryless level). Every run walked the
  corridor without a wasted step. With 1,500 updates (``--set
  train.steps=1500``, the same 2 seeds, 5-10 min a run): 1.00 at ``L = 50``
  and at ``L = 100`` in both seeds. So 600 updates bridge 25 steps in both
  seeds and 50 in one of two; 1,500 bridge 100 in both: at this model
  size the longer gaps need more updates. ``L = 200`` at 1,500 updates
  (session 37, ~24 min a run beside other jobs): 0.50 in both seeds, not
  bridged (``benchmarks/results/tmaze_memory.md``,
  ``tmaze_memory_steps1500.md``, ``tmaze_memory_steps1500_L200.md``).
- ``full`` / ``gpu``: ``L = 100``, 64 envs, 2,000 updates of 16 gradient
  steps, a 3-layer model of width 128, AMAGO's 1e-4 learning rate and its
  T-Maze anneal of 100k steps per env (not run here).
"""

from _amago import FULL, SMOKE, amago, amago_train

from agentrl.models import ModelConfig
from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig
from agentrl.train.experiments import make_presets

TARGET = "memory_probe"

#: updates over which epsilon anneals in the cpu preset, at any length
ANNEAL_UPDATES = 150


def length_overrides(corridor_length: int, anneal_updates: int = ANNEAL_UPDATES):
    """The field changes that run a preset at ``corridor_length``, the
    epsilon anneal kept at ``anneal_updates`` updates."""
    return {
        "data.env_args": (("corridor_length", corridor_length),),
        "algo.explore_steps": anneal_updates * (corridor_length + 1),
    }


BASE = ExperimentConfig(
    name="amago_tmaze",
    algo=amago(
        trial_episodes=1,
        capacity=1000,
        grad_steps=4,
        explore_steps=ANNEAL_UPDATES * 11,
        eps_start=1.0,
        eps_end=0.01,
        explore_window=(0, 4),
        reward_scale=100.0,
    ),
    data=DataConfig(env="tmaze", env_args=(("corridor_length", 10),), source="random"),
    model=ModelConfig(num_layers=2, num_heads=2, d_model=32, d_ff=64, dropout=0.0),
    train=amago_train(600),
    eval=EvalConfig(num_tasks=200, num_episodes=1, acting="greedy"),
)
FULL_TMAZE = {
    **FULL,
    **length_overrides(100),
    "algo.explore_steps": 100_000,
    "algo.grad_steps": 16,
    "model.num_layers": 3,
    "model.num_heads": 4,
    "model.d_model": 128,
    "model.d_ff": 512,
}
SMOKE_TMAZE = {
    **SMOKE,
    **length_overrides(4, anneal_updates=2),
    "eval.num_tasks": 4,
}
PRESETS = make_presets(BASE, smoke=SMOKE_TMAZE, cpu={}, full=FULL_TMAZE, gpu=FULL_TMAZE)
