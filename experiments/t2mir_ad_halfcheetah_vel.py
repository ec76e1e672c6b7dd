"""T2MIR-AD vs AD on HalfCheetah-Vel at equal training budget.

Same SAC learning histories, optimiser and number of updates as
``ad_halfcheetah_vel``; the last layer's FFN becomes T2MIR's token-wise MoE
(6 experts, top-2, noisy gating, balance weight 0.1) in parallel with the
task-wise MoE (8 experts, top-2, contrastive weight 0.01, EMA router tau
0.005), each half the width. Task-wise routing is per token
(``model.task_routing="token"``), as T2MIR's HalfCheetahVel-v0 AD config
(``task_hard_router: False``; docs/references.md), and the contrast reads
the router's softmax probabilities as that config's ``add_softmax: True``
(``algo.contrast_softmax=True``). Deviations: those of
``ad_halfcheetah_vel`` (``experiments/_locomotion.py``).

Session 50 brought T2MIR's MoE to its reference's form (docs/fidelity.md,
item 15): gates ``Linear(d, E) -> tanh -> Linear(E, E)`` without biases, the
unbiased CV^2 in the balance loss, the contrast over the other half-batch's
``B/2`` keys, the bilinear ``W`` drawn N(0, 1), and the contrast on the
router's softmax (``add_softmax``) where it read the logits. Every
measurement quoted here was made before these changes (session 50) and has
not been re-run.

- ``smoke``: ``agentrl train t2mir_ad_halfcheetah_vel --preset smoke`` —
  ``ad_halfcheetah_vel``'s smoke with the MoE. Plumbing only.
- ``cpu``: ``agentrl train t2mir_ad_halfcheetah_vel --preset cpu
  --data.path runs/ad_halfcheetah_vel-cpu/dataset`` (AD's histories, so the
  pair is compared on the same data) then ``agentrl eval``; or the paired
  protocol (``agentrl reproduce t2mir_ad_halfcheetah_vel --compare
  ad_halfcheetah_vel --preset cpu --seeds 3``, which computes each seed's
  histories and SAC baseline once for both: docs/mujoco.md). AD's ``cpu`` data
  (8 SAC histories of 600 episodes) and T2MIR's loader, as AD's preset.
  Measured, 4 seeds x 3 test velocities (sessions 41-42, seed 3 in
  session 44; record
  ``repro_t2mir_ad_halfcheetah_vel_vs_ad_halfcheetah_vel_cpu``): T2MIR-AD
  -137.3 -> -115.1, **minus AD +7.5 [-7.3, 30.2]** (paired): the paper's
  T2MIR-AD ahead is not resolved (per seed -3.8, +22.9, -9.4, +20.1; the
  mean rests on two fast velocities' +65.3 and +64.8, AD is ahead on 8 of
  12). On the 16 x
  120 preset before session 42 (1 seed, ``--set data.num_tasks=16 --set
  data.num_episodes=120``): AD's loader +0.38 [-3.0, 2.2]; T2MIR's loader
  +1.39 [-0.34, 3.94]; neither resolved (both flat; docs/mujoco.md).
- ``gpu`` / ``full``: ``ad_halfcheetah_vel``'s with the MoE, T2MIR's
  loader included (since session 43; ``full`` is T2MIR's AD budget: 100k
  updates, 10k warm-up).
"""

import ad_halfcheetah_vel
from _t2mir import moe_last, t2mir_ad

from agentrl.train.experiments import make_presets

# T2MIR's HalfCheetahVel-v0 AD config routes per token (task_hard_router
# False) and contrasts the router's softmax (add_softmax: True)
BASE = t2mir_ad(
    ad_halfcheetah_vel.BASE,
    "t2mir_ad_halfcheetah_vel",
    "token",
    contrast_softmax=True,
)

LAYERS = BASE.model.num_layers
CHANGES = {p: moe_last(c, LAYERS) for p, c in ad_halfcheetah_vel.CHANGES.items()}
PRESETS = make_presets(BASE, **CHANGES)
