"""Decision Transformer (return-conditioned) on Dark Room, as a baseline.

Trained on the same Q-learning histories as ``ad_darkroom`` (same presets,
windows of whole episodes) but conditioned on the return-to-go inside each
episode; it has no mechanism to learn across episodes, which is the contrast
with AD. DT's observation is the one-hot cell with the return-to-go / 20
appended (a vector), so it uses a linear embedding, not the grid encoding.
Online it acts like AD (one token per step on a rolling KV cache; or, with
``algo.eval_context=window``, the last 80 steps re-encoded every step as
the DT reference's ``get_action`` reads its last K steps)
with every episode conditioned on ``algo.target_return``, by default the best
episode return in its training data (20 here: a goal on the start cell),
as the DT and in-context RL literature set it.

- ``smoke``: seconds; plumbing.
- ``cpu``: ``agentrl reproduce dt_darkroom --compare ad_darkroom
  --preset cpu --seeds 3`` (about 4 minutes of training a seed alone).
  Measured with the validation protocol (3 seeds x 8 test goals, each
  seed with its own data and split; validation chose
  ``sample_then_greedy`` for both in every seed): DT 1.46 -> 2.95 [0.39,
  6.58] return over the last 10 of 50 episodes (score 0.16 [0.00, 0.36]),
  AD on the same data and budget 2.13 -> 11.72 [8.82, 14.5] (score 0.66,
  as its own reproduction); paired difference -8.78 [-12.6, -4.61]
  (``repro_dt_darkroom_vs_ad_darkroom_cpu``); over 5 seeds DT 0.88 ->
  2.23 [0.30, 4.74] (score 0.12 [0.01, 0.27]) vs AD 10.76, difference
  -8.53 [-11.5, -5.35]. Re-run with today's code (session 47, 5 seeds,
  ``repro_dt_darkroom_cpu``): DT 0.80 -> 1.46 [0.35, 2.91] (score 0.07),
  minus AD (``repro_ad_darkroom_cpu``'s seeds 0-4) -8.65 [-11.7, -5.37];
  with ``--set algo.eval_context=window`` (same weights) 1.94 [0.40, 4.05],
  +0.49 [-1.55, 2.77] over the rolling cache
  (``paired_dt_darkroom_eval_context_window``). DT stays far below AD; its
  small rise comes with the sample-then-greedy rule (a goal found by
  sampling is then kept). Before the protocol (greedy acting, one shared
  split, 3 seeds x 16 held-out goals): DT 0.69 -> 1.29
  [0.29, 2.54] return over the last 10 episodes (score 0.06; per seed 1.19,
  2.69, 0.00), AD on the same budget 1.54 -> 8.13 (score 0.48, as its own
  reproduction); paired difference -6.84 [-9.09, -4.57]. DT stays near
  random on goals it never saw: conditioning on the data's best return,
  which only goals near the start can reach, does not tell it where the goal
  is, and nothing in its training asks it to use earlier episodes. Not
  tried here (choices to be made on validation goals): a per-task target,
  sampled actions.
- ``gpu``, ``full``: ``ad_darkroom``'s with DT; for a GPU. Their FFN is
  AD's, GPT-2's tanh GELU, for the comparison at equal settings; DT's
  reference (kzl/decision-transformer ``gym/experiment.py``) uses ReLU
  (``--set model.ffn_activation=relu``).

``ad_darkroom``'s acting rule (``eval.acting="sample_then_greedy"``) is the
default; reproductions choose the rule per seed on validation goals. DT keeps
its episode-aligned windows (its return-to-go restarts at every episode).
"""

import dataclasses

import ad_darkroom

from agentrl.algos import DT
from agentrl.train.experiments import make_presets

BASE = dataclasses.replace(
    ad_darkroom.BASE,
    name="dt_darkroom",
    algo=DT(context_episodes=ad_darkroom.BASE.algo.context_episodes),
    model=dataclasses.replace(ad_darkroom.BASE.model, obs_encoding="table"),
)
# AD's demo and T2MIR-setup presets are not DT studies
SKIP = ("demo", "t2mir_setup", "t2mir_setup_gpu", "t2mir_setup_full")
PRESETS = make_presets(
    BASE, **{p: c for p, c in ad_darkroom.CHANGES.items() if p not in SKIP}
)
