"""Acting: the floor every learner, source and baseline acts through.

- :mod:`agentrl.agents.agent`: the :class:`~agentrl.agents.agent.Agent`
  protocol (``init``/``start``/``act``/``update``), :class:`Step`, and the
  one scan driver that runs an agent on many tasks
  (:func:`~agentrl.agents.agent.run_agent_on_tasks`);
- :mod:`agentrl.agents.acting`: the acting rules (sample, greedy,
  sample-then-greedy) a trained model acts by;
- :mod:`agentrl.agents.model_agents`: model handles and what every model
  agent shares; one module per learner's agent: AD's rolling KV cache
  (:mod:`agentrl.agents.rolling`), DPT's context set
  (:mod:`agentrl.agents.context_set`), Meta-DT's prompted episodes
  (:mod:`agentrl.agents.prompted`);
- :mod:`agentrl.agents.driver`: a model run online or on a fixed policy,
  in blocks of tasks.

This floor sits below :mod:`agentrl.sources` and :mod:`agentrl.algos`, so
both build their agents from it; it imports only :mod:`agentrl.envs`,
:mod:`agentrl.history` and utilities (and, on its own floor, Meta-DT's
token builders in :mod:`agentrl.models.world_model` and the action heads'
sampling in :mod:`agentrl.models.heads`). Import names from the
modules.
"""
