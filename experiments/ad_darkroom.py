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


def _config(
    context,
    tasks,
    episodes,
    layers,
    heads,
    width,
    dropout,
    steps,
    batch,
    lr,
    warmup,
    log_every,
    ckpt_every,
    eval_tasks,
    eval_episodes,
):
    return ExperimentConfig(
        name="ad_darkroom",
        algo="ad",
        data=DataConfig(
            env="darkroom", source="q_learning", num_tasks=tasks, num_episodes=episodes
        ),
        model=ModelConfig(
            num_layers=layers,
            num_heads=heads,
            d_model=width,
            d_ff=4 * width,
            max_steps=context * 20,
            dropout=dropout,
        ),
        train=TrainConfig(
            steps=steps,
            batch_size=batch,
            lr=lr,
            warmup_steps=warmup,
            context_episodes=context,
            log_every=log_every,
            checkpoint_every=ckpt_every,
        ),
        eval=EvalConfig(num_tasks=eval_tasks, num_episodes=eval_episodes),
    )


PRESETS = {
    "smoke": lambda: _config(2, 16, 40, 2, 2, 32, 0.0, 60, 8, 1e-3, 10, 10, 30, 8, 6),
    "cpu": lambda: _config(
        4, 260, 150, 4, 4, 64, 0.1, 4000, 32, 1e-3, 200, 50, 500, 16, 50
    ),
    "full": lambda: _config(
        4, 6500, 1000, 4, 8, 512, 0.1, 300_000, 512, 3e-4, 10_000, 100, 5000, 16, 100
    ),
}
