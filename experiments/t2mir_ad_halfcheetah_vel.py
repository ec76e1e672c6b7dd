"""T2MIR-AD vs AD on HalfCheetah-Vel at equal training budget.

Same SAC learning histories, optimiser and number of updates as
``ad_halfcheetah_vel``; the last layer's FFN becomes T2MIR's token-wise MoE
(6 experts, top-2, noisy gating, balance weight 0.1) in parallel with the
task-wise MoE (8 experts, top-2, contrastive weight 0.01, EMA router tau
0.005), each half the width. Task-wise routing is per token
(``model.task_routing="token"``), as T2MIR's HalfCheetahVel-v0 AD config
(``task_hard_router: False``; docs/references.md). Deviations: those of
``ad_halfcheetah_vel`` (``experiments/_locomotion.py``), and the
contrastive loss reads the routers' logits where that config feeds it their
softmax (``add_softmax: True``).

- ``smoke``: ``agentrl train t2mir_ad_halfcheetah_vel --preset smoke`` —
  ``ad_halfcheetah_vel``'s smoke with the MoE. Plumbing only.
- ``cpu``: ``agentrl train t2mir_ad_halfcheetah_vel --preset cpu
  --data.path runs/ad_halfcheetah_vel-cpu/dataset`` (AD's histories, so the
  pair is compared on the same data) then ``agentrl eval``; measured beside
  AD (``agentrl reproduce t2mir_ad_halfcheetah_vel --compare
  ad_halfcheetah_vel --preset cpu --seeds 1``, 28 min with AD's run done):
  T2MIR-AD minus AD +0.38 [−3.0, 2.2] return, paired over 3 test
  velocities, 1 seed: no difference resolved (both flat; docs/mujoco.md).
  The paper reports T2MIR-AD ahead of AD on HalfCheetah-Vel. With T2MIR's
  own loader and evaluation (``--set algo.base.window_start=episode --set
  algo.base.episode_window=subset_by_return --set
  algo.base.eval_context=sorted_episodes``, session 34, the same data):
  -131.8 -> -123.9, minus AD with the same loader +1.39 [-0.34, 3.94]:
  not resolved either. On 8 SAC histories of 600 episodes (session 41,
  ``--set data.num_tasks=8 --set data.num_episodes=600`` and the loader's
  three; docs/mujoco.md): -124.6 -> -112.4, minus AD -3.77 [-8.65, 0.39].
- ``gpu`` / ``full``: ``ad_halfcheetah_vel``'s with the MoE (``full`` is
  T2MIR's AD budget: 100k updates, 10k warm-up).
"""

import ad_halfcheetah_vel
from _t2mir import moe_last, t2mir_ad

from agentrl.train.experiments import make_presets

# T2MIR's HalfCheetahVel-v0 AD config routes per token (task_hard_router False)
BASE = t2mir_ad(ad_halfcheetah_vel.BASE, "t2mir_ad_halfcheetah_vel", "token")

LAYERS = BASE.model.num_layers
CHANGES = {p: moe_last(c, LAYERS) for p, c in ad_halfcheetah_vel.CHANGES.items()}
PRESETS = make_presets(BASE, **CHANGES)
