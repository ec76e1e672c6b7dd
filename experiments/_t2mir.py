"""What the T2MIR experiments share: the MoE in the preset's last layer, and
T2MIR-AD over an AD experiment."""

import dataclasses
from typing import Any

from agentrl.algos import T2MIR
from agentrl.train.config import ExperimentConfig

#: T2MIR-AD's transformer block, in the presets that carry its model at its
#: scale: every T2MIR-AD config sets ``activation_function: leaky_relu``
#: (torch's slope 0.01; its dense layers' and its MoE experts', whose
#: ``LinearGLUExperts`` are, despite the name, ``down(act(up x))``), and its
#: layers are AMAGO's (``transformers_moe.py`` ``TransformerLayer``:
#: ``normformer_norms`` and ``head_scaling`` on by default, the MoE layer
#: with the attention's norm only): ``model.normformer``. (T2MIR-DPT's Dark
#: Room and Point-Robot configs take leaky ReLU too, in a GPT-2 block.)
T2MIR_AD_BLOCK = {"model.ffn_activation": "leaky_relu", "model.normformer": True}


def moe_last(change: dict[str, Any], base_layers: int) -> dict[str, Any]:
    """A preset's ``change`` with ``model.moe_layers`` set to its last layer."""
    layers = change.get("model.num_layers", base_layers)
    return {**change, "model.moe_layers": (layers - 1,)}


def t2mir_ad(
    ad: ExperimentConfig,
    name: str,
    task_routing: str,
    *,
    contrast_softmax: bool,
    task_experts: int = 8,
) -> ExperimentConfig:
    """T2MIR-AD at ``ad``'s budget: its last layer's FFN becomes T2MIR's
    token-wise MoE (6 experts, top-2, balance weight 0.1) beside the
    task-wise MoE (``task_experts``, top-2, contrastive weight 0.01, EMA
    router tau 0.005), the settings of T2MIR's AD configs;
    ``contrast_softmax`` is the config's ``add_softmax``."""
    return dataclasses.replace(
        ad,
        name=name,
        algo=T2MIR(
            base=ad.algo,
            balance_weight=0.1,
            contrastive_weight=0.01,
            ema_tau=0.005,
            contrast_softmax=contrast_softmax,
        ),
        model=dataclasses.replace(
            ad.model,
            moe_layers=(ad.model.num_layers - 1,),
            token_experts=6,
            token_top_k=2,
            task_experts=task_experts,
            task_top_k=2,
            task_routing=task_routing,
        ),
    )
