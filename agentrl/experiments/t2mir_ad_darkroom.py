"""T2MIR-AD vs AD on Dark Room at equal training budget.

Same data, optimiser and number of updates as ``ad_darkroom``; the model's
last layer FFN becomes T2MIR's token-wise MoE (6 experts, top-2, noisy
gating, balance weight 0.1) in parallel with the task-wise MoE (8 experts,
top-2, contrastive weight 0.01, EMA router tau 0.005), each half the width.
Batches hold B/2 tasks x 2 segments for the contrastive loss.

- ``smoke``: seconds; ``cpu``: as ``ad_darkroom`` cpu (compare with it,
  3 training seeds each); ``full``: the paper's AD settings for Dark Room
  (12 task experts; 300k updates on a GPU).
"""

import dataclasses

from agentrl.algos import T2MIR
from agentrl.experiments import ad_darkroom
from agentrl.experiments._t2mir import moe_last
from agentrl.train.experiments import make_presets

BASE = dataclasses.replace(
    ad_darkroom.BASE,
    name="t2mir_ad_darkroom",
    algo=T2MIR(
        base=ad_darkroom.BASE.algo,
        balance_weight=0.1,
        contrastive_weight=0.01,
        ema_tau=0.005,
    ),
    model=dataclasses.replace(
        ad_darkroom.BASE.model,
        moe_layers=(ad_darkroom.BASE.model.num_layers - 1,),
        token_experts=6,
        token_top_k=2,
        task_experts=8,
        task_top_k=2,
        task_routing="sequence",
    ),
)

LAYERS = BASE.model.num_layers
CHANGES = dict(
    smoke=moe_last(ad_darkroom.CHANGES["smoke"], LAYERS),
    cpu=moe_last(ad_darkroom.CHANGES["cpu"], LAYERS),
    full={**moe_last(ad_darkroom.CHANGES["full"], LAYERS), "model.task_experts": 12},
)
PRESETS = make_presets(BASE, **CHANGES)
