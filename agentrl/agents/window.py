"""AD acting as its reference code does: the last window re-encoded every step.

The AD-ε reference (corl-team/ad-eps, ``evaluate_in_context`` in
``dark_room/ad_darkroom.py``) keeps the last ``seq_len`` steps of the
trial and, at every step, runs the model over them from scratch
(``states[-step:]``: a shorter window while the trial is younger), reading
the action at the last position. Each prediction therefore sees exactly
what a training window shows: at most ``model.max_steps`` steps whose
first token knows nothing before it (agentrl's learned start vector).

agentrl's default (:mod:`agentrl.agents.rolling`, ``eval_context=
"rolling"``) decodes one token a step on a KV cache with a sliding window:
far cheaper, and the same scores until the trial outgrows the window;
after that the oldest token was embedded with its true previous action and
reward, and deeper layers' keys and values carry what came before the
window. This agent, ``AD(eval_context="window")``, is the reference's
reading, at the cost of one pass over ``max_steps`` steps each step. DT's
``eval_context="window"`` reads its return-conditioned tokens the same way
(the DT reference's ``get_action`` re-encodes its last K steps).

The window is kept left-aligned: it fills slot by slot, and once full it
shifts one slot left each step, so its first real step is always at
position 0, where training windows start. Slots after the current step
hold stale values that the causal model does not read. The count of steps
in the window is one scalar for the batch (every task steps together).
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
from agentrl.models.heads import ModelOutput


class WindowState(NamedTuple):
    """The last steps ``obs [B, W, ...]``, ``action [B, W, ...]``, ``reward
    [B, W]``, the first ``count []`` of them real (the current step's
    action and reward not yet known), and the next action's ``scores``."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    count: jax.Array
    scores: jax.Array


class WindowModelAgent(ScoredAgent):
    """A model re-reading its last ``window`` steps every step (batched).

    ``start`` must run before the first ``act`` (the driver calls it).
    ``obs_space``: shape and dtype of the observation the model reads, when
    it is not the env's (default).
    """

    def __init__(
        self,
        model: Any,
        env: Any,
        window: int,
        greedy: bool = False,
        temperature: float = 1.0,
        obs_space: Any = None,
    ):
        super().__init__(model, env, greedy, temperature)
        self.window = int(window)
        # what the model reads per step (``.shape``, ``.dtype``): the env's
        # observation unless a wrapper feeds it another (DT's ``[obs, rtg]``)
        self.obs_space = env.observation_space(None) if obs_space is None else obs_space

    def init(self, key: jax.Array, params: Any) -> WindowState:
        b, w = key.shape[0], self.window
        obs, act = self.obs_space, self.space
        return WindowState(
            obs=jnp.zeros((b, w, *obs.shape), obs.dtype),
            action=jnp.zeros((b, w, *act.shape), act.dtype),
            reward=jnp.zeros((b, w), jnp.float32),
            count=jnp.zeros((), jnp.int32),
            scores=jnp.zeros((b, *out_shape(act)), jnp.float32),
        )

    def start(self, state: WindowState, obs: Any) -> WindowState:
        """Score the first observation ``obs [B, ...]``."""
        state = state._replace(obs=state.obs.at[:, 0].set(obs), count=jnp.int32(1))
        return self._score(state)

    def scores(self, state: WindowState, obs, env_state, params) -> jax.Array:
        return state.scores

    def update(self, state: WindowState, step: Step) -> WindowState:
        last = state.count - 1
        action = jnp.asarray(step.action, self.space.dtype)
        action = action.reshape(state.action.shape[:1] + state.action.shape[2:])
        reward = jnp.asarray(step.reward, jnp.float32).reshape(-1)
        state = state._replace(
            action=state.action.at[:, last].set(action),
            reward=state.reward.at[:, last].set(reward),
        )
        full = state.count >= self.window

        def slide(buf):  # drop the oldest step once the window is full
            return jnp.where(full, jnp.roll(buf, -1, axis=1), buf)

        slot = jnp.minimum(state.count, self.window - 1)
        state = WindowState(
            obs=slide(state.obs).at[:, slot].set(step.reset_obs),
            action=slide(state.action),
            reward=slide(state.reward),
            count=slot + 1,
            scores=state.scores,
        )
        return self._score(state)

    def _score(self, state: WindowState) -> WindowState:
        """The scores at the window's last real step, from one full pass."""
        out = self.model.get()(state.obs, state.action, state.reward)
        last = state.count - 1
        log_std = None if out.log_std is None else out.log_std[:, last]
        step_out = ModelOutput(out.action[:, last], log_std, {})
        return state._replace(scores=action_scores(step_out, self.space))


def window_agent(model: Any, env: Any, config: Any) -> Any:
    """The batched agent of a model re-reading its last ``config.model.max_steps``
    steps every step, by ``config.eval.acting`` at ``config.eval.temperature``."""
    return model_agent(WindowModelAgent, model, env, config)
