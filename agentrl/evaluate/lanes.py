"""Lanes: every acting rule and context control of a model as data.

Evaluating one trained model runs the same program again and again: once
per acting rule on the validation tasks (:mod:`agentrl.evaluate.selection`),
once with the chosen rule on the test tasks, once per in-context-learning
control (:mod:`agentrl.evaluate.controls`). A *lane* is one such setting
as two int32 scalars, ``Lane(rule, control)``, passed to the program as a
traced argument, so one compiled program serves every lane
(:mod:`agentrl.evaluate.programs` keeps it).

:class:`LaneAgent` wraps the model's *sampling* agent (one with ``scores``
and ``select``, :class:`~agentrl.agents.model_agents.ScoredAgent`) and does
what the per-setting agents do, with the same operations on the same keys
(tested equal action for action):

- the rule: both the sampled and the greedy action come from one set of
  scores; the lane picks the sampled one (``sample``), the greedy one
  (``greedy``) or the greedy one once the task paid a positive reward
  (``sample_then_greedy``, :class:`~agentrl.agents.acting.SampleThenGreedy`);
  ``sample_above_median`` samples from the scores filtered by
  :func:`~agentrl.agents.acting.above_median`, with the same key;
- the control changes only what the model reads (as
  :func:`~agentrl.evaluate.controls.controlled_agent`): rewards zeroed or
  drawn from those paid so far, or an empty context (the model acts from
  its initial state started on the current observation); the rule still
  sees the rewards the task pays.

Lanes run one after another, not vmapped: the empty context's extra model
call sits in a ``lax.cond`` on the (unbatched) lane, so only that lane pays
for it; under ``vmap`` the condition would be batched, both branches would
run in every lane, and the number of lanes would become part of the
program's shape (one compile per count).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agentrl.agents.acting import ACTING_RULES, above_median
from agentrl.agents.agent import Step, start_agent

#: rule name -> lane id
RULE_IDS = {name: i for i, name in enumerate(ACTING_RULES)}
#: control name (``None``: the model itself) -> lane id
CONTROL_IDS = {None: 0, "zero_rewards": 1, "shuffle_rewards": 2, "empty_context": 3}
_GREEDY, _THEN_GREEDY = RULE_IDS["greedy"], RULE_IDS["sample_then_greedy"]
_ABOVE_MEDIAN = RULE_IDS["sample_above_median"]
_ZERO, _SHUFFLE = CONTROL_IDS["zero_rewards"], CONTROL_IDS["shuffle_rewards"]
_EMPTY = CONTROL_IDS["empty_context"]
#: ``fold_in`` salt of the shuffled-reward draws (as ``ControlledAgent``'s)
_SHUFFLE_SALT = 0x5F1E


class Lane(NamedTuple):
    """One acting rule and control: ``rule []`` and ``control []`` int32."""

    rule: jax.Array
    control: jax.Array


def lane(rule: str, control: str | None = None) -> Lane:
    """The :class:`Lane` of acting ``rule`` under ``control`` (``None``: none)."""
    if rule not in RULE_IDS:
        raise ValueError(f"eval.acting must be one of {ACTING_RULES}, got {rule!r}")
    if control not in CONTROL_IDS:
        names = ", ".join(c for c in CONTROL_IDS if c)
        raise ValueError(f"control must be one of {names}, got {control!r}")
    return Lane(jnp.int32(RULE_IDS[rule]), jnp.int32(CONTROL_IDS[control]))


def is_scored(agent: Any) -> bool:
    """Whether ``agent`` splits acting into ``scores`` and ``select``."""
    return all(callable(getattr(agent, m, None)) for m in ("scores", "select"))


class LaneState(NamedTuple):
    """The model agent's state, its initial state, and the lane's bookkeeping.

    ``fresh``: the state the empty context acts from; ``rewards [B,
    num_steps]`` paid so far (the shuffled draws), ``count []`` steps,
    ``key [B]`` of the draws; ``rewarded [B]``: a positive reward seen.
    """

    inner: Any
    fresh: Any
    rewards: jax.Array
    count: jax.Array
    key: jax.Array
    rewarded: jax.Array


class LaneAgent:
    """A scored model agent acting by a :class:`Lane`'s rule and control (batched)."""

    batched = True

    def __init__(self, agent: Any, lane: Lane, num_steps: int):
        if not is_scored(agent):
            raise ValueError(
                f"a lane needs an agent with `scores` and `select`; "
                f"{type(agent).__name__} has not both"
            )
        self.agent, self.lane, self.num_steps = agent, lane, int(num_steps)

    def init(self, key: jax.Array, params: Any) -> LaneState:
        batch = key.shape[0]
        inner = self.agent.init(key, params)
        return LaneState(
            inner=inner,
            fresh=inner,
            rewards=jnp.zeros((batch, self.num_steps), jnp.float32),
            count=jnp.int32(0),
            key=jax.vmap(lambda k: jax.random.fold_in(k, _SHUFFLE_SALT))(key),
            rewarded=jnp.zeros((batch,), bool),
        )

    def start(self, state: LaneState, obs: Any) -> LaneState:
        return state._replace(inner=start_agent(self.agent, state.inner, obs))

    def scores(self, state: LaneState, obs, env_state, params) -> jax.Array:
        """The model's scores; under the empty context, from a fresh start."""
        own = self.agent.scores(state.inner, obs, env_state, params)
        empty = self.lane.control == _EMPTY

        def fresh():
            started = start_agent(self.agent, state.fresh, obs)
            return self.agent.scores(started, obs, env_state, params).astype(own.dtype)

        # a real branch (the lane is not batched): only this lane pays
        return jnp.where(
            empty, jax.lax.cond(empty, fresh, lambda: jnp.zeros_like(own)), own
        )

    def act(self, key, state: LaneState, obs, env_state, params) -> jax.Array:
        scores = self.scores(state, obs, env_state, params)
        rule = self.lane.rule
        # one draw from ``key`` whichever rule samples (the other rules'
        # actions stay those of the plain scores)
        filtered = above_median(scores, self.agent.space)
        plain = scores.astype(filtered.dtype)
        drawn = jnp.where(rule == _ABOVE_MEDIAN, filtered, plain)
        sampled = self.agent.select(key, drawn, False)
        greedy = self.agent.select(key, scores, True)
        pick = (rule == _GREEDY) | ((rule == _THEN_GREEDY) & state.rewarded)
        pick = pick.reshape(pick.shape + (1,) * (sampled.ndim - 1))
        return jnp.where(pick, greedy, sampled)

    def update(self, state: LaneState, step: Step) -> LaneState:
        reward = jnp.asarray(step.reward, jnp.float32).reshape(-1)
        t = jnp.minimum(state.count, self.num_steps - 1)
        rewards = state.rewards.at[:, t].set(reward)
        keys = jax.vmap(lambda k: jax.random.fold_in(k, state.count))(state.key)
        pick = jax.vmap(lambda k: jax.random.randint(k, (), 0, t + 1))(keys)
        drawn = jnp.take_along_axis(rewards, pick[:, None], axis=1)[:, 0]
        control = self.lane.control
        seen = jnp.where(
            control == _ZERO,
            jnp.zeros_like(reward),
            jnp.where(control == _SHUFFLE, drawn, reward),
        )
        seen_step = step._replace(reward=seen.reshape(jnp.shape(step.reward)))
        return LaneState(
            inner=self.agent.update(state.inner, seen_step),
            fresh=state.fresh,
            rewards=rewards,
            count=state.count + 1,
            key=state.key,
            rewarded=state.rewarded | (reward.reshape(state.rewarded.shape) > 0),
        )
