"""DPT on Dark Room 10x10 (H=100) held-out goals, 40 online episodes.

As the DPT reference code (``docs/fidelity.md``): the agent starts in the
corner (0, 0), and the pretraining contexts are the reference's roll-in,
100 independent transitions per task, each from a uniformly drawn cell with
a uniformly random action (``rollin="uniform"``; every one has its
successor stored), with a query state drawn uniformly and independently of
the context (the reference's ``env.sample_state()``) and the optimal action
there as the label: the roll-in has 2 x 100 transitions a task, the context
is 100 consecutive ones and the query one of the other 100
(``algo.query="beyond_context"``). Until session 49 the roll-in had 100
and the query was one of the context's own states, every time (the
reference's query lies outside its context 37% of the time); the records
measured before then say so. Online, the model fills its context with its
own transitions from earlier episodes. Cells are embedded by row, column
and coordinates (``obs_encoding="grid"``) so that held-out goal cells share
parts with trained ones. ``--set 'data.source_args=[["rollin",
"trajectory"]]' --set algo.query=history --set data.num_episodes=1 --set
context_size=99`` gives the earlier default: one-episode random-walk
roll-ins from the start cell, the query from the same walk.

Measured with these settings (session 49, ``agentrl reproduce dpt_darkroom
--preset cpu --seeds 5``, 5 seeds x 10 test goals, each seed with its own
data and split; validation chose sampling in every seed, resolved in two):
return 0.90 in episode 1 to 29.7 [17.3, 41.8] over the last 10 of 40
episodes (score 0.32 [0.18, 0.45]; per seed 0.13, 0.32, 0.20, 0.52, 0.41;
random 0.64, oracle 91.2; ``repro_dpt_darkroom_cpu``). Against the same
seeds with the query one of the context's own states (the record below,
now ``repro_dpt_darkroom_cpu_query_in_context``): −6.2 [−16.1, 3.2]
return, paired per seed and goal
(``paired_dpt_darkroom_query_beyond_vs_in_context``): not resolved, so
the context-bound query does not explain DPT's distance from the paper
here.

Before session 49 (the query one of the context's states), with the
validation protocol (``agentrl
reproduce dpt_darkroom --preset cpu --seeds 3``, 3 seeds x 10 test goals,
each seed with its own data and split; validation chose sampling in every
seed): return 1.13 in episode 1 to 20.3 [10.2, 34.1] over the last 10 of
40 episodes (score 0.21 [0.10, 0.37]; random 0.62, oracle 90.7; per-seed
score 0.13, 0.33, 0.18): it improves in context, far from the paper's
near-optimal returns. Over 5 seeds (seeds 3 and 4 added, 0.63 and 0.66):
0.86 -> 35.97 [17.7, 53.9], score 0.39 [0.19, 0.58]. The earlier
measurements below, with the centre start and the trajectory roll-in, were
higher (0.58), and the uniform roll-in was already the weaker one there
(0.32): at this budget (6,000 updates on 10,000 roll-ins; the paper trains
on 100,000) contexts of uniformly drawn cells do not carry over to the
model's own online trajectories, and from the corner the far goals take
longer to find.

The earlier measurements (centre start, trajectory roll-in; the uniform
roll-in as an ablation):

- ``smoke``: seconds (H=20, 9x9); plumbing only.
- ``cpu``: ``agentrl reproduce dpt_darkroom --preset cpu`` —
  10x10, H=100, 4 layers width 32, 6,000 steps of batch 32 on 10,000
  roll-ins (about 9 minutes of training a seed alone, evaluation 2-3 more).
  Measured (3 seeds x 16 held-out goals, in
  ``repro_t2mir_dpt_darkroom_vs_dpt_darkroom_cpu`` as of a3e1502, with
  the centre start then): return 1.9 in episode
  1, 20.0 in episode 2, 45 by episode 5 and 56.5 [47.0, 65.2] over the last
  10 of 40 (random 0.99, oracle 96.8; score 0.58; per seed 39.2, 60.1,
  70.0): the paper's fast in-context improvement, short of its near-optimal
  returns. The same 6,000 updates with the 1,200-update preset's shorter
  warm-up (120 steps) gave 63.0 [52.4, 72.7] (``_steps6000``); 1,200
  updates left it near chance (1.44 -> 4.57, score 0.03). Protocol: the
  6,000 updates were chosen after that, before the validation protocol,
  on the held-out goals of the time, which are seed 0's validation and
  test goals today; seeds 1-4, never looked at, rise in every seed (1.0
  -> 30.1, 0.7 -> 19.6, 0.3 -> 48.5, 0.4 -> 37.9; seed 0 2.1 -> 12.6;
  session 57, from the 5-seed record). The paper's
  uniform roll-in at the same budget (``agentrl reproduce dpt_darkroom --preset
  cpu --set 'data.source_args=[["rollin","uniform"]]'``, 3 seeds) does
  worse here: 1.6 -> 32.4 [25.3, 39.2] (score 0.32; per seed 34.8, 45.2,
  17.1), paired difference -24.1 [-32.5, -15.4] against the trajectory
  roll-in, although its training loss is lower: contexts of uniformly drawn
  cells show the goal more often than the model's own online trajectories
  do, and at this budget it does not carry over (the paper trains far
  longer). That is why the preset kept the trajectory roll-in until it was
  matched to the reference; it now uses the reference's uniform roll-in
  and corner start; this roll-in comparison was not re-run with them.
- ``gpu``: the paper's model (embedding 32, 4 layers, one head as the
  reference code, batch 64, lr 1e-3) on its 100,000 roll-ins, 30,000
  updates, 40 evaluation episodes; sized for under 8 minutes on one H100
  (estimated, not measured: a step of this 0.05M-parameter model on 6,464
  tokens is launch-bound, assumed ~8 ms, so ~4 minutes of training).
- ``t2mir_setup`` / ``t2mir_setup_gpu``: T2MIR's own DPT setup (9x9, H=20, 81 goals
  65/16), to compare with ``t2mir_dpt_darkroom`` there, at the cpu and gpu
  budgets.
- ``full``: the reference's (100,000 tasks, embedding 32, 4 layers, one
  head, batch 64, AdamW lr 1e-3 constant, wd 1e-4, no warm-up, no gradient
  clipping, 40 evaluation episodes) for the 250,000 updates its script
  evaluates (epoch 200 of 1,250 batches: ``_dpt.reference_updates``).
  Until session 44 it ran 100,000 updates with warm-up, cosine decay and a
  clip at norm 1.
- Named deviations of the smaller presets: the ``gpu`` preset's 30,000
  updates are 12% of the reference's 250,000; it and the ``cpu`` preset
  use warm-up, cosine decay and a clip at norm 1, where the reference
  trains at a constant rate unclipped (not compared).
"""

import dataclasses

from _dpt import REFERENCE_OPTIMISER, dpt_base, reference_updates, width_fields

from agentrl.train.config import DataConfig
from agentrl.train.experiments import make_presets, steps_fields


def _env_args(size: int, horizon: int) -> tuple:
    # DPT's reference code starts in the corner
    return (("size", size), ("horizon", horizon), ("start", "corner"))


# the reference's roll-in: independent transitions from uniform cells
UNIFORM = (("rollin", "uniform"),)


BASE = dpt_base(
    "dpt_darkroom",
    DataConfig(
        env="darkroom",
        env_args=_env_args(10, 100),
        source="dpt_rollin",
        source_args=UNIFORM,
        num_tasks=10_000,
        # 2 x 100 transitions: the context is 100, the query one of the rest
        num_episodes=2,
    ),
    layers=4,
    width=32,
    heads=2,
    # every transition of the uniform roll-in stores its successor
    context=100,
    steps=6000,
    batch=32,
    lr=1e-3,
    eval_tasks=16,
    eval_episodes=40,
    obs_encoding="grid",
)
# the query a state drawn independently of the context (the reference's
# env.sample_state()): one of the roll-in's transitions outside it
BASE = dataclasses.replace(
    BASE, algo=dataclasses.replace(BASE.algo, query="beyond_context")
)
CHANGES = dict(
    smoke={
        "data.env_args": _env_args(9, 20),
        "context_size": 20,
        "data.num_tasks": 64,
        "model.num_layers": 2,
        **width_fields(16),
        **steps_fields(40),
        "train.batch_size": 16,
        "eval.num_episodes": 4,
    },
    cpu={},
    gpu={
        **steps_fields(30_000),
        "data.num_tasks": 100_000,
        "train.batch_size": 64,
        "model.num_heads": 1,
        "model.compute_dtype": "bfloat16",
    },
    # T2MIR's DPT Dark Room: 9x9, H=20, 81 goals 65/16
    t2mir_setup={"data.env_args": _env_args(9, 20), "context_size": 20},
    t2mir_setup_gpu={
        "data.env_args": _env_args(9, 20),
        "context_size": 20,
        **steps_fields(30_000),
        "data.num_tasks": 100_000,
        "train.batch_size": 64,
        "model.num_heads": 1,
        "model.compute_dtype": "bfloat16",
    },
    full={
        **steps_fields(reference_updates(200)),
        **REFERENCE_OPTIMISER,
        "data.num_tasks": 100_000,
        "train.batch_size": 64,
        "model.num_heads": 1,
    },
)
PRESETS = make_presets(BASE, **CHANGES)
