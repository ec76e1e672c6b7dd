"""Trained models acting in context, on the one scan driver of the sources.

Every agent runs on :func:`agentrl.agents.agent.run_batched_agent` (re-
exported here): the environment is stepped vmapped over tasks while a
batched agent sees the whole ``[task, ...]`` batch, so a model does one
forward pass for all tasks per step and its KV-cache position is shared by
all tasks (a scalar, not a per-task index, which under ``vmap`` would turn
cache writes into scatters). Baselines and data sources run on the same
driver with the same key tree, so methods evaluated together face the same
environment randomness.

:func:`run_model_online` builds the decode (AD-style) or query (DPT-style)
agent for a trained model, and :func:`run_policy` any :class:`ModelPolicy`
(a model with its algorithm's acting rule); both run under one ``jax.jit``
with an NNX model's weights passed as an argument (split once, merged per
step) rather than baked in as constants.
:func:`collect_context` records a DPT context set from any agent's
interactions (offline evaluation).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agentrl.agents.agent import (  # the one driver's scan, on a block
    _drive,
    _record_optimal,
    as_batched,
    run_batched_agent,
    start_agent,
)
from agentrl.agents.context_set import (
    CONTEXT_UPDATES,
    Context,
    DPTCachedModelAgent,
    DPTModelAgent,
    append,
    empty_context,
)
from agentrl.agents.model_agents import ModelHandle, split_model
from agentrl.agents.rolling import ADModelAgent
from agentrl.envs.base import env_horizon, is_bandit
from agentrl.history import History
from agentrl.prng import key_map

#: How a model acts: ``"decode"`` its own history token by token (AD-style,
#: ``model.decode``) or predict a ``"query"`` state's action from a context
#: set of transitions (DPT-style, ``model.predict_query``).
PROTOCOLS = ("decode", "query")


def infer_protocol(model: Any, protocol: str = "auto") -> str:
    """``"decode"`` if the model has ``decode``, ``"query"`` if ``predict_query``."""
    if protocol in PROTOCOLS:
        return protocol
    if protocol != "auto":
        raise ValueError(
            f"protocol must be 'auto' or one of {PROTOCOLS}, got {protocol!r}"
        )
    # A DecisionModel has both entry points; its token layout says which it is.
    layout = getattr(getattr(model, "config", None), "token_layout", None)
    if isinstance(layout, str):
        return "query" if layout == "transition" else "decode"
    for name, method in (("decode", "decode"), ("query", "predict_query")):
        if callable(getattr(model, method, None)):
            return name
    raise ValueError(
        f"{type(model).__name__} is neither an agent (init/act/update) nor a "
        "model with `decode` (AD-style) or `predict_query` (DPT-style)"
    )


def default_context_update(env: Any) -> str:
    """``"step"`` for bandits (DPT's bandit protocol), else ``"episode"``."""
    return "step" if is_bandit(env) else "episode"


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
        and is_bandit(env)
        and num_steps <= context_size
    )


def _trained_steps(model: Any) -> int | None:
    """The window ``model`` was trained on (``config.max_steps``), a
    :class:`ModelHandle`'s too; ``None`` where it does not say."""
    if isinstance(model, ModelHandle):
        model = model.get()
    return getattr(getattr(model, "config", None), "max_steps", None)


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
    """The batched agent for ``model`` (see :mod:`agentrl.agents.model_agents`).

    ``cache_steps`` (``"decode"``) defaults to the window the model was
    trained on (``model.config.max_steps``; where unset, ``num_steps``, the
    whole evaluation), as the algorithms' own agents read it: a longer
    cache would attend further back than training ever did;
    ``context_size`` (``"query"``) to ``env.horizon``; ``context_update``
    to :func:`default_context_update`, or ``"none"`` when ``context`` is
    given.
    ``dpt_cache`` (DPT): ``None`` decodes with a KV cache whenever that equals
    the uncached agent (see :func:`dpt_cache_applies`), ``False`` never,
    ``True`` requires it (error if it does not apply).
    """
    protocol = infer_protocol(model, protocol)
    if protocol == "decode":
        steps = cache_steps or _trained_steps(model) or num_steps
        return ADModelAgent(model, env, steps, greedy=greedy, temperature=temperature)
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
    block_size: int | None = None,
) -> tuple[History, Any]:
    """Run a trained model in context on tasks ``params [task, ...]``, jitted.

    Runs ``num_steps`` (default ``num_episodes * env.horizon``) steps, which
    covers ``num_episodes`` episodes even when some terminate early.
    ``block_size``: see :func:`run_policy`. See :func:`make_model_agent` for
    the other arguments.

    Returns:
      ``(history [task, step, ...], final agent state)``.
    """
    num_steps = num_steps or num_episodes * env_horizon(env)
    protocol = infer_protocol(model, protocol)  # before splitting an NNX module
    kwargs = dict(
        protocol=protocol,
        greedy=greedy,
        temperature=temperature,
        cache_steps=cache_steps,
        context_size=context_size,
        context_update=context_update,
        dpt_cache=dpt_cache,
    )
    policy = ModelPolicy(
        model,
        lambda handle, n: make_model_agent(handle, env, n, context=context, **kwargs),
    )
    return run_policy(env, policy, params, key, num_steps, block_size)


class ModelPolicy(NamedTuple):
    """A trained model and how it acts in context.

    ``make_agent(model_handle, num_steps) -> batched agent``; the handle is
    a :class:`ModelHandle` whose weights are a traced argument, so the
    model's weights are not baked into the compiled program as constants.
    An algorithm's acting rule fits here: ``lambda h, n:
    algo.make_agent(h, env, n, config)``.
    """

    model: Any
    make_agent: Any


def run_policy(
    env: Any,
    policy: ModelPolicy,
    params: Any,
    key: jax.Array,
    num_steps: int,
    block_size: int | None = None,
) -> tuple[History, Any]:
    """Run a :class:`ModelPolicy` on tasks ``params [task, ...]`` under one jit.

    ``block_size``: run the tasks ``block_size`` at a time, each block's
    whole evaluation before the next (see :func:`run_batched_in_blocks`);
    the history does not depend on it. Worth it on a CPU when the whole
    batch's KV cache outgrows the last-level cache.

    Returns:
      ``(history [task, step, ...], final agent state)``; with
      ``block_size``, state leaves are ``[num_blocks, ...]`` per block.
    """
    if block_size is not None:  # before compiling
        _check_block_size(params, block_size)
    handle = split_model(policy.model)

    @jax.jit
    def go(weights, params, key):
        agent = policy.make_agent(handle._replace(weights=weights), num_steps)
        if block_size is not None:
            return run_batched_in_blocks(env, agent, params, key, num_steps, block_size)
        return run_batched_agent(env, agent, params, key, num_steps)

    return go(handle.weights, params, key)


def _check_block_size(params: Any, block_size: int) -> int:
    num_tasks = jax.tree.leaves(params)[0].shape[0]
    if not isinstance(block_size, int) or block_size < 1 or num_tasks % block_size:
        raise ValueError(
            f"block_size must be a positive divisor of the number of tasks "
            f"({num_tasks}), got {block_size!r}"
        )
    return num_tasks


def run_batched_in_blocks(
    env: Any,
    agent: Any,
    params: Any,
    key: jax.Array,
    num_steps: int,
    block_size: int,
) -> tuple[History, Any]:
    """:func:`run_batched_agent` on blocks of ``block_size`` tasks, one after another.

    A ``lax.map`` over blocks, each running the whole ``num_steps`` scan, so
    only one block's agent state (a KV cache) is live at a time: on a CPU a
    block's cache can stay in the last-level cache across steps, where the
    whole batch's is re-read from memory every step. Task ``i`` still runs
    on ``split(key, num_tasks)[i]``, so the history equals
    :func:`run_batched_agent`'s. ``block_size`` must divide the number of
    tasks (agent states may hold leaves shared by a block, such as a cache
    position, so blocks must have one shape).

    Returns:
      ``(history [task, step, ...], state with leaves [num_blocks, ...])``.
    """
    num_tasks = _check_block_size(params, block_size)
    blocks = num_tasks // block_size
    split = lambda x: x.reshape(blocks, block_size, *x.shape[1:])  # noqa: E731
    keys = jax.random.split(key, num_tasks)

    record = _record_optimal(env, None)
    task_id = jnp.full((block_size,), -1, jnp.int32)

    def one(xs):  # the block's tasks on their own keys (the driver's key tree)
        p, k = xs
        return _drive(env, agent, p, k, num_steps, task_id, record)

    history, state = key_map(one, (jax.tree.map(split, params), split(keys)))
    merge = lambda x: x.reshape(num_tasks, *x.shape[2:])  # noqa: E731
    return jax.tree.map(merge, history), state


class _Recorder:
    """Wrap an agent (made batched) to also store every transition it sees."""

    batched = True

    def __init__(self, agent: Any, env: Any, num_steps: int):
        self.agent, self.env, self.num_steps = as_batched(agent), env, num_steps

    def init(self, key, params):
        ctx = empty_context(self.env, key, params, self.num_steps)
        return self.agent.init(key, params), ctx

    def start(self, state, obs):
        return start_agent(self.agent, state[0], obs), state[1]

    def act(self, key, state, obs, env_state, params):
        return self.agent.act(key, state[0], obs, env_state, params)

    def update(self, state, step):
        return self.agent.update(state[0], step), append(state[1], step)


def collect_context(
    env: Any, agent: Any, params: Any, key: jax.Array, num_steps: int
) -> Context:
    """A DPT context ``[task, num_steps, ...]`` of an agent's transitions.

    ``agent`` is per-task or batched. The context's quality is the agent's
    (e.g. a random or noisy-oracle agent for offline evaluation); ``next_obs``
    is :func:`~agentrl.agents.context_set.successor`'s: the true successor,
    except at a terminated step, where it is the next episode's first
    observation, as in training.
    """
    recorder = _Recorder(agent, env, num_steps)
    return run_batched_agent(env, recorder, params, key, num_steps)[1][1]
