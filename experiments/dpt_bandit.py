"""DPT on the 5-arm Gaussian bandit (H=500, noise standard deviation 0.3).

Pretraining contexts come from the DPT paper's Dirichlet-mixed random
policy; labels are the best arm. Online, the model builds its own context
from its own pulls. Compared against UCB1, the DPT reference's UCB1.0
(``ucb_dpt``), Thompson sampling and random on the same held-out bandits by
cumulative regret.

Fidelity to the DPT reference code (``docs/fidelity.md``):

- Reward noise: the paper's text says "variance 0.3", its code draws
  ``means[a] + normal(0, 0.3)``, a standard deviation of 0.3, and its
  numbers come from the code; every preset uses the code's
  (``noise_std=0.3``, variance 0.09).
- Baselines: Thompson sampling with the reference's prior matched to the
  arm means (N(0.5, 1/12)) and the true noise variance; UCB as the
  reference's "UCB1.0" (``mean + 1 / max(1, sqrt(n))``, no log t:
  ``ucb_dpt``) beside textbook UCB1 (``ucb``, which explores far more).

Since session 50 the roll-in draws its mixing weight on the reference's
grid {0, 0.1, ..., 1} (it was uniform on [0, 1]), ``ucb_dpt`` pulls each
arm once first, as the reference's vectorised UCB1.0 does, and the loss
leaves out the query-only position, as the reference's training pass
(docs/fidelity.md item 14). Re-run so (``agentrl reproduce dpt_bandit
--preset cpu --seeds 5 --controls``, 2-core AMD EPYC, two seeds at a
time; ``repro_dpt_bandit_cpu``): regret 19.3 vs Thompson 9.23,
``ucb_dpt`` 10.44, UCB1 48.9, random 168 — **2.09x Thompson [1.87,
2.31]** (not met; per seed 2.36, 2.01, 1.86, 2.01, 2.25); beats rewards
zeroed / shuffled and an empty context by +151 / +105 / +147 return.
Against the run before (same seeds and bandits,
``repro_dpt_bandit_cpu_before_session50``): DPT +2.0 [−1.3, 7.0]
return, not resolved (``paired_dpt_bandit_session50_vs_before``);
``ucb_dpt`` −0.91 [−1.29, −0.55] (its forced first pulls cost a little:
``paired_ucb_dpt_untried_first_vs_before``). The measurements below
were made before.

- ``smoke``: seconds, H=50; plumbing only.
- ``cpu``: ``agentrl reproduce dpt_bandit --preset cpu`` —
  H=500, 4 layers width 32 with one head and 100,000 pretraining tasks (both
  the paper's), 8,000 steps of batch 8 and the paper's 200 held-out bandits
  (evaluation decodes with a KV cache, ~30 s). One step takes 0.185 s alone
  on the 2-core CPU, so about 27 minutes a seed alone with data and
  evaluation (the three seeds ran side by side in 67 minutes each). Target:
  DPT regret at H=500 within 1.2x of Thompson sampling and far below random.
  Measured with the reference's noise and baselines (5 seeds x 200 test
  bandits, each seed with its own data and split; validation chose
  sampling, the reference's rule, in 4 seeds and sampling until the first
  reward in seed 3): regret 21.3 vs Thompson 9.23, ``ucb_dpt`` 9.53, UCB1
  48.9, random 169 — **2.31x Thompson [1.95, 2.83]** (not met; per seed
  2.17, 2.09, 1.80, 3.31, 2.26), 0.13x random (met). It learns in
  context: it beats the three context controls (``--controls``; rewards
  zeroed, shuffled, an empty context: +146, +125, +150 trial return, CIs
  above 0; each control is at random level); expert distillation does not
  apply, its roll-in data do not learn. DPT's cumulative regret follows
  Thompson's for the first ~50 pulls and then keeps rising by ~0.025 a
  pull where Thompson's flattens: late in the horizon it still pulls worse
  arms now and then. The budget is the likely limit: 8,000 updates of
  batch 8 see 64,000 contexts, 0.64 of one pass over the 100,000 tasks
  (the paper trains on batches of 64 for many passes). With the earlier
  noise (std 0.55) the same preset gave 1.57x a weaker Thompson (32.6 vs
  20.8), and 6,000 updates on 10,000 tasks gave 31.9, so neither more
  distinct tasks nor a third more updates moved it there; at 700 updates
  it was 146. The learning curve over the kept checkpoints
  (``--scan-checkpoints``, validation bandits, normalized score of the
  trial, 5 seeds): 0.815 at 4,000 updates, 0.842 at 6,000, 0.862 at 8,000
  (Thompson scores 0.93 on the test bandits): still rising at the end, by
  less as the cosine schedule decays the learning rate, so the cpu
  budget, not a plateau of the method, is where it stops. The ``gpu``
  preset (30,000 updates of batch 64, 19 passes) is the test of the
  budget. Protocol: the updates were raised from 700 to 6,000 and then 8,000
  (with the paper's head and task count) after reading regret on the
  held-out bandits of the time (sessions before the validation protocol),
  drawn with the key seed 0's test bandits come from today; seeds 1-4's
  bandits were never looked at, and in each DPT beats the three context
  controls by +57 to +158 return (CIs above 0; session 57, from the
  record), so the in-context verdict does not rest on seed 0.
- ``gpu``: the paper's settings (100,000 tasks, embedding 32, 4 layers,
  1 head, batch 64, AdamW lr 1e-4) for 30,000 updates. Measured on one
  H200 (2026-11-28, device check, 1 seed, ``--controls``): 228 s in all
  (histories 12 s, compile 19 s, 30,000 updates ~150 s, evaluation and
  controls the rest); regret 17.5 vs Thompson 8.86, **1.97x [1.84,
  2.11]** (not met; the cpu preset's 2.31x), 0.10x random; beats its three
  controls by +149 to +157 trial return. Those updates ran every backward
  matmul in float32 (fixed since; not re-measured).
- ``full``: the reference's (100,000 tasks, embedding 32, 4 layers, 1
  head, batch 64, AdamW lr 1e-4 constant, wd 1e-4, no warm-up, no
  gradient clipping) for the 500,000 updates its script evaluates (epoch
  400 of 1,250 batches: ``_dpt.reference_updates``). Until session 44 it
  ran 100,000 updates with warm-up, cosine decay and a clip at norm 1.
- Named deviations of the smaller presets: the ``gpu`` preset's 30,000
  updates are 6% of the reference's 500,000 (sized for a few minutes of one
  GPU, issue 34), the ``cpu`` preset's 8,000 of batch 8 about 0.2% of its
  contexts; both use warm-up, cosine decay and a clip at norm 1, where the
  reference trains at a constant rate unclipped (not compared). So the
  1.2x-Thompson target is judged here at a small fraction of the
  reference's training.
"""

from _dpt import REFERENCE_OPTIMISER, dpt_base, reference_updates, width_fields

from agentrl.train.config import DataConfig
from agentrl.train.experiments import make_presets, steps_fields


def _env_args(horizon: int) -> tuple:
    # DPT's reference code: normal(0, 0.3) noise, a standard deviation
    return (("num_arms", 5), ("horizon", horizon), ("noise_std", 0.3))


BASE = dpt_base(
    "dpt_bandit",
    DataConfig(
        env="gaussian_bandit",
        env_args=_env_args(500),
        source="dpt_rollin",
        num_tasks=100_000,
        num_episodes=1,
    ),
    layers=4,
    width=32,
    heads=1,
    context=500,
    # ~0.19 s a step at context 500, batch 8, one head, on the 2-core CPU
    steps=8000,
    batch=8,
    lr=1e-3,
    eval_tasks=200,
    eval_episodes=1,
)
CHANGES = dict(
    smoke={
        "data.env_args": _env_args(50),
        "context_size": 50,
        "data.num_tasks": 64,
        "model.num_layers": 2,
        "model.num_heads": 2,
        **width_fields(16),
        **steps_fields(40),
        "train.batch_size": 16,
        "eval.num_tasks": 16,
    },
    cpu={},
    gpu={
        **steps_fields(30_000),
        "train.batch_size": 64,
        "train.lr": 1e-4,
        "model.compute_dtype": "bfloat16",
    },
    full={
        **steps_fields(reference_updates(400)),
        **REFERENCE_OPTIMISER,
        "train.batch_size": 64,
        "train.lr": 1e-4,
    },
)
PRESETS = make_presets(BASE, **CHANGES)

# the targets `agentrl reproduce` judges it by (agentrl.evaluate.targets)
TARGET = "dpt_bandit"
