"""Decision models: causal transformer with KV cache, and T2MIR's MoE layers.

>>> from flax import nnx
>>> from agentrl.models import DecisionModel, ModelConfig
>>> cfg = ModelConfig(obs_size=25, action_size=5, d_model=32, d_ff=64,
...                   num_layers=2, num_heads=2, max_steps=16)
>>> model = DecisionModel(cfg, rngs=nnx.Rngs(0))
"""

from agentrl.models.attention import KVCache
from agentrl.models.config import ModelConfig
from agentrl.models.contrastive import (
    contrastive_loss,
    ema_init,
    ema_update,
    task_router_logits,
)
from agentrl.models.heads import (
    ModelOutput,
    greedy_action,
    log_prob,
    sample_action,
)
from agentrl.models.moe import (
    Router,
    balance_loss,
    cv_squared,
    router_logits,
    top_k_gates,
)
from agentrl.models.transformer import DecisionModel

__all__ = [
    "DecisionModel",
    "KVCache",
    "ModelConfig",
    "ModelOutput",
    "Router",
    "balance_loss",
    "contrastive_loss",
    "cv_squared",
    "ema_init",
    "ema_update",
    "greedy_action",
    "log_prob",
    "router_logits",
    "sample_action",
    "task_router_logits",
    "top_k_gates",
]
