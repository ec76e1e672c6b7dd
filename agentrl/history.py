"""The learning-history schema: what sources write and datasets store.

It lives outside :mod:`agentrl.sources` so that :mod:`agentrl.data`, which
writes and reads histories, need not import the source algorithms.

A :class:`History` records how an agent acted on a batch of tasks, step by
step, across episodes. Axes are ``[task, step, ...]``; ``obs[:, t]`` is the
observation in which ``action[:, t]`` was taken and ``reward[:, t]``,
``terminated[:, t]``, ``truncated[:, t]`` are that step's outcome. Episodes
follow each other inside a history (the environment auto-resets), and
``episode[:, t]`` is the index of the episode step ``t`` belongs to.
:func:`check_history` asserts these shapes (``chex``) where histories cross
a module border, e.g. on their way into a dataset.
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp
from flax import struct

from agentrl.envs.rollout import episode_returns


@struct.dataclass
class History:
    """Learning histories of a batch of tasks.

    Attributes:
      obs: ``[task, step, *obs_shape]``.
      action: ``[task, step, *action_shape]`` (int32 for discrete actions).
      reward: ``[task, step]`` float32.
      terminated: ``[task, step]`` bool.
      truncated: ``[task, step]`` bool.
      episode: ``[task, step]`` int32, episode index within the history.
      optimal_action: ``[task, step, *action_shape]`` the oracle's action in
        ``obs`` (for DPT labels), or ``None`` where the env has no oracle.
      task_id: ``[task]`` int32 id in a finite task space, ``-1`` otherwise.
      params: the environment params pytree, leaves ``[task, ...]``.
      next_obs: ``[task, step, *obs_shape]`` the successor of every step, or
        ``None`` (the usual case) where it is ``obs[:, t + 1]``. Set by
        sources whose steps are independent transitions rather than a
        trajectory (DPT's uniform roll-in).
    """

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    episode: jax.Array
    optimal_action: jax.Array | None
    task_id: jax.Array
    params: Any
    next_obs: Any = None

    @property
    def done(self) -> jax.Array:
        return jnp.logical_or(self.terminated, self.truncated)

    @property
    def num_tasks(self) -> int:
        return self.reward.shape[0]

    @property
    def num_steps(self) -> int:
        return self.reward.shape[1]

    def episode_returns(self, num_episodes: int) -> jax.Array:
        """``[task, num_episodes]`` return of each of the first episodes."""
        return jax.vmap(lambda r, d: episode_returns(r, d, num_episodes))(
            self.reward, self.done
        )


def check_history(history: History) -> History:
    """Assert that every field of ``history`` has its documented shape.

    ``reward``, ``terminated``, ``truncated`` and ``episode`` are ``[task,
    step]``; every leaf of ``obs``, ``action`` and (where present)
    ``optimal_action`` and ``next_obs`` is ``[task, step, ...]``; ``task_id``
    is ``[task]`` and every leaf of ``params`` ``[task, ...]``. Shapes only
    (no values), so it also runs at trace time inside ``jit``. Raises
    ``AssertionError`` naming the field; returns ``history``.
    """
    chex.assert_rank(history.reward, 2, custom_message="History.reward [task, step]")
    task, step = history.reward.shape
    for name in ("terminated", "truncated", "episode"):
        chex.assert_shape(
            getattr(history, name), (task, step), custom_message=f"History.{name}"
        )
    for name in ("obs", "action", "optimal_action", "next_obs"):
        leaves = jax.tree.leaves(getattr(history, name))
        chex.assert_shape(
            leaves, (task, step, ...), custom_message=f"History.{name} [task, step]"
        )
    chex.assert_shape(history.task_id, (task,), custom_message="History.task_id")
    chex.assert_shape(
        jax.tree.leaves(history.params), (task, ...), custom_message="History.params"
    )
    return history


def task_ids(params: Any, task_id: Any | None = None) -> jax.Array:
    """``[task]`` int32 ids to record for ``params [task, ...]`` (``-1`` if None)."""
    if task_id is None:
        num_tasks = jax.tree.leaves(params)[0].shape[0]
        return jnp.full((num_tasks,), -1, jnp.int32)
    return jnp.asarray(task_id, jnp.int32)


def episode_index(done: jax.Array) -> jax.Array:
    """``[..., step]`` episode index of each step from ``done [..., step]``."""
    done = done.astype(jnp.int32)
    return (jnp.cumsum(done, axis=-1) - done).astype(jnp.int32)
