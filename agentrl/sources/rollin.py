"""DPT's uniform roll-in: independent transitions from uniformly drawn states.

The DPT paper's Dark Room pretraining contexts are not trajectories: every
transition starts from a state drawn uniformly over the grid and takes a
uniformly random action. The history of one task is then ``num_steps``
independent transitions, so its :class:`~agentrl.history.History`
carries ``next_obs`` explicitly (``obs[:, t + 1]`` is an unrelated state).
Steps are grouped into episodes of ``env.horizon`` (``truncated`` at each
end, never ``terminated``: no transition ends an episode early) only so that
the dataset keeps its usual layout.

The environment provides ``uniform_state(key, params) -> (obs, state)`` (Dark
Room does) and an oracle (``optimal_action``), whose action in each drawn
state is the DPT label.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from agentrl.history import History
from agentrl.prng import key_scan


def supports_uniform_rollin(env: Any) -> bool:
    """Whether ``env`` can draw uniform states and label them with an oracle."""
    return callable(getattr(env, "uniform_state", None)) and bool(
        getattr(env, "has_oracle", False)
    )


@partial(jax.jit, static_argnums=(0, 3))
def uniform_rollin(
    env: Any, params: Any, key: jax.Array, num_steps: int, task_id: jax.Array
) -> History:
    """``num_steps`` independent uniform transitions on each task, one jit.

    Args:
      env: an environment with ``uniform_state`` and ``optimal_action``.
      params: env params, leaves ``[task, ...]``.
      key: PRNG key; task ``i`` uses ``split(key, num_tasks)[i]``.
      num_steps: transitions per task (a multiple of ``env.horizon``).
      task_id: ``[task]`` int32.

    Returns:
      :class:`History` ``[task, num_steps, ...]`` with ``next_obs`` set.
    """

    def one_task(p, task_key):
        def transition(_, k):
            k_state, k_action, k_step = jax.random.split(k, 3)
            obs, state = env.uniform_state(k_state, p)
            action = env.action_space(p).sample(k_action)
            # step_env: the true successor, never an auto-reset observation
            next_obs, _, reward, _, _ = env.step_env(k_step, state, action, p)
            optimal = env.optimal_action(state, p)
            return None, (obs, action, reward, next_obs, optimal)

        keys = jax.random.split(task_key, num_steps)
        return key_scan(transition, None, keys)[1]

    keys = jax.random.split(key, task_id.shape[0])
    obs, action, reward, next_obs, optimal = jax.vmap(one_task)(params, keys)
    step = jnp.arange(num_steps)
    last = (step % env.horizon) == env.horizon - 1
    truncated = jnp.broadcast_to(last, reward.shape)
    return History(
        obs=obs,
        action=action.astype(jnp.int32),
        reward=reward.astype(jnp.float32),
        terminated=jnp.zeros(reward.shape, bool),
        truncated=truncated,
        episode=jnp.broadcast_to(step // env.horizon, reward.shape).astype(jnp.int32),
        optimal_action=optimal.astype(jnp.int32),
        task_id=task_id,
        params=params,
        next_obs=next_obs,
    )
