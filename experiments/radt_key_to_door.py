"""RA-DT on Dark Key-to-Door 9x9 (H=40): a short context plus retrieved pieces.

Retrieval-Augmented Decision Transformer (algorithm, settings and
deviations as ``radt_darkroom``; docs/references.md "RA-DT") on
``ad_eps_key_to_door``'s noise-curriculum histories, presets and held-out
(key, door) pairs. The model sees ``context_len=20`` steps of its own
history (half an episode, as the reference's 50 of a 100-step episode) and
one retrieved piece of 20 steps: 40 tokens against AD-ε's 4 episodes (160
steps), the same quarter as on Dark Room. Pieces start every 10 steps and
are keyed by their first 10.

The environment is AD-ε's Key-to-Door with ``ad_eps_key_to_door``'s
tasks and starts: any two distinct cells and any start cell, where AD-ε's
reference keeps only pairs differing in both coordinates and never starts
on the key (that docstring's deviations; ``layout="off_axis"`` gives the
reference's, the presets keep the default every result below was made
on). It is not RA-DT's own Dark Key-Door: ml-jku/RA-DT runs MiniHack's
(``MiniHack-KeyDoor-Dark-Dense-10x10-v0``, ``src/envs/minihack_utils.py``,
``configs/env_params/dark_keydoor.yaml``): 10x10, every episode from
(0, 0), 80 training and 20 evaluation (key, door) pairs listed in the
config (key and door from two independent permutations of the cells, so
some share a row or column and one training key is on the start),
episodes of 100 steps, 1 for the key once and 1 for every step on the
door with the key.

Acting: since session 55 the presets' rule is RA-DT's reference's,
``sample_above_median``, which a reproduction weighs against the usual
three on validation pairs; the numbers below chose among the three (on
Dark Room the added rule changed one seed's choice, for the worse:
``radt_darkroom``).

The paper's claim, tested here because a Key-to-Door context must carry
two cells and the key's state (on Dark Room 9x9 AD with a 20-step context
did as well as with 80, so retrieval had nothing to add): in-context
improvement comparable to AD's with a fraction of AD's context. Compare
with AD-ε at 160 and at 40 steps of context on the same seeds (same data,
splits and evaluation keys)::

    agentrl reproduce radt_key_to_door --preset cpu --seeds 5 --controls
    agentrl reproduce ad_eps_key_to_door --preset cpu --seeds 5
    agentrl reproduce ad_eps_key_to_door --preset cpu --seeds 3 \\
        --set algo.context_episodes=1
    python benchmarks/paired_repro.py ...   (docs/results.md)

Measured on ``ad_eps_key_to_door``'s data as generated before session 50
(its per-step ε count then ran ahead of the reference's curriculum:
docs/fidelity.md item 14); not re-run.

- ``smoke``: seconds; plumbing.
- ``cpu``: ``ad_eps_key_to_door``'s cpu sizes (1,000 histories of 40
  episodes, 3 layers width 64, 3,000 updates, 16 test pairs x 60 episodes);
  the memory holds 1,000 x 159 pieces; about 5 minutes of training a seed
  and ~10 of evaluation with the controls. Measured (session 51, with
  the source's ε linear in episodes, docs/fidelity.md item 14, and
  training retrieval kept to the window's past, item 16; 5 seeds x 16
  test pairs, ``--controls``, validation chose ``sample``, 4 of 5
  resolved): return 0.25 -> 0.50 [0.43, 0.57] over the last 10 of 60
  episodes (per seed 0.44, 0.57, 0.44, 0.53, 0.51); minus AD-ε at 160
  steps on the same seeds and pairs -0.02 [-0.19, 0.13] (the claim holds
  at this size); beats rewards zeroed / shuffled / an empty context by
  +0.26 / +0.24 / +0.24, ties expert distillation (+0.004 [-0.10, 0.10]);
  against the run before both fixes +0.05 [-0.03, 0.13]
  (``paired_radt_key_to_door_session51``); minus AD-ε with the same 40
  steps of context (``--set algo.context_episodes=1``, seeds 0-2, 0.27)
  +0.21 [0.09, 0.31] (``paired_radt_key_to_door_context_lengths_session51``).
  Before them (session 38): 0.20
  -> 0.45 [0.38, 0.51], minus AD-ε -0.05 [-0.14, 0.05], minus AD-ε at 40
  steps +0.17 [0.06, 0.26] (3 seeds), expert distillation -0.18 [-0.31,
  -0.05]. At 4x the updates (``--set train.steps=12000``, seeds 0-1,
  ~8 minutes of training a seed beside another job), re-run in session 52
  after both fixes: it falls to random level, 0.19 -> 0.25 (random 0.21;
  -0.25 [-0.44, -0.10] against itself at 3,000 updates) where AD-ε
  climbs to 1.25 (-1.00 [-1.20, -0.81]); against its 12,000-update run
  before the fixes +0.02 [-0.14, 0.20]
  (``paired_radt_key_to_door_steps12000_session52``): neither fix
  explains the fall. Before them: 0.23, -0.18 [-0.26, -0.07] against
  itself at 3,000, -1.05 [-1.26, -0.84] against AD-ε at 1.29; the
  measurements below predate the fixes. Why
  (session 37, ``radt_key_to_door_diagnostic``): in seed 0 mostly the
  acting rule, ``sample_then_greedy`` chosen on 16 validation pairs
  within the CIs of ``sample``; under ``sample`` that model scores 0.39
  on test (a diagnostic, not the reported number); in seed 1 (``sample``
  at both lengths) a decline, 0.50 -> 0.29. Chosen on 64 validation pairs
  (``--set eval.validation_tasks=64``, training reused), both seeds pick
  ``sample``: 0.41 [0.29, 0.53] at 3,000 updates, 0.34 [0.26, 0.43] at
  12,000, paired -0.07 [-0.24, 0.10]: more updates leave RA-DT where it
  was. The 3,000-update records re-chosen on 64 validation pairs (session
  38: RA-DT with controls, AD-ε, AD-ε at 40 steps, all seeds): ``sample``
  in every seed, each choice resolved, every number as above. Not the
  same-task retrieval bonus (``--set algo.task_weight=0``). "Not
  memorisation (training pairs score as held-out ones)" is withdrawn:
  ``agentrl eval --split train`` then drew its pairs from the split's
  ~5,184 training ids, while the 1,000 histories cover 1,000 of them, so
  most pairs scored were never trained on (fixed in session 48). Re-run
  in session 49 on pairs the runs trained on (seeds 0-1 retrained at
  3,000 updates, ``sample`` chosen on 64 validation pairs in both, 16
  pairs each): training pairs 0.40 [0.35, 0.46], held-out test pairs
  0.41 [0.36, 0.46] (random 0.18 / 0.21): training pairs score as
  held-out ones, no memorisation at this budget
  (``radt_key_to_door_memorisation``).
- ``gpu``: ``ad_eps_key_to_door``'s sizes; not run.
- ``full``: ``ad_eps_key_to_door``'s data with RA-DT's own training
  (``radt_darkroom.REFERENCE_TRAINING``); not run.
"""

import dataclasses

import ad_eps_key_to_door
from ad_eps_darkroom import (
    REFERENCE_ACTIVATION,
    REFERENCE_ADAM_AND_DROPOUT,
    REFERENCE_TOKENS,
)
from radt_darkroom import ACTING, REFERENCE_TRAINING

from agentrl.algos import RADT
from agentrl.train.experiments import make_presets

BASE = dataclasses.replace(
    ad_eps_key_to_door.BASE,
    name="radt_key_to_door",
    algo=RADT(context_len=20, piece_len=20, query_len=10, piece_stride=10),
    eval=dataclasses.replace(ad_eps_key_to_door.BASE.eval, acting=ACTING),
)
# AD's fields that RA-DT does not have (its context is set in steps),
# AD-eps's reference Adam, dropout, exact GELU and tokens (RA-DT trains as
# its own reference, a Hugging Face GPT-2) and its acting rule (RA-DT acts by
# its own)
AD_ONLY = (
    "context_episodes", "episode_stride", "eval.acting",
    *REFERENCE_ADAM_AND_DROPOUT, *REFERENCE_ACTIVATION, *REFERENCE_TOKENS,
)  # fmt: skip
CHANGES = {
    preset: {
        k: v for k, v in ad_eps_key_to_door.CHANGES[preset].items() if k not in AD_ONLY
    }
    for preset in ("smoke", "cpu", "gpu", "full")
}
CHANGES["smoke"].update(
    {
        "algo.context_len": 5,
        "algo.piece_len": 5,
        "algo.query_len": 3,
        "algo.piece_stride": 3,
    }
)
CHANGES["full"].update(REFERENCE_TRAINING)
PRESETS = make_presets(BASE, **CHANGES)
