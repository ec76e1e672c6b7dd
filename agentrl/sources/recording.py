"""One environment step of a learning source, as its history records it.

The sources that learn online (PPO with either core, SAC) step their env
alike: DPT's oracle label read before the step where the source records it,
then the step, then the :class:`~agentrl.history.History` fields of that
step. Shapes are one task's, one step's (the sources vmap over tasks).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def recorded_step(
    env: Any,
    params: Any,
    env_state: Any,
    obs: Any,
    action: Any,
    key: jax.Array,
    oracle: bool,
) -> tuple[Any, Any, dict, dict]:
    """``(next_obs, env_state, record, info)`` of one ``env.step``.

    ``record`` holds the step's ``obs``, ``action``, ``reward`` (float32),
    ``terminated``, ``truncated`` and ``optimal_action``: the env's oracle
    action at ``env_state`` where ``oracle`` (static), else ``None``.
    """
    optimal = env.optimal_action(env_state, params) if oracle else None
    next_obs, env_state, reward, term, trunc, info = env.step(
        key, env_state, action, params
    )
    record = {
        "obs": obs,
        "action": action,
        "reward": jnp.asarray(reward, jnp.float32),
        "terminated": term,
        "truncated": trunc,
        "optimal_action": optimal,
    }
    return next_obs, env_state, record, info
