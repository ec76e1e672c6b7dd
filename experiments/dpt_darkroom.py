"""DPT on Dark Room 10x10 (H=100) held-out goals, 40 online episodes.

Pretraining: uniform random roll-in contexts on the 80 training goals,
optimal-action labels for a query state. Online, the model fills its
context with its own transitions from earlier episodes.

- ``smoke``: seconds (H=20, 9x9); plumbing only.
- ``cpu``: 10x10, H=100, 4 layers width 32, 6,000 steps on 20,000
  roll-ins; expected: held-out return rises within a few episodes.
- ``full``: the paper's (100,000 tasks, embedding 32, 4 layers, batch 64,
  lr 1e-3, 40 evaluation episodes).
"""

from agentrl.models import ModelConfig
from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig, TrainConfig


def _config(size, horizon, tasks, layers, width, steps, batch, lr, episodes):
    return ExperimentConfig(
        name="dpt_darkroom",
        algo="dpt",
        data=DataConfig(
            env="darkroom",
            env_args=(("size", size), ("horizon", horizon)),
            source="dpt",
            num_tasks=tasks,
            num_episodes=1,
        ),
        model=ModelConfig(
            num_layers=layers,
            num_heads=2,
            d_model=width,
            d_ff=4 * width,
            max_steps=horizon + 1,
            token_layout="transition",
        ),
        train=TrainConfig(
            steps=steps,
            batch_size=batch,
            lr=lr,
            weight_decay=1e-4,
            warmup_steps=min(500, steps // 10),
            context_size=horizon,
            log_every=max(steps // 50, 1),
            checkpoint_every=max(steps // 4, 1),
        ),
        eval=EvalConfig(num_tasks=16, num_episodes=episodes),
    )


PRESETS = {
    "smoke": lambda: _config(9, 20, 64, 2, 16, 40, 16, 1e-3, 4),
    "cpu": lambda: _config(10, 100, 20_000, 4, 32, 6000, 64, 1e-3, 40),
    "full": lambda: _config(10, 100, 100_000, 4, 32, 100_000, 64, 1e-3, 40),
}
