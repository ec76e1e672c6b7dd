"""PPO written once, for every learner that uses it.

- :mod:`agentrl.rl.ppo`: the clipped surrogate with value loss and entropy
  bonus (:func:`~agentrl.rl.ppo.ppo_loss`), GAE (:func:`~agentrl.rl.ppo.gae`,
  per episode or across episode boundaries), the optimizer chain
  (:func:`~agentrl.rl.ppo.optimizer`) and one SGD step
  (:func:`~agentrl.rl.ppo.sgd_step`);
- :mod:`agentrl.rl.nets`: the networks' pieces as pure functions of weight
  pytrees: dense layers and tanh MLPs, observation features, the action
  head (categorical or diagonal Gaussian) and the MLP actor-critic;
- :mod:`agentrl.rl.cores`: the recurrent core (RL²'s input features, the
  GRU actor-critic and its scan with a hand-written backward pass).

Used by the PPO source of learning histories (:mod:`agentrl.sources.ppo`)
and the online learners (RL², :mod:`agentrl.online.ppo`; transformer PPO,
:mod:`agentrl.online.transformer`). This package sits below both: it
imports only the environments' spaces.
"""
