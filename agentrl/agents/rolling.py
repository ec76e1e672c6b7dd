"""AD's model agent: one token per step on a rolling KV cache.

Model contract: ``model.init_cache(batch, max_steps) -> cache`` and the
jittable ``model.decode(cache, obs [B, ...], prev_action [B, ...],
prev_reward [B]) -> (out, cache)``, ``out.action`` = logits ``[B, A]`` for
the action to take in ``obs`` (the mean ``[B, *action_shape]`` for
continuous actions, with ``out.log_std`` of a Gaussian head; the agent keeps
both, :func:`~agentrl.agents.model_agents.action_scores`). One token per
step; ``decode`` rolls its window when the context outgrows the cache.
Decoding is functional: the model must not mutate itself.

Protocol: the context runs across episodes; at step ``t`` the model reads
``(obs_t, a_{t-1}, r_{t-1})``, with zeros before the first step and the
previous action/reward carried over episode boundaries (as
:class:`agentrl.envs.MultiEpisodeTrial`). ``start`` decodes the first
observation's token (once, before the driver's scan) and ``update`` the
*next* one, so every step in the scan is exactly one ``decode`` and no step
branches on being the first. AD, AD-ε, T2MIR-AD, DT (with its own agent
class) and transformer PPO act this way.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agentrl.agents.agent import Step
from agentrl.agents.model_agents import (
    ScoredAgent,
    action_scores,
    model_agent,
    out_shape,
)


class ADState(NamedTuple):
    """KV cache, last action/reward ``[B, ...]`` and the next action's
    ``scores`` (:func:`~agentrl.agents.model_agents.action_scores`: logits
    ``[B, A]``, or ``[B, 2, *action_shape]`` mean and log std)."""

    cache: Any
    prev_action: jax.Array
    prev_reward: jax.Array
    scores: jax.Array


class ADModelAgent(ScoredAgent):
    """Algorithm Distillation acting online with a KV cache (batched).

    ``start`` must run before the first ``act`` (the driver calls it): it
    decodes the first observation, whose scores ``act`` then uses.
    """

    def __init__(
        self,
        model: Any,
        env: Any,
        cache_steps: int,
        greedy: bool = False,
        temperature: float = 1.0,
    ):
        super().__init__(model, env, greedy, temperature)
        self.cache_steps = int(cache_steps)

    def init(self, key: jax.Array, params: Any) -> ADState:
        batch = key.shape[0]
        model = self.model.get()
        return ADState(
            cache=model.init_cache(batch, self.cache_steps),
            prev_action=jnp.zeros((batch, *self.space.shape), self.space.dtype),
            prev_reward=jnp.zeros((batch,), jnp.float32),
            scores=jnp.zeros((batch, *out_shape(self.space)), jnp.float32),
        )

    def start(self, state: ADState, obs: Any) -> ADState:
        """Decode the first token ``(obs [B, ...], zero action, zero reward)``."""
        out, cache = self.model.get().decode(
            state.cache, obs, state.prev_action, state.prev_reward
        )
        return state._replace(cache=cache, scores=action_scores(out, self.space))

    def scores(self, state: ADState, obs, env_state, params) -> jax.Array:
        return state.scores

    def update(self, state: ADState, step: Step) -> ADState:
        action = jnp.asarray(step.action, self.space.dtype).reshape(
            state.prev_action.shape
        )
        reward = jnp.asarray(step.reward, jnp.float32).reshape(state.prev_reward.shape)
        # one decode, the same at every step (the first token is ``start``'s),
        # so the cache is updated in place with no branch around it
        out, cache = self.model.get().decode(
            state.cache, step.reset_obs, action, reward
        )
        return ADState(cache, action, reward, action_scores(out, self.space))


def rolling_cache_agent(model: Any, env: Any, config: Any) -> Any:
    """The batched agent of a model acting one token per step on a rolling KV
    cache of ``config.model.max_steps`` (AD's, transformer PPO's, AMAGO's), by
    the acting rule ``config.eval.acting`` at ``config.eval.temperature``."""
    return model_agent(ADModelAgent, model, env, config)
