"""Random and oracle returns of every registered task family, as a table.

Used by ``agentrl envs`` and as a sanity check of a new family: the oracle's
return should match ``optimal_return`` and clearly beat the random policy.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from agentrl.envs.registry import make, registered
from agentrl.envs.rollout import episode_returns, oracle_policy, random_policy, rollout
from agentrl.tables import markdown_table

COLUMNS = ("family", "horizon", "random", "oracle", "optimal_return")


def family_returns(name: str, num_tasks: int = 256, seed: int = 0) -> dict:
    """Mean one-episode return of random and oracle policies over sampled tasks."""
    env = make(name)
    # the tasks and the rollouts on them draw from keys of their own
    key_tasks, key_run = jax.random.split(jax.random.key(seed))
    params = jax.vmap(env.sample_params)(jax.random.split(key_tasks, num_tasks))
    keys = jax.random.split(key_run, num_tasks)
    row = {"family": name, "tasks": num_tasks, "horizon": env.horizon}
    policies = {"random": random_policy(env)}
    if getattr(env, "has_oracle", False):
        policies["oracle"] = oracle_policy(env)
    for label, policy in policies.items():

        def one(p, k, policy=policy):
            tr = rollout(env, policy, p, k, env.horizon)
            return episode_returns(tr.reward, tr.done, 1)[0]

        # the same keys for every policy (common random numbers)
        returns = jax.jit(jax.vmap(one))(params, jax.random.clone(keys))
        row[label] = float(jnp.mean(returns))
    if "oracle" in policies:
        row["optimal_return"] = float(jnp.mean(jax.vmap(env.optimal_return)(params)))
    return row


def returns_table(names: list[str] | None = None, num_tasks: int = 256) -> str:
    """Markdown table of :func:`family_returns` for ``names`` (default: all)."""
    rows = []
    for name in names or registered():
        try:
            r = family_returns(name, num_tasks)
        except ImportError as e:  # optional extra not installed
            r = {"family": name, "horizon": "-", "random": f"(not installed: {e})"}
            rows.append({"oracle": "", "optimal_return": "", **r})
            continue
        rows.append({"oracle": "-", "optimal_return": "-", **r})
    fmt = lambda v: f"{v:.3f}" if isinstance(v, float) else str(v)  # noqa: E731
    return markdown_table(rows, COLUMNS, fmt)
