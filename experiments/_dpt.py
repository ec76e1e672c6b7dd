"""What every DPT experiment shares: the model shape and optimiser settings.

A DPT run uses the ``transition`` token layout (the window, one query plus
``context_size`` transitions, is derived from the algorithm), a feed-forward
width of four times the model width, AdamW with weight decay 1e-4 and the
derived warm-up (a tenth of the steps, at most 500).

The reference (jon--lee/decision-pretrained-transformer, ``train.py`` and
``run_*.sh``) trains with AdamW at a constant learning rate, no warm-up and
no gradient clipping, batches of 64 over its 80,000 training contexts
(1,250 updates an epoch), and its scripts evaluate epoch 400 on the
bandit (500,000 updates) and epoch 200 on Dark Room (250,000): the
``full`` presets (:data:`REFERENCE_OPTIMISER`, :func:`reference_updates`).
The smaller presets keep the library's warm-up, cosine decay and clip at
norm 1 (not the reference's; not compared) over far fewer updates.

The reference's model (``net.py``) is a Hugging Face ``GPT2Model`` fed
``inputs_embeds``: one linear map of the concatenated ``(s, a, s', r)``
(the query a state with zeros), to which GPT-2 adds its learned absolute
position embeddings. agentrl embeds each field on its own with a type
vector per token kind and rotates queries and keys by the token's
position (RoPE, relative): named, not matched (both let the model tell
context positions apart; neither is order-invariant).
"""

from agentrl.algos import DPT
from agentrl.models import ModelConfig
from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig, TrainConfig
from agentrl.train.experiments import steps_fields


def dpt_base(
    name: str,
    data: DataConfig,
    *,
    layers: int,
    width: int,
    heads: int,
    context: int,
    steps: int,
    batch: int,
    lr: float,
    eval_tasks: int,
    eval_episodes: int,
    obs_encoding: str = "table",
) -> ExperimentConfig:
    """A DPT :class:`ExperimentConfig` on ``data`` with ``context`` transitions."""
    cadence = steps_fields(steps)
    return ExperimentConfig(
        name=name,
        algo=DPT(context_size=context),
        data=data,
        model=ModelConfig(
            num_layers=layers,
            num_heads=heads,
            d_model=width,
            d_ff=4 * width,
            token_layout="transition",
            obs_encoding=obs_encoding,
        ),
        train=TrainConfig(
            steps=steps,
            batch_size=batch,
            lr=lr,
            weight_decay=1e-4,
            log_every=cadence["train.log_every"],
            checkpoint_every=cadence["train.checkpoint_every"],
        ),
        eval=EvalConfig(num_tasks=eval_tasks, num_episodes=eval_episodes),
    )


#: The reference's optimiser beside AdamW: constant rate, no warm-up, no clip.
REFERENCE_OPTIMISER = {
    "train.schedule": "constant",
    "train.warmup_steps": 0,
    "train.grad_clip": None,
}

#: Training contexts a reference epoch passes over (80% of 100,000), in
#: batches of 64.
REFERENCE_UPDATES_PER_EPOCH = 80_000 // 64


def reference_updates(epochs: int) -> int:
    """The updates of ``epochs`` reference epochs (400 bandit, 200 Dark Room)."""
    return epochs * REFERENCE_UPDATES_PER_EPOCH


def width_fields(width: int) -> dict[str, int]:
    """``model.d_model`` and the matching ``model.d_ff``."""
    return {"model.d_model": width, "model.d_ff": 4 * width}
