"""Online and offline in-context evaluation on held-out tasks.

>>> env = envs.make("bernoulli_bandit", num_arms=5, horizon=100)
>>> params = jax.vmap(env.sample_params)(jax.random.split(key, 64))
>>> results = evaluate_methods(
...     env, {"model": model, "random": RandomAgent(env)}, params, key, 1)
>>> results["model"].returns.shape  # [task, episode]

Anything that acts is accepted: a per-task :class:`~agentrl.sources.Agent`
(run with ``run_agent_on_tasks``), a batched agent, a
:class:`~agentrl.agents.driver.ModelPolicy` (a trained model with its
algorithm's acting rule, e.g. from :meth:`agentrl.train.rundir.Run.policy`),
or a bare model with ``decode`` (AD-style) or ``predict_query`` (DPT-style)
run by :func:`~agentrl.agents.driver.run_model_online`. Every method evaluated
together gets the same tasks, the same key (so the same environment noise)
and the same random/oracle references for the normalized score.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import jax
import numpy as np
from tqdm.auto import tqdm

import agentrl.evaluate.metrics as metrics
import agentrl.evaluate.programs as programs
from agentrl.agents.agent import (
    RandomAgent,
    is_agent,
    is_batched,
    run_agent_on_tasks,
)
from agentrl.agents.context_set import Context
from agentrl.agents.driver import (
    ModelPolicy,
    infer_protocol,
    run_batched_agent,
    run_model_online,
    run_policy,
)
from agentrl.envs.base import env_horizon
from agentrl.evaluate.task_parameter import task_parameter_metadata
from agentrl.tables import json_safe


@dataclasses.dataclass
class EvalResult:
    """One method evaluated on a batch of tasks (NumPy arrays).

    Attributes:
      name: method name.
      returns: ``[task, episode]`` return of each episode.
      normalized: ``[task, episode]`` normalized score (random 0, oracle 1;
        NaN where undefined), or ``None`` without an oracle.
      regret: ``[task, step]`` cumulative expected regret (bandits) or ``None``.
      random_return, oracle_return: ``[task]`` per-episode references.
      metadata: env, protocol, sizes, wall time, ...
    """

    name: str
    returns: np.ndarray
    normalized: np.ndarray | None = None
    regret: np.ndarray | None = None
    random_return: np.ndarray | None = None
    oracle_return: np.ndarray | None = None
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def num_tasks(self) -> int:
        return self.returns.shape[0]

    @property
    def num_episodes(self) -> int:
        return self.returns.shape[1]

    def to_json(self) -> dict[str, Any]:
        """Plain-JSON form (lists; NaN becomes ``None``)."""
        out: dict[str, Any] = {"name": self.name, "metadata": self.metadata}
        for field in (
            "returns",
            "normalized",
            "regret",
            "random_return",
            "oracle_return",
        ):
            value = getattr(self, field)
            out[field] = (
                None
                if value is None
                else json_safe(np.asarray(value, np.float64).tolist())
            )
        return out


#: ``fold_in`` datum of the references' key (:func:`reference_key`).
REFERENCE_SALT = 2**32 - 1


def reference_key(key: jax.Array) -> jax.Array:
    """The key of :func:`reference_returns` next to methods evaluated on ``key``.

    Task ``i`` of a method runs on ``split(key, num_tasks)[i]``, which is
    ``fold_in(key, i)`` (threefry, partitionable), so ``fold_in(key, 1)`` was
    task 1's own key; no task index reaches :data:`REFERENCE_SALT`.
    """
    return jax.random.fold_in(key, REFERENCE_SALT)


def reference_returns(
    env: Any,
    params: Any,
    key: jax.Array,
    num_random_episodes: int = 32,
    env_key: str | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Per-task expected one-episode returns of random and oracle policies.

    Random: exact for bandits that state their arms' expected rewards
    (:func:`~agentrl.evaluate.metrics.random_return`), otherwise the mean
    of ``num_random_episodes`` episodes of :class:`RandomAgent`. Oracle:
    ``env.optimal_return`` (``None`` without an oracle). ``env_key`` (a
    string naming the environment and its arguments) keeps the compiled
    programs for the next call (:mod:`agentrl.evaluate.programs`).

    Returns:
      ``(random [task], oracle [task] | None)``.
    """
    random = metrics.random_return(env, params)
    if random is None:
        steps = num_random_episodes * env_horizon(env)
        run = _reference_program(
            env_key,
            "random",
            steps,
            lambda: jax.jit(
                lambda p, k: run_agent_on_tasks(env, RandomAgent(env), p, k, steps)[0]
            ),
        )
        random = run(params, key).episode_returns(num_random_episodes).mean(axis=-1)
    oracle = None
    if getattr(env, "has_oracle", False):
        build = lambda: jax.jit(jax.vmap(env.optimal_return))  # noqa: E731
        oracle = np.asarray(_reference_program(env_key, "oracle", 0, build)(params))
    return np.asarray(random, np.float32), oracle


def _reference_program(env_key: str | None, name: str, steps: int, build):
    """``build()``, kept under ``env_key`` when there is one."""
    if env_key is None:
        return build()
    return programs.kept(("reference", name, env_key, steps), build)


def _run(env, actor, params, key, num_episodes, kwargs):
    steps = num_episodes * env_horizon(env)
    if isinstance(actor, programs.Prepared):
        return actor.run(params, key), actor.kind
    if isinstance(actor, ModelPolicy):
        return run_policy(env, actor, params, key, steps)[0], "model"
    if is_batched(actor):
        fn = jax.jit(lambda p, k: run_batched_agent(env, actor, p, k, steps)[0])
        return fn(params, key), "batched_agent"
    if is_agent(actor):
        fn = jax.jit(lambda p, k: run_agent_on_tasks(env, actor, p, k, steps)[0])
        return fn(params, key), "agent"
    protocol = infer_protocol(actor, kwargs.pop("protocol", "auto"))
    history, _ = run_model_online(
        env, actor, params, key, num_episodes, protocol=protocol, **kwargs
    )
    return history, protocol


def evaluate_online(
    env: Any,
    agent_or_model: Any,
    params: Any,
    key: jax.Array,
    num_episodes: int,
    name: str | None = None,
    references: tuple[Any, Any] | None = None,
    **model_kwargs: Any,
) -> EvalResult:
    """Evaluate an agent or a model online for ``num_episodes`` episodes.

    Args:
      env: the (single-episode) environment; episodes follow each other.
      agent_or_model: a per-task agent, a batched agent, a ``ModelPolicy``
        or a bare model (decode/query protocol).
      params: held-out tasks, leaves ``[task, ...]``.
      key: PRNG key (share it across methods for common random numbers).
      num_episodes: consecutive episodes per task.
      name: method name (defaults to the class name).
      references: ``(random [task], oracle [task] | None)`` from
        :func:`reference_returns`; computed (with :func:`reference_key` of
        ``key``) if omitted.
      **model_kwargs: forwarded to ``run_model_online`` for models
        (``protocol``, ``greedy``, ``cache_steps``, ``context_update``, ...).

    Returns:
      An :class:`EvalResult` with ``returns [task, episode]``.
    """
    if num_episodes < 1:
        raise ValueError(f"num_episodes must be >= 1, got {num_episodes}")
    name = name or type(agent_or_model).__name__
    start = time.perf_counter()
    history, kind = _run(
        env, agent_or_model, params, key, num_episodes, dict(model_kwargs)
    )
    returns = np.asarray(metrics.per_episode_returns(history, num_episodes))
    seconds = time.perf_counter() - start
    regret = metrics.regret_from_history(history, env)
    if references is None:
        references = reference_returns(env, params, reference_key(key))
    random, oracle = references
    normalized = None
    if oracle is not None:
        normalized = metrics.normalized_score(
            returns, np.asarray(random), np.asarray(oracle)
        )
    completed = np.asarray(metrics.episodes_completed(history))
    metadata = {
        "env": getattr(env, "name", type(env).__name__),
        "kind": kind,
        "num_tasks": int(returns.shape[0]),
        "num_episodes": int(num_episodes),
        "num_steps": int(history.num_steps),
        "incomplete_tasks": int((completed < num_episodes).sum()),
        "seconds": round(seconds, 3),
        **({"regret": note} if (note := metrics.regret_note(env)) else {}),
        **{k: v for k, v in model_kwargs.items() if isinstance(v, str | int | float)},
        **task_parameter_metadata(env, params),
    }
    return EvalResult(
        name=name,
        returns=returns,
        normalized=normalized,
        regret=None if regret is None else np.asarray(regret),
        random_return=np.asarray(random),
        oracle_return=None if oracle is None else np.asarray(oracle),
        metadata=metadata,
    )


def evaluate_methods(
    env: Any,
    methods: dict[str, Any],
    params: Any,
    key: jax.Array,
    num_episodes: int,
    model_kwargs: dict[str, dict[str, Any]] | None = None,
    env_key: str | None = None,
    progress: bool = False,
) -> dict[str, EvalResult]:
    """Evaluate several methods on the same tasks, keys and references.

    ``model_kwargs[name]`` holds per-method keyword arguments for models;
    ``env_key``: see :func:`reference_returns`; ``progress``: a bar on
    stderr, one tick per method.
    """
    references = reference_returns(env, params, reference_key(key), env_key=env_key)
    model_kwargs = model_kwargs or {}
    results = {}
    bar = tqdm(total=len(methods), desc="eval", unit="method", disable=not progress)
    with bar:
        for name, actor in methods.items():
            bar.set_postfix_str(name)
            results[name] = evaluate_online(
                env,
                actor,
                params,
                jax.random.clone(key),  # the same key for all (common random numbers)
                num_episodes,
                name=name,
                references=references,
                **model_kwargs.get(name, {}),
            )
            bar.update()
    return results


def evaluate_offline_dpt(
    env: Any,
    model: Any,
    params: Any,
    context: Context,
    key: jax.Array,
    num_episodes: int = 1,
    greedy: bool = True,
    name: str = "dpt_offline",
    references: tuple[Any, Any] | None = None,
) -> EvalResult:
    """Offline DPT: act from a fixed context ``[task, N, ...]`` (greedy default).

    Build the context with :func:`~agentrl.evaluate.collect_context` from an
    agent of stated quality (random, noisy oracle, ...). For bandits, one
    episode's normalized score is one minus the chosen arm's normalized gap.
    """
    return evaluate_online(
        env,
        model,
        params,
        key,
        num_episodes,
        name=name,
        references=references,
        protocol="query",
        greedy=greedy,
        context=context,
        context_update="none",
    )
