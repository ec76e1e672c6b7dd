"""The vectorized evaluation driver: all tasks in one batch, one ``lax.scan``.

:func:`run_batched_agent` is :func:`agentrl.sources.run_agent_on_tasks` for a
:class:`~agentrl.evaluate.agents.BatchedAgent`: the environment is stepped
vmapped over tasks, while the agent sees the whole ``[task, ...]`` batch, so
a model does one forward pass for all tasks per step, and its KV-cache
position is shared by all tasks (a scalar, not a per-task index, which under
``vmap`` would turn cache writes into scatters). The PRNG keys are split
exactly as ``run_agent_on_tasks`` splits them, so both drivers give the same
history for the same key (and baselines run on the same tasks see the same
environment randomness).

:func:`run_model_online` builds the AD or DPT agent for a trained model and
runs it under one ``jax.jit``, with an NNX model's weights passed as an
argument (split once, merged per step) rather than baked in as constants.
:func:`collect_context` records a DPT context set from any agent's
interactions (offline evaluation).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from agentrl.evaluate.agents import is_batched
from agentrl.evaluate.model_agents import (
    CONTEXT_UPDATES,
    ADModelAgent,
    Context,
    DPTCachedModelAgent,
    DPTModelAgent,
    ModelHandle,
    append,
    empty_context,
    env_horizon,
    split_model,
)
from agentrl.sources.agent import (
    agent_transition,
    history_from_record,
    run_agent_on_tasks,
)
from agentrl.sources.history import History

PROTOCOLS = ("ad", "dpt")


def _split_keys(key: jax.Array, num_tasks: int, num_steps: int):
    """The key tree of ``run_agent_on_tasks``: env, agent ``[T]``, steps ``[S, T]``."""
    keys = jax.random.split(key, num_tasks)
    k3 = jax.vmap(lambda k: jax.random.split(k, 3))(keys)
    steps = jax.vmap(lambda k: jax.random.split(k, num_steps))(k3[:, 2])
    return k3[:, 0], k3[:, 1], jnp.swapaxes(steps, 0, 1)


def run_batched_agent(
    env: Any,
    agent: Any,
    params: Any,
    key: jax.Array,
    num_steps: int,
    task_id: jax.Array | None = None,
    record_optimal_action: bool | None = None,
) -> tuple[History, Any]:
    """Run a batched agent on tasks ``params [task, ...]`` for ``num_steps``.

    Returns:
      ``(history, final_agent_state)`` with history leaves ``[task, step, ...]``,
      equal to ``run_agent_on_tasks(env, per_task(agent), ...)``'s.
    """
    if not is_batched(agent):
        raise ValueError("run_batched_agent expects a batched agent (batched = True)")
    if record_optimal_action is None:
        record_optimal_action = bool(getattr(env, "has_oracle", False))
    num_tasks = jax.tree.leaves(params)[0].shape[0]
    if task_id is None:
        task_id = jnp.full((num_tasks,), -1, jnp.int32)
    key_env, key_agent, key_steps = _split_keys(key, num_tasks, num_steps)
    obs, env_state = jax.vmap(env.reset)(key_env, params)
    agent_state = agent.init(key_agent, params)
    vstep = jax.vmap(env.step)
    voptimal = jax.vmap(env.optimal_action) if record_optimal_action else None

    def body(carry, step_keys):
        ks = jax.vmap(jax.random.split)(step_keys)
        return agent_transition(
            agent, vstep, voptimal, carry, ks[:, 0], ks[:, 1], params
        )

    (_, _, agent_state), record = jax.lax.scan(
        body, (obs, env_state, agent_state), key_steps
    )
    swap = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731  [step, task] -> [task, step]
    return history_from_record(jax.tree.map(swap, record), task_id, params), agent_state


def infer_protocol(model: Any, protocol: str = "auto") -> str:
    """``"ad"`` if the model has ``decode``, ``"dpt"`` if ``predict_query``."""
    if protocol in PROTOCOLS:
        return protocol
    if protocol != "auto":
        raise ValueError(f"protocol must be 'auto' or one of {PROTOCOLS}")
    # A DecisionModel has both entry points; its token layout says which it is.
    layout = getattr(getattr(model, "config", None), "token_layout", None)
    if isinstance(layout, str):
        return "dpt" if layout == "transition" else "ad"
    for name, method in (("ad", "decode"), ("dpt", "predict_query")):
        if callable(getattr(model, method, None)):
            return name
    raise ValueError(
        f"{type(model).__name__} is neither an agent (init/act/update) nor a "
        "model with `decode` (AD) or `predict_query` (DPT)"
    )


def default_context_update(env: Any) -> str:
    """``"step"`` for bandits (DPT's bandit protocol), else ``"episode"``."""
    return "step" if getattr(env, "kind", None) == "bandit" else "episode"


def dpt_cache_applies(
    model: Any, env: Any, num_steps: int, context_size: int, context_update: str
) -> bool:
    """Whether cached DPT decoding equals the uncached agent here.

    It does when the query never changes (a bandit's single observation),
    each step appends one transition (``"step"``) and the context never
    overflows (``num_steps <= context_size``), so the query stays the first
    token in the window.
    """
    if isinstance(model, ModelHandle):
        model = model.get()
    has_decode = all(
        callable(getattr(model, m, None)) for m in ("decode_query", "decode_transition")
    )
    return (
        has_decode
        and context_update == "step"
        and getattr(env, "kind", None) == "bandit"
        and num_steps <= context_size
    )


def make_model_agent(
    model: Any,
    env: Any,
    num_steps: int,
    protocol: str = "auto",
    greedy: bool = False,
    temperature: float = 1.0,
    cache_steps: int | None = None,
    context_size: int | None = None,
    context_update: str = "auto",
    context: Context | None = None,
    dpt_cache: bool | None = None,
) -> ADModelAgent | DPTModelAgent | DPTCachedModelAgent:
    """The batched agent for ``model`` (see :mod:`agentrl.evaluate.model_agents`).

    ``cache_steps`` (AD) defaults to ``num_steps`` (the whole evaluation fits);
    ``context_size`` (DPT) to ``env.horizon``; ``context_update`` to
    :func:`default_context_update`, or ``"none"`` when ``context`` is given.
    ``dpt_cache`` (DPT): ``None`` decodes with a KV cache whenever that equals
    the uncached agent (see :func:`dpt_cache_applies`), ``False`` never,
    ``True`` requires it (error if it does not apply).
    """
    protocol = infer_protocol(model, protocol)
    if protocol == "ad":
        return ADModelAgent(
            model, env, cache_steps or num_steps, greedy=greedy, temperature=temperature
        )
    if context_update == "auto":
        context_update = "none" if context is not None else default_context_update(env)
    if context_update not in CONTEXT_UPDATES:
        raise ValueError(
            f"context_update must be 'auto' or one of {CONTEXT_UPDATES}, "
            f"got {context_update!r}"
        )
    if context is not None:  # offline: the fixed context sets the size
        context_size = context.size
    context_size = context_size or env_horizon(env)
    applies = context is None and dpt_cache_applies(
        model, env, num_steps, context_size, context_update
    )
    if dpt_cache and not applies:
        raise ValueError(
            "dpt_cache=True needs context_update='step' on a bandit (one fixed "
            f"query), a model with decode_query/decode_transition and num_steps "
            f"({num_steps}) <= context_size ({context_size})"
        )
    if applies and dpt_cache is not False:
        return DPTCachedModelAgent(
            model, env, context_size, greedy=greedy, temperature=temperature
        )
    return DPTModelAgent(
        model,
        env,
        context_size=context_size,
        context_update=context_update,
        greedy=greedy,
        temperature=temperature,
        context=context,
    )


def run_model_online(
    env: Any,
    model: Any,
    params: Any,
    key: jax.Array,
    num_episodes: int,
    protocol: str = "auto",
    greedy: bool = False,
    temperature: float = 1.0,
    cache_steps: int | None = None,
    context_size: int | None = None,
    context_update: str = "auto",
    context: Context | None = None,
    num_steps: int | None = None,
    dpt_cache: bool | None = None,
) -> tuple[History, Any]:
    """Run a trained model in context on tasks ``params [task, ...]``, jitted.

    Runs ``num_steps`` (default ``num_episodes * env.horizon``) steps, which
    covers ``num_episodes`` episodes even when some terminate early. See
    :func:`make_model_agent` for the other arguments.

    Returns:
      ``(history [task, step, ...], final agent state)``.
    """
    num_steps = num_steps or num_episodes * env_horizon(env)
    protocol = infer_protocol(model, protocol)  # before splitting an NNX module
    handle = split_model(model)
    kwargs = dict(
        protocol=protocol,
        greedy=greedy,
        temperature=temperature,
        cache_steps=cache_steps,
        context_size=context_size,
        context_update=context_update,
        dpt_cache=dpt_cache,
    )

    @jax.jit
    def go(weights, params, key, context):
        agent = make_model_agent(
            handle._replace(weights=weights), env, num_steps, context=context, **kwargs
        )
        return run_batched_agent(env, agent, params, key, num_steps)

    return go(handle.weights, params, key, context)


class _Recorder:
    """Wrap a per-task agent to also store every transition it sees."""

    batched = False

    def __init__(self, agent: Any, env: Any, num_steps: int):
        self.agent, self.env, self.num_steps = agent, env, num_steps

    def init(self, key, params):
        ctx = empty_context(self.env, key[None], _expand(params), self.num_steps)
        return self.agent.init(key, params), ctx

    def act(self, key, state, obs, env_state, params):
        return self.agent.act(key, state[0], obs, env_state, params)

    def update(self, state, step):
        return self.agent.update(state[0], step), append(state[1], _expand(step))


def _expand(tree: Any) -> Any:
    return jax.tree.map(lambda x: jnp.asarray(x)[None], tree)


def collect_context(
    env: Any, agent: Any, params: Any, key: jax.Array, num_steps: int
) -> Context:
    """A DPT context ``[task, num_steps, ...]`` of a per-task agent's transitions.

    The context's quality is the agent's (e.g. a random or noisy-oracle agent
    for offline evaluation); ``next_obs`` is the true successor.
    """
    recorder = _Recorder(agent, env, num_steps)
    _, (_, ctx) = run_agent_on_tasks(env, recorder, params, key, num_steps)
    return jax.tree.map(lambda x: x[:, 0], ctx)
