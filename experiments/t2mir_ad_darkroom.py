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

from agentrl.train.config import ExperimentConfig
from agentrl.train.experiments import load_experiment


def _preset(preset: str) -> ExperimentConfig:
    config = load_experiment("ad_darkroom", preset)
    last = config.model.num_layers - 1
    model = dataclasses.replace(
        config.model,
        moe_layers=(last,),
        token_experts=6,
        token_top_k=2,
        task_experts=12 if preset == "full" else 8,
        task_top_k=2,
        task_routing="sequence",
        balance_weight=0.1,
        contrastive_weight=0.01,
    )
    return dataclasses.replace(
        config, name="t2mir_ad_darkroom", algo="t2mir_ad", model=model
    )


PRESETS = {p: (lambda p=p: _preset(p)) for p in ("smoke", "cpu", "full")}
