"""T2MIR-DPT vs DPT on Dark Room at equal training budget.

``dpt_darkroom`` with T2MIR's MoE in the last layer (token-wise: 6 experts,
top-2, balance weight 0.01; task-wise: 8 experts, top-2, contrastive weight
0.001 as the paper uses for DPT Dark Room). ``smoke``/``cpu``/``full`` as in
``dpt_darkroom``.
"""

import dataclasses

from agentrl.train.config import ExperimentConfig
from agentrl.train.experiments import load_experiment


def _preset(preset: str) -> ExperimentConfig:
    config = load_experiment("dpt_darkroom", preset)
    model = dataclasses.replace(
        config.model,
        moe_layers=(config.model.num_layers - 1,),
        balance_weight=0.01,
        contrastive_weight=0.001,
        task_routing="sequence",
    )
    return dataclasses.replace(
        config, name="t2mir_dpt_darkroom", algo="t2mir_dpt", model=model
    )


PRESETS = {p: (lambda p=p: _preset(p)) for p in ("smoke", "cpu", "full")}
