"""RA-DT on Dark Room 9x9 (H=20): a short context plus retrieved pieces.

Retrieval-Augmented Decision Transformer (Schmied et al., 2024; code
ml-jku/RA-DT, settings in docs/references.md "RA-DT"), trained on the same
Q-learning histories as ``ad_darkroom`` (same presets, held-out goals). Its
model sees ``context_len=10`` steps of its own history (half an episode, as
the reference's 50 steps of a 100-step Dark Room episode) and one retrieved
piece of 10 steps (the reference: 25 before the matched point and 25 after),
20 steps in all against AD's 4 episodes (80 steps). Pieces start every 5
steps (the reference's ``cache_steps``) and are keyed by their first 5;
training retrieves from the training histories (top 50 by cosine, rescored
by similarity + same task, near-duplicates above 0.98 and pieces
overlapping the window skipped), evaluation from the agent's own finished
steps on the task (rescored by similarity + return), as the reference's
separate evaluation memory.

Deviations (module docstring of :mod:`agentrl.algos.radt`): prepended
context instead of cross-attention; no return-to-go conditioning; a frozen
random-feature encoder instead of a frozen pretrained language model; a
piece's return is the reward inside it; exact search, no deduplication pass;
10% of training rows get an empty slot (the first evaluation episode has an
empty memory).

Presets (``agentrl train radt_darkroom --preset P``; compare with AD by
``agentrl reproduce radt_darkroom --compare ad_darkroom --preset P``):

- ``smoke``: ``ad_darkroom``'s smoke sizes; seconds. Plumbing only.
- ``cpu``: ``ad_darkroom``'s cpu sizes (260 histories of 60 episodes, 3
  layers width 64, 2,000 updates of batch 32, 16 held-out goals x 50
  episodes); ``agentrl reproduce radt_darkroom --preset cpu --seeds 3``,
  about 12 minutes a seed on the shared 2-core machine (load average
  ~12 from other sessions; 7.5 minutes of it training at ~5 updates/s).
  The memory holds 260 x 239 = 62k pieces. The paper's claim: in-context
  improvement comparable to AD's with a fraction of AD's context.
  Measured (3 seeds x 8 test goals, validation chose ``sample`` in every
  seed, ``benchmarks/results/repro_radt_darkroom_cpu``): return 1.17 ->
  7.74 [4.21, 11.9] over the last 10 of 50 episodes, score 0.44 [0.23,
  0.68]; per seed 11.39 / 6.35 / 5.48. AD (80-step context) on the same
  seeds, data, splits and test goals (the committed
  ``repro_ad_darkroom_cpu``, seeds 0-2, trained 2026-11-24, not re-run
  here): 2.12 -> 11.72; paired difference RA-DT minus AD -3.99 [-7.14,
  -0.82] (bootstrap over the 24 seed x goal pairs). Not met at this size:
  comparable to AD in seed 0 only. One control, seed 0 only (``agentrl
  eval RUN --control zero_rewards``, the run's ``sample_then_greedy``
  rule): RA-DT 2.50 -> 8.50, with every reward it reads zeroed (window,
  pieces and the return utility) 0.38 -> 1.12, difference 7.38 [3.37,
  11.6] (``repro_radt_darkroom_cpu/control_zero_rewards_seed0``): the
  rise needs the rewards in context. Context lengths (session 34, 3
  seeds, docs/results.md): RA-DT with ``--set algo.context_len=30`` (40
  tokens) 9.28; AD with 1 / 2 / 4 episodes (20 / 40 / 80 steps) 8.88 /
  9.78 / 9.95, all on one session's code; no paired difference resolved
  (RA-DT 40 minus AD 40 -0.50 [-5.25, 4.51], AD 80 minus RA-DT 20 +2.22
  [-4.11, 8.26]): AD with the same short context does as well, so the
  retrieval buys nothing measurable on this room. Not run: the other
  controls (shuffled rewards, empty context, expert distillation).
- ``gpu``: ``ad_darkroom``'s gpu sizes (2,600 histories of 100 episodes, the
  paper's AD model) with pieces every 10 steps (0.52M pieces); not run (no
  GPU lent to the session that wrote it).
- ``full``: ``ad_darkroom``'s full sizes; for a GPU.
"""

import dataclasses

import ad_darkroom

from agentrl.algos import RADT
from agentrl.train.experiments import make_presets

BASE = dataclasses.replace(
    ad_darkroom.BASE,
    name="radt_darkroom",
    algo=RADT(context_len=10, piece_len=10, query_len=5, piece_stride=5),
)
# AD's fields that RA-DT does not have (its context is set in steps)
AD_ONLY = ("context_episodes",)
CHANGES = {
    preset: {k: v for k, v in ad_darkroom.CHANGES[preset].items() if k not in AD_ONLY}
    for preset in ("smoke", "cpu", "gpu", "full")
}
CHANGES["gpu"]["algo.piece_stride"] = 10
CHANGES["full"]["algo.piece_stride"] = 10
PRESETS = make_presets(BASE, **CHANGES)
