"""AD on Dark Room 9x9 (H=20) from Q-learning histories, held-out goals.

Algorithm Distillation (Laskin et al., 2023): a causal transformer imitates
the across-episode learning histories of tabular Q-learning on the training
goals; on held-out goals it should improve episode after episode in context.

Presets (times measured on the 2-core CPU of the development machine):

- ``smoke``: ``agentrl train ad_darkroom --preset smoke`` — 16 histories of
  40 episodes, a 2-layer width-32 model, 60 steps; seconds. Checks plumbing.
- ``cpu``: ``agentrl train ad_darkroom --preset cpu`` then
  ``agentrl eval runs/ad_darkroom-cpu`` — 260 histories (4 per training
  goal) of 150 episodes, 4 layers width 64, context 4 episodes, 4,000 steps.
  Expected: the return on the 16 held-out goals rises over 50 episodes
  (target: mean normalized score of the last 10 episodes >= 0.8).
- ``full``: the paper's scale (REFERENCES.md, AD-ε Dark Room settings):
  4 layers, width 512, batch 512, lr 3e-4, 300k updates; for a GPU.
"""

from agentrl.models import ModelConfig
from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig, TrainConfig


def smoke() -> ExperimentConfig:
    return ExperimentConfig(
        name="ad_darkroom",
        algo="ad",
        data=DataConfig(
            env="darkroom", source="q_learning", num_tasks=16, num_episodes=40
        ),
        model=ModelConfig(num_layers=2, num_heads=2, d_model=32, d_ff=64, max_steps=40),
        train=TrainConfig(
            steps=60,
            batch_size=8,
            lr=1e-3,
            warmup_steps=10,
            context_episodes=2,
            log_every=10,
            checkpoint_every=30,
        ),
        eval=EvalConfig(num_tasks=8, num_episodes=6),
    )


def cpu() -> ExperimentConfig:
    return ExperimentConfig(
        name="ad_darkroom",
        algo="ad",
        data=DataConfig(
            env="darkroom", source="q_learning", num_tasks=260, num_episodes=150
        ),
        model=ModelConfig(
            num_layers=4, num_heads=4, d_model=64, d_ff=256, max_steps=80, dropout=0.1
        ),
        train=TrainConfig(
            steps=4000,
            batch_size=32,
            lr=1e-3,
            warmup_steps=200,
            context_episodes=4,
            log_every=50,
            checkpoint_every=500,
        ),
        eval=EvalConfig(num_tasks=16, num_episodes=50),
    )


def full() -> ExperimentConfig:
    return ExperimentConfig(
        name="ad_darkroom",
        algo="ad",
        data=DataConfig(
            env="darkroom", source="q_learning", num_tasks=65 * 100, num_episodes=1000
        ),
        model=ModelConfig(
            num_layers=4, num_heads=8, d_model=512, d_ff=2048, max_steps=80, dropout=0.1
        ),
        train=TrainConfig(
            steps=300_000,
            batch_size=512,
            lr=3e-4,
            warmup_steps=10_000,
            context_episodes=4,
            log_every=100,
            checkpoint_every=5000,
        ),
        eval=EvalConfig(num_tasks=16, num_episodes=100),
    )


PRESETS = {"smoke": smoke, "cpu": cpu, "full": full}
