"""The environment base class: the gymnax 1.0 API plus tasks and oracles.

An agentrl environment has exactly gymnax's signature, so any gymnax
environment can be used wherever an agentrl one is expected::

    obs, state = env.reset(key, params)
    obs, state, reward, terminated, truncated, info = env.step(key, state, a, params)

``step`` auto-resets without branching: when the episode ends, the returned
observation and state are those of a fresh episode and the last observation of
the finished one is in ``info["final_observation"]``; ``info`` also holds
``terminated`` and ``truncated`` (both true when an episode ends at its
time limit by termination), as gymnax 1.0's does.

What agentrl adds is the *task*. The task lives in ``EnvParams`` (a pytree),
so vmapping over params is vmapping over tasks:

- ``sample_params(key)`` draws one task (vmappable over keys);
- finite task spaces give ``num_tasks``, a jittable ``params_for_task(task_id)``
  and a deterministic ``task_split(train_fraction, seed, validation_share)``;
- a finite family whose fixed tasks are draws from a continuous
  distribution (Point-Robot's goals, HalfCheetah-Vel's velocities) may also
  give ``draw_params(key)``: a fresh task from that distribution, none of
  the fixed ones (validation tasks beyond the split's, :func:`can_draw_tasks`);
- oracles: ``optimal_action(state, params)`` and ``optimal_return(params)``
  (the expected return of an optimal policy over one episode).

Constructor arguments set shapes (grid size, number of arms, horizon) and are
static; numbers in ``EnvParams`` are traced and can be swept.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Generic, TypeVar

import jax
import jax.numpy as jnp
from flax import struct

from agentrl.envs.tasks import TaskSplit, split_task_ids
from agentrl.prng import is_key


@struct.dataclass
class EnvState:
    """Base state: ``time`` counts steps taken in the current episode."""

    time: jax.Array


@struct.dataclass
class EnvParams:
    """Base params: the episode is truncated after ``max_steps_in_episode``."""

    max_steps_in_episode: jax.Array


S = TypeVar("S", bound=EnvState)
P = TypeVar("P", bound=EnvParams)


def _select(done: jax.Array, reset: Any, stepped: Any) -> Any:
    """The auto-reset's choice of one state leaf. A typed key leaf is chosen
    as its key data and wrapped again: ``jax_debug_key_reuse`` counts a
    ``select`` of keys as a use of both, so a key carried in a state (xminigrid
    keeps one) would raise in every scan of steps."""
    if is_key(reset):
        data = jax.lax.select(
            done, jax.random.key_data(reset), jax.random.key_data(stepped)
        )
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(reset))
    return jax.lax.select(done, reset, stepped)


class Environment(Generic[S, P]):
    """Base class of agentrl environments (gymnax 1.0 API)."""

    #: Episode length upper bound (static): histories are sized with it.
    horizon: int
    #: Number of distinct tasks when the task space is finite, else ``None``.
    num_tasks: int | None = None
    #: Whether ``reset_env`` uses its key. Families with a deterministic start
    #: set it False so ``step`` skips one key split per step (a large share of
    #: the cost of a cheap environment step).
    stochastic_reset: bool = True
    #: Whether an episode can end before ``horizon`` steps (a goal reached, a
    #: pole fallen). Learners whose trials are ``episodes x horizon`` steps
    #: (transformer PPO) refuse such families: a trial would hold more
    #: episodes than it says.
    episodes_end_early: bool = False

    # ------------------------------------------------------------------ API
    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def default_params(self) -> P:
        raise NotImplementedError

    @partial(jax.jit, static_argnums=0)
    def reset(self, key: jax.Array, params: P | None = None) -> tuple[Any, S]:
        """Start an episode: ``(obs, state)``."""
        params = self.default_params if params is None else params
        return self.reset_env(key, params)

    @partial(jax.jit, static_argnums=0)
    def step(
        self, key: jax.Array, state: S, action: Any, params: P | None = None
    ) -> tuple[Any, S, jax.Array, jax.Array, jax.Array, dict[str, Any]]:
        """One transition with branch-free auto-reset.

        Returns ``(obs, state, reward, terminated, truncated, info)``; when
        ``terminated | truncated`` the obs/state are a fresh episode's and the
        finished episode's last observation is ``info["final_observation"]``.
        As in gymnax 1.0, ``truncated`` is the time limit, so both may be
        true on one step, and ``info`` carries ``terminated`` and
        ``truncated`` too.
        """
        params = self.default_params if params is None else params
        if self.stochastic_reset:
            key_step, key_reset = jax.random.split(key)
        else:  # not a reuse: such a family's reset_env ignores its key
            key_step, key_reset = key, key
        obs_st, state_st, reward, terminated, info = self.step_env(
            key_step, state, action, params
        )
        # as gymnax 1.0: truncated at the time limit even if also terminated
        truncated = jnp.asarray(self.is_truncated(state_st, params), jnp.bool_)
        done = jnp.logical_or(terminated, truncated)
        obs_re, state_re = self.reset_env(key_reset, params)
        state = jax.tree.map(partial(_select, done), state_re, state_st)
        obs = jax.tree.map(lambda r, s: jax.lax.select(done, r, s), obs_re, obs_st)
        info = {
            **info,
            "terminated": terminated,
            "truncated": truncated,
            "final_observation": obs_st,
        }
        return obs, state, reward, terminated, truncated, info

    def is_truncated(self, state: S, params: P) -> jax.Array:
        return state.time >= params.max_steps_in_episode

    # -------------------------------------------------- to be implemented
    def reset_env(self, key: jax.Array, params: P) -> tuple[Any, S]:
        raise NotImplementedError

    def step_env(
        self, key: jax.Array, state: S, action: Any, params: P
    ) -> tuple[Any, S, jax.Array, jax.Array, dict[str, Any]]:
        """Environment transition: ``(obs, state, reward, terminated, info)``."""
        raise NotImplementedError

    def action_space(self, params: P | None = None):
        raise NotImplementedError

    def observation_space(self, params: P | None = None):
        raise NotImplementedError

    @property
    def num_actions(self) -> int:
        """Number of discrete actions (discrete environments only)."""
        space = self.action_space(None)
        if not hasattr(space, "n"):
            raise AttributeError(f"{self.name} has continuous actions")
        return space.n

    # ---------------------------------------------------------------- tasks
    def sample_params(self, key: jax.Array) -> P:
        """Draw one task's params; vmappable over keys."""
        raise NotImplementedError

    def params_for_task(self, task_id: jax.Array) -> P:
        """Params of task ``task_id`` in ``[0, num_tasks)``; jittable."""
        raise NotImplementedError(f"{self.name} has no finite task space")

    def task_split(
        self, train_fraction: float = 0.8, seed: int = 0, validation_share: float = 0.0
    ) -> TaskSplit:
        """Deterministic train / validation / test split of ``[0, num_tasks)``.

        ``validation_share`` of the held-out tasks become validation tasks
        (none by default: a two-way split); see :mod:`agentrl.envs.tasks`.
        """
        if self.num_tasks is None:
            raise ValueError(
                f"{self.name} has a continuous task space: sample tasks with "
                "sample_params and split the keys instead"
            )
        return split_task_ids(self.num_tasks, train_fraction, seed, validation_share)

    # --------------------------------------------------------------- oracle
    def optimal_action(self, state: S, params: P) -> jax.Array:
        """The action of an optimal policy in ``state``; jittable."""
        raise NotImplementedError(f"{self.name} has no oracle")

    def optimal_return(self, params: P) -> jax.Array:
        """Expected return of an optimal policy over one episode; jittable."""
        raise NotImplementedError(f"{self.name} has no oracle")

    def success(self, returns: Any) -> Any:
        """Whether each episode's return solves it (same shape, bool);
        defined by families with a goal an episode reaches or misses."""
        raise NotImplementedError(f"{self.name} defines no success")

    @property
    def has_oracle(self) -> bool:
        return type(self).optimal_action is not Environment.optimal_action


def can_draw_tasks(env: Any) -> bool:
    """Whether ``env`` draws fresh tasks from the distribution its fixed tasks
    came from (an optional ``draw_params(key)``; vmappable over keys)."""
    return callable(getattr(env, "draw_params", None))


def validation_beyond_split(env: Any, asked: str, held: int, split: str) -> ValueError:
    """The refusal of more validation tasks than ``split`` holds (``held``)
    on a family that cannot draw more (``not can_draw_tasks(env)``);
    ``asked`` names the setting and its value, ``split`` the split."""
    return ValueError(
        f"{asked}: {split} holds {held} validation tasks and {env.name} has no "
        f"tasks beyond its {env.num_tasks} fixed ones; ask for at most {held}"
    )


def env_horizon(env: Any) -> int:
    """``env.horizon`` or a clear error (needed to size per-episode buffers)."""
    horizon = getattr(env, "horizon", None)
    if not isinstance(horizon, int):
        raise ValueError(
            f"{getattr(env, 'name', env)} has no integer `horizon`; pass the "
            "number of steps explicitly"
        )
    return horizon


def is_bandit(env: Any) -> bool:
    """Whether ``env`` follows the bandit contract (``kind = "bandit"``).

    A bandit has one state, so its observation never changes (a context
    needs no states, DPT's query is fixed) and ``num_arms`` actions. It may
    say more (``docs/usage.md``): ``reward_distribution`` (``"bernoulli"`` or
    ``"gaussian"``: Thompson sampling's posterior) and
    :func:`bandit_arm_means` (regret). Read only here and there.
    """
    return getattr(env, "kind", None) == "bandit"


def bandit_arm_means(env: Any) -> Callable[[Any, jax.Array], jax.Array] | None:
    """``env.arm_means`` of a bandit that states its arms' expected rewards.

    ``arm_means(params, t) -> [num_arms]``: the expected reward of every arm
    at step ``t`` of an episode (``t`` the ``state.time`` before the pull,
    0-based, a traced int32; jittable and vmappable over both). A stationary
    bandit returns its means whatever ``t``; a switching one those in force
    at ``t``. Regret and the random policy's expected return are computed
    from it. ``None`` (no regret is reported) for anything else: a bandit
    whose expected rewards depend on more than ``params`` and ``t`` cannot
    state them, and a guess from a field that happens to be called
    ``means`` would be wrong.
    """
    if not is_bandit(env):
        return None
    return getattr(env, "arm_means", None)
