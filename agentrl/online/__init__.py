"""Online in-context RL: learners trained by RL across multi-episode trials.

The other half of in-context RL (the first is distillation from datasets):
a learner whose weights are trained by PPO over trials of several episodes
of one task, on many tasks, so that its *activations* learn within a trial.

- :mod:`agentrl.rl.cores` (below this package, shared with the PPO
  source's GRU teacher): input features (obs, previous action and reward,
  new-episode flag), the GRU core, the action heads;
- :mod:`agentrl.online.ppo`: :class:`~agentrl.online.ppo.TrialPPO`, PPO over
  trials with GAE across episode boundaries, rollout and update in one
  jitted program;
- :mod:`agentrl.online.transformer`: the causal transformer of
  :mod:`agentrl.models` trained on whole trials, acting with its KV cache,
  with ReLIC's partial updates;
- :mod:`agentrl.online.program`: the two trainers as programs of a config
  (:func:`~agentrl.online.program.gru_program`,
  :func:`~agentrl.online.program.transformer_program`), which the
  algorithms that own them return from ``make_online_train``;
- :mod:`agentrl.online.agent`: the trained GRU learner acting in context.

The algorithms are :class:`agentrl.algos.rl2.RL2` (``--algo rl2``) and
:class:`agentrl.algos.transformer_ppo.TransformerPPO` (``--algo
transformer_ppo``); :func:`agentrl.sweep.online.train_members` trains seeds x
traced settings of either in one jitted program. Import names from the
modules.
"""
