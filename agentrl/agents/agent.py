"""The agent protocol and the one driver that runs any agent on tasks.

Every source algorithm (UCB, Thompson sampling, Q-learning, the noisy
oracle, ...), every evaluation baseline and every trained in-context model
acting online is an :class:`Agent`: three pure functions over an explicit
agent state. A *per-task* agent acts on ONE task. A *batched* agent (marked
``batched = True``) takes every argument and keeps its state with a leading
``[task]`` axis, so a model does one forward pass for all tasks per step;
:func:`as_batched` makes a per-task agent batched by vmapping its functions.

There is one driver, one ``lax.scan`` over steps of a batched agent with the
environment vmapped over tasks, recording a :class:`~agentrl.history.History`.
:func:`run_agent_on_tasks` (any agent), :func:`run_batched_agent` (batched
agents only) and :func:`run_agent` (one task) are all that driver, with one
PRNG key tree (:func:`_split_keys`), so data generation, baselines and model
evaluation share a code path and the same key gives the same history on
every entry point.

Protocol (all jittable, no Python side effects)::

    state  = agent.init(key, params)
    state  = agent.start(state, obs)            # optional, once, before the scan
    action = agent.act(key, state, obs, env_state, params)
    state  = agent.update(state, Step(obs, action, reward, next_obs, done, ...))

``env_state`` and ``params`` are passed to ``act`` so oracles can read them;
a learning agent must not (it sees only ``obs`` and its own history).

``start`` (optional; :func:`start_agent` calls it or passes the state
through) sees the first observation before the first ``act``. An agent
whose first step differs from the others does that work there, once, so
its ``update`` inside the scan is the same computation at every step: a
model agent decodes the first observation's token into its KV cache, and
its ``update`` decodes the next one. (A first-step ``lax.cond`` in
``update`` instead made XLA copy every layer's cache at every step.) A
wrapper agent forwards ``start`` to the agent it wraps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp

from agentrl.history import History, episode_index, task_ids
from agentrl.prng import key_map, key_scan


class Step(NamedTuple):
    """One transition as an agent's ``update`` sees it.

    ``next_obs`` is the true successor (``final_observation`` on episode end);
    ``reset_obs`` is what the agent observes next (a fresh episode's first
    observation when ``done``).
    """

    obs: Any
    action: jax.Array
    reward: jax.Array
    next_obs: Any
    terminated: jax.Array
    truncated: jax.Array
    reset_obs: Any

    @property
    def done(self) -> jax.Array:
        return jnp.logical_or(self.terminated, self.truncated)


class Agent(Protocol):
    """An online agent (see the module docstring).

    Per task: ``init(key, params) -> state``, ``act(key, state, obs,
    env_state, params) -> action``, ``update(state, Step) -> state``. With
    ``batched = True`` every argument, the action and the state carry a
    leading ``[task]`` axis: ``key [task]``, ``params [task, ...]``, ...
    """

    def init(self, key: jax.Array, params: Any) -> Any: ...

    # optional: ``start(state, obs) -> state`` (see the module docstring)

    def act(
        self, key: jax.Array, state: Any, obs: Any, env_state: Any, params: Any
    ) -> jax.Array: ...

    def update(self, state: Any, step: Step) -> Any: ...


def start_agent(agent: Any, state: Any, obs: Any) -> Any:
    """``agent.start(state, obs)`` if ``agent`` has that hook, else ``state``.

    Wrapper agents call it on the agent they wrap, so every agent sees its
    first observation however deeply it is wrapped.
    """
    start = getattr(agent, "start", None)
    return state if start is None else start(state, obs)


def is_agent(obj: Any) -> bool:
    """Whether ``obj`` has the ``init``/``act``/``update`` methods of an agent."""
    return all(callable(getattr(obj, m, None)) for m in ("init", "act", "update"))


def is_batched(obj: Any) -> bool:
    """Whether ``obj`` is a batched :class:`Agent` (``batched = True``)."""
    return is_agent(obj) and bool(getattr(obj, "batched", False))


@dataclasses.dataclass(frozen=True)
class _Vmapped:
    """A per-task agent's ``init``/``act``/``update`` vmapped over tasks."""

    agent: Any
    batched = True

    def init(self, key: jax.Array, params: Any) -> Any:
        return jax.vmap(self.agent.init)(key, params)

    def start(self, state: Any, obs: Any) -> Any:
        if getattr(self.agent, "start", None) is None:
            return state
        return jax.vmap(self.agent.start)(state, obs)

    def act(self, key, state, obs, env_state, params) -> jax.Array:
        return jax.vmap(self.agent.act)(key, state, obs, env_state, params)

    def update(self, state: Any, step: Step) -> Any:
        return jax.vmap(self.agent.update)(state, step)


def as_batched(agent: Agent) -> Agent:
    """``agent`` itself if batched, else its functions vmapped over tasks."""
    return agent if is_batched(agent) else _Vmapped(agent)


@dataclasses.dataclass(frozen=True)
class RandomAgent:
    """Uniform over ``env.action_space(params)`` (any environment); stateless.

    The source ``random`` and the random baseline (the zero of normalized
    scores) of :mod:`agentrl.evaluate`.
    """

    env: Any

    def init(self, key: jax.Array, params: Any) -> Any:
        return ()

    def act(self, key, state, obs, env_state, params) -> jax.Array:
        return self.env.action_space(params).sample(key)

    def update(self, state: Any, step: Step) -> Any:
        return state


def _split_keys(keys: jax.Array, num_steps: int):
    """The key tree of every driver, from one key per task ``keys [task]``.

    Task ``i``'s key splits into (env reset, agent init, steps); its step keys
    ``[step]`` each split into (act, env step) inside the scan. Returns
    ``(env [task], agent [task], steps [step, task])``.
    """
    k3 = jax.vmap(lambda k: jax.random.split(k, 3))(keys)
    steps = jax.vmap(lambda k: jax.random.split(k, num_steps))(k3[:, 2])
    return k3[:, 0], k3[:, 1], jnp.swapaxes(steps, 0, 1)


def _drive(
    env: Any,
    agent: Agent,
    params: Any,
    keys: jax.Array,
    num_steps: int,
    task_id: jax.Array,
    record_optimal_action: bool,
) -> tuple[History, Any]:
    """The one scan: batched ``agent`` on tasks ``params [task, ...]``.

    ``keys [task]`` and ``task_id [task]``; returns ``(history [task, step,
    ...], final agent state)``.
    """
    key_env, key_agent, key_steps = _split_keys(keys, num_steps)
    obs, env_state = jax.vmap(env.reset)(key_env, params)
    agent_state = start_agent(agent, agent.init(key_agent, params), obs)
    env_step = jax.vmap(env.step)
    optimal_action = jax.vmap(env.optimal_action) if record_optimal_action else None

    def body(carry, step_keys):
        obs, env_state, agent_state = carry
        ks = jax.vmap(jax.random.split)(step_keys)
        action = agent.act(ks[:, 0], agent_state, obs, env_state, params)
        optimal = optimal_action(env_state, params) if optimal_action else None
        next_obs, next_env_state, reward, term, trunc, info = env_step(
            ks[:, 1], env_state, action, params
        )
        step = Step(
            obs, action, reward, info["final_observation"], term, trunc, next_obs
        )
        agent_state = agent.update(agent_state, step)
        record = (obs, action, reward, term, trunc, optimal)
        return (next_obs, next_env_state, agent_state), record

    (_, _, agent_state), record = key_scan(
        body, (obs, env_state, agent_state), key_steps
    )
    # [step, task, ...] -> [task, step, ...]
    obs, action, reward, term, trunc, optimal = jax.tree.map(
        lambda x: jnp.swapaxes(x, 0, 1), record
    )
    history = History(
        obs=obs,
        action=action,
        reward=reward.astype(jnp.float32),
        terminated=term,
        truncated=trunc,
        episode=episode_index(jnp.logical_or(term, trunc)),
        optimal_action=optimal,
        task_id=task_id,
        params=params,
    )
    return history, agent_state


def _per_row(fn: Callable[[Any], Any], xs: Any, size: int) -> Any:
    """Which leaves of ``fn``'s output have a ``[row]`` axis (a pytree of bools).

    A leaf whose leading axis follows the rows of the input is per row; any
    other (a batched agent's shared leaf, such as a KV cache's position) is
    one value for the block. Told apart by tracing ``fn`` on ``size`` and
    ``size + 1`` rows (shapes only).
    """

    def spec(rows):
        return jax.tree.map(
            lambda x: jax.ShapeDtypeStruct((rows, *x.shape[1:]), x.dtype), xs
        )

    a, b = jax.eval_shape(fn, spec(size)), jax.eval_shape(fn, spec(size + 1))
    return jax.tree.map(
        lambda x, y: x.ndim > 0 and (x.shape[0], y.shape[0]) == (size, size + 1), a, b
    )


def _in_blocks(fn: Callable[[Any], Any], xs: Any, size: int) -> Any:
    """``fn`` over the leading axis of ``xs`` a block of ``size`` at a time.

    ``fn`` maps a block ``[b, ...]`` to outputs whose leaves are per row
    (``[b, ...]``) or shared by the block (a batched agent's state may hold
    such a leaf, e.g. a KV cache's position); full blocks run in a
    ``lax.map``, the remainder (fewer than ``size``) in one more call.
    Per-row leaves come back ``[n, ...]``, shared ones ``[num_blocks, ...]``
    (one per block, the remainder's last).
    """
    n = jax.tree.leaves(xs)[0].shape[0]
    full = n - n % size
    per_row = _per_row(fn, xs, size)
    head = jax.tree.map(lambda x: x[:full].reshape(-1, size, *x.shape[1:]), xs)
    out = jax.tree.map(
        lambda x, rows: x.reshape(full, *x.shape[2:]) if rows else x,
        key_map(fn, head),
        per_row,
    )
    if full == n:
        return out
    tail = fn(jax.tree.map(lambda x: x[full:], xs))
    return jax.tree.map(
        lambda a, b, rows: jnp.concatenate([a, b if rows else b[None]]),
        out,
        tail,
        per_row,
    )


def _record_optimal(env: Any, record_optimal_action: bool | None) -> bool:
    if record_optimal_action is None:
        return bool(getattr(env, "has_oracle", False))
    return bool(record_optimal_action)


def run_agent_on_tasks(
    env: Any,
    agent: Agent,
    params: Any,
    key: jax.Array,
    num_steps: int,
    task_id: jax.Array | None = None,
    record_optimal_action: bool | None = None,
    block_size: int | None = None,
) -> tuple[History, Any]:
    """Run ``agent`` (per-task or batched) on tasks ``params [task, ...]``.

    Args:
      env: an agentrl or gymnax environment (auto-resetting).
      agent: an :class:`Agent`; a per-task one is vmapped (:func:`as_batched`).
      params: env params, leaves ``[task, ...]``.
      key: PRNG key; task ``i`` runs on ``split(key, num_tasks)[i]``.
      num_steps: length of the histories.
      task_id: ``[task]`` ids recorded in the history (default ``-1``).
      record_optimal_action: record ``env.optimal_action`` at every step
        (defaults to whether the env has an oracle).
      block_size: run the tasks in blocks of this many (``lax.map``), which
        keeps per-task state (Q tables) in cache on large task sets; the
        histories do not depend on it.

    Returns:
      ``(history, final_agent_state)``, history leaves ``[task, num_steps,
      ...]``, state leaves ``[task, ...]`` (with ``block_size``, a batched
      agent's leaves shared by all tasks come back ``[num_blocks, ...]``).
    """
    batched = as_batched(agent)
    record = _record_optimal(env, record_optimal_action)
    task_id = task_ids(params, task_id)
    num_tasks = task_id.shape[0]
    keys = jax.random.split(key, num_tasks)

    def run(xs):
        p, k, t = xs
        return _drive(env, batched, p, k, num_steps, t, record)

    if block_size is None or num_tasks <= block_size:
        return run((params, keys, task_id))
    return _in_blocks(run, (params, keys, task_id), block_size)


def run_batched_agent(
    env: Any,
    agent: Agent,
    params: Any,
    key: jax.Array,
    num_steps: int,
    task_id: jax.Array | None = None,
    record_optimal_action: bool | None = None,
) -> tuple[History, Any]:
    """:func:`run_agent_on_tasks` for a batched agent (``batched = True``) only.

    Returns:
      ``(history [task, step, ...], final_agent_state)``, equal to
      ``run_agent_on_tasks(env, per_task(agent), ...)``'s history.
    """
    if not is_batched(agent):
        raise ValueError("run_batched_agent expects a batched agent (batched = True)")
    return run_agent_on_tasks(
        env, agent, params, key, num_steps, task_id, record_optimal_action
    )


def run_agent(
    env: Any,
    agent: Agent,
    params: Any,
    key: jax.Array,
    num_steps: int,
    task_id: jax.Array | int = -1,
    record_optimal_action: bool | None = None,
) -> tuple[History, Any]:
    """Run a per-task ``agent`` on ONE task for ``num_steps`` steps.

    The driver on a batch of one task whose key is ``key`` itself, so task
    ``i`` of ``run_agent_on_tasks(..., key)`` equals ``run_agent(...,
    split(key, num_tasks)[i])``.

    Returns:
      ``(history, final_agent_state)``; history leaves ``[num_steps, ...]``
      without the task axis.
    """
    expand = lambda x: jnp.asarray(x)[None]  # noqa: E731
    history, state = _drive(
        env,
        as_batched(agent),
        jax.tree.map(expand, params),
        key[None],
        num_steps,
        expand(jnp.asarray(task_id, jnp.int32)),
        _record_optimal(env, record_optimal_action),
    )
    return jax.tree.map(lambda x: x[0], (history, state))
