"""Online in-context RL: learners trained by RL across multi-episode trials.

The other half of in-context RL (the first is distillation from datasets):
a learner whose weights are trained by PPO over trials of several episodes
of one task, on many tasks, so that its *activations* learn within a trial.

- :mod:`agentrl.online.cores`: input features (obs, previous action and
  reward, new-episode flag), the GRU core, the action heads;
- :mod:`agentrl.online.ppo`: :class:`TrialPPO`, PPO over trials with GAE
  across episode boundaries, rollout and update in one jitted program;
- :mod:`agentrl.online.transformer`: :class:`TransformerPPO`, the causal
  transformer of :mod:`agentrl.models` trained on whole trials, acting with
  its KV cache, with ReLIC's partial updates;
- :mod:`agentrl.online.program`: a config mapped onto its trainer
  (:meth:`agentrl.algos.Algorithm.make_online_train`), and
  :func:`train_members`: seeds x traced settings in one jitted program;
- :mod:`agentrl.online.fit`: training through :func:`agentrl.train.fit`
  (run dir, checkpoints of the whole trainer state, exact resume);
- :mod:`agentrl.online.agent`: the trained learner acting in context for
  :mod:`agentrl.evaluate`.

The algorithms are :class:`agentrl.algos.RL2` (``--algo rl2``) and
:class:`agentrl.algos.TransformerPPO` (``--algo transformer_ppo``).
"""

from agentrl.online.agent import RL2Agent
from agentrl.online.cores import ActionHead, GRUCore, step_features
from agentrl.online.ppo import PPOShape, TrialPPO, gae_across_episodes
from agentrl.online.program import (
    OnlineProgram,
    make_program,
    train_members,
    training_tasks,
)

__all__ = [
    "ActionHead",
    "GRUCore",
    "OnlineProgram",
    "PPOShape",
    "RL2Agent",
    "TrialPPO",
    "gae_across_episodes",
    "make_program",
    "step_features",
    "train_members",
    "training_tasks",
]
