"""DPT on Point-Robot (50 goals, 45/5 split, H=20), held-out goals online.

The Decision-Pretrained Transformer predicts the oracle's action (the
clipped step straight to the goal) for a query state, given a set of
transitions of the same task. Point-Robot's actions are continuous, and the
registry's ``dpt`` source (uniform random roll-in with oracle labels) needs
discrete actions (``agentrl/sources/registry.py``: ``_need_oracle``), so the
contexts come from PPO learning histories instead (``source="ppo"``), which
record ``optimal_action`` because the env has an oracle. Contexts are
``context_size`` consecutive transitions of one history, so they mix early
(exploratory) and late (near-goal) PPO behaviour. The head is Gaussian (from
``complete_model_config``; ``--model.head mse`` also works). Online, the model
fills its context with its own transitions of earlier episodes.

- ``smoke``: ``agentrl train dpt_point_robot --preset smoke`` — 8 PPO
  histories of 20 episodes, 2 layers width 16, context 20, 40 steps;
  seconds after compiling. Plumbing only.
- ``cpu``: ``agentrl train dpt_point_robot --preset cpu`` then
  ``agentrl eval runs/dpt_point_robot-cpu`` — 450 histories (10 per training
  goal) of 50 PPO episodes, 4 layers width 32, context 40, 6,000 steps of
  batch 64 (estimated 15-25 min on 2 cores; not yet run end to end).
  Expected: on the 5 held-out goals the return rises within a few episodes
  towards the oracle's.
- ``full``: DPT's settings (embedding 32, 4 layers, batch 64, AdamW lr 1e-3,
  wd 1e-4) at 100k updates on 4,500 histories; 40 evaluation episodes; for
  a GPU.
"""

from agentrl.train.config import DataConfig
from agentrl.train.presets import dpt_experiment

ENV_ARGS = (("num_goals", 50),)  # finite goals: task_split(0.9) gives 45 / 5


def _config(tasks, episodes, layers, width, context, steps, batch, lr, eval_eps):
    data = DataConfig(
        env="point_robot",
        env_args=ENV_ARGS,
        source="ppo",
        num_tasks=tasks,
        num_episodes=episodes,
        split_fraction=0.9,
    )
    return dpt_experiment(
        "dpt_point_robot",
        data,
        layers=layers,
        width=width,
        heads=2,
        context=context,
        steps=steps,
        batch=batch,
        lr=lr,
        eval_tasks=5,
        eval_episodes=eval_eps,
    )


PRESETS = {
    "smoke": lambda: _config(8, 20, 2, 16, 20, 40, 16, 1e-3, 4),
    "cpu": lambda: _config(450, 50, 4, 32, 40, 6000, 64, 1e-3, 40),
    "full": lambda: _config(4500, 100, 4, 32, 40, 100_000, 64, 1e-3, 40),
}
