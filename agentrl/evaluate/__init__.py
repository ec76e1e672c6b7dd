"""In-context evaluation: online/offline drivers, baselines, metrics, reports.

>>> from agentrl import envs, evaluate
>>> env = envs.make("bernoulli_bandit")
>>> res = evaluate.evaluate_methods(env, {"random": evaluate.RandomAgent(env)},
...                                 params, key, num_episodes=1)
>>> evaluate.write_results(res, "out/")  # results.json, results.md, *.png

Models are duck-typed (see :mod:`agentrl.agents.model_agents` for the
contract), so nothing here imports ``agentrl.models`` or ``agentrl.train``.
"""

from agentrl.agents.agent import RandomAgent
from agentrl.agents.context_set import Context, DPTModelAgent
from agentrl.agents.driver import (
    ModelPolicy,
    collect_context,
    make_model_agent,
    run_batched_agent,
    run_model_online,
    run_policy,
)
from agentrl.agents.rolling import ADModelAgent
from agentrl.evaluate.agents import (
    BASELINES,
    OracleAgent,
    make_baseline,
    per_task,
    register_baseline,
)
from agentrl.evaluate.evaluate import (
    EvalResult,
    evaluate_methods,
    evaluate_offline_dpt,
    evaluate_online,
    reference_returns,
)
from agentrl.evaluate.metrics import (
    aggregate,
    bootstrap_ci,
    bootstrap_curve,
    expected_regret,
    iqm,
    normalized_score,
    per_episode_returns,
    realized_regret,
    standard_error,
)
from agentrl.evaluate.report import summarize, write_results

__all__ = [
    "ADModelAgent",
    "BASELINES",
    "Context",
    "DPTModelAgent",
    "EvalResult",
    "ModelPolicy",
    "OracleAgent",
    "RandomAgent",
    "aggregate",
    "bootstrap_ci",
    "bootstrap_curve",
    "collect_context",
    "evaluate_methods",
    "evaluate_offline_dpt",
    "evaluate_online",
    "expected_regret",
    "iqm",
    "make_baseline",
    "make_model_agent",
    "normalized_score",
    "per_episode_returns",
    "per_task",
    "realized_regret",
    "reference_returns",
    "register_baseline",
    "run_batched_agent",
    "run_model_online",
    "run_policy",
    "standard_error",
    "summarize",
    "write_results",
]
