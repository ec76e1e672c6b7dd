"""gymnax interop both ways: a gymnax environment as a task family, and back.

agentrl environments already have gymnax 1.0's signature (``reset``/``step``
with ``terminated``, ``truncated`` and auto-reset). Two things differ, and
this module bridges them:

- **tasks**: an agentrl family draws tasks (``sample_params(key)``) and has a
  static ``horizon`` that sizes its histories. :func:`from_gymnax` gives any
  gymnax environment both, so it is a task family for history generation
  (``agentrl data generate --env gymnax:CartPole-v1 ...``), training and
  evaluation::

      env, params = gymnax.make("Pendulum-v1")
      def sample(key):  # the task: the pendulum's mass
          return params.replace(m=jax.random.uniform(key, minval=0.5, maxval=2))
      family = from_gymnax(env, sample_params=sample, horizon=200)
      # registered, a dataset written from it can rebuild it by name
      agentrl.envs.register_env("pendulum_mass", lambda: from_gymnax(env, sample, 200))

- **spaces**: gymnax's wrappers check ``isinstance(space, gymnax...Box)``;
  :func:`to_gymnax` presents an agentrl environment as a
  ``gymnax.environments.environment.Environment`` whose spaces are gymnax's
  own, so ``LogWrapper(to_gymnax(make("darkroom")))`` and
  ``FlattenObservationWrapper`` work. :func:`space_to_gymnax` and
  :func:`space_from_gymnax` convert single spaces.

gymnax is imported only when these are called (it takes seconds).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

import agentrl.envs.spaces as spaces
from agentrl.checks import is_int
from agentrl.envs.base import Environment


def space_to_gymnax(space: Any) -> Any:
    """The gymnax space equal to agentrl's ``space`` (gymnax's passes through)."""
    from gymnax.environments import spaces as gspaces

    if isinstance(space, gspaces.Space):
        return space
    if isinstance(space, spaces.Discrete):
        return gspaces.Discrete(space.n, dtype=space.dtype)
    if isinstance(space, spaces.Box):
        return gspaces.Box(space.low, space.high, space.shape, space.dtype)
    if isinstance(space, spaces.Dict):
        return gspaces.Dict({k: space_to_gymnax(v) for k, v in space.spaces.items()})
    raise TypeError(f"no gymnax equivalent of {space!r}")


def space_from_gymnax(space: Any) -> spaces.Space:
    """The agentrl space equal to gymnax's ``space`` (agentrl's passes through)."""
    from gymnax.environments import spaces as gspaces

    if isinstance(space, spaces.Space):
        return space
    if isinstance(space, gspaces.Discrete):
        return spaces.Discrete(space.n)
    if isinstance(space, gspaces.Box):
        return spaces.Box(space.low, space.high, tuple(space.shape), space.dtype)
    if isinstance(space, gspaces.Dict):
        return spaces.Dict({k: space_from_gymnax(v) for k, v in space.spaces.items()})
    raise TypeError(f"no agentrl equivalent of gymnax's {space!r}")


class GymnaxTaskFamily(Environment):
    """A gymnax environment as an agentrl task family (see :func:`from_gymnax`).

    ``reset``/``step`` are gymnax's own (its dynamics, its auto-reset, its
    ``info``); agentrl adds ``sample_params`` (the task distribution),
    ``horizon``, and agentrl spaces. The task space is continuous
    (``num_tasks = None``): tasks are drawn by key.
    """

    num_tasks = None
    episodes_end_early = True  # whatever gymnax's environment does

    def __init__(
        self,
        env: Any,
        sample_params: Callable[[jax.Array], Any] | None = None,
        horizon: int | None = None,
        name: str | None = None,
    ):
        self.env = env
        self._sample = sample_params
        self._name = name or f"gymnax:{getattr(env, 'name', type(env).__name__)}"
        if horizon is None:
            horizon = getattr(env.default_params, "max_steps_in_episode", None)
        if not is_int(horizon, 1):
            raise ValueError(
                f"from_gymnax: horizon must be an integer >= 1 (the most steps "
                f"an episode takes), got {horizon!r}; pass horizon=..."
            )
        self.horizon = horizon

    def __repr__(self) -> str:
        return f"from_gymnax({self.env!r}, horizon={self.horizon})"

    @property
    def name(self) -> str:
        return self._name

    @property
    def default_params(self) -> Any:
        return self.env.default_params

    def reset(self, key: jax.Array, params: Any = None):
        return self.env.reset(key, self.default_params if params is None else params)

    def step(self, key: jax.Array, state: Any, action: Any, params: Any = None):
        params = self.default_params if params is None else params
        return self.env.step(key, state, action, params)

    def reset_env(self, key, params):
        return self.env.reset_env(key, params)

    def step_env(self, key, state, action, params):
        return self.env.step_env(key, state, action, params)

    def is_truncated(self, state, params):
        return self.env.is_truncated(state, params)

    def action_space(self, params: Any = None) -> spaces.Space:
        params = self.default_params if params is None else params
        return space_from_gymnax(self.env.action_space(params))

    def observation_space(self, params: Any = None) -> spaces.Space:
        params = self.default_params if params is None else params
        return space_from_gymnax(self.env.observation_space(params))

    def sample_params(self, key: jax.Array) -> Any:
        """A task's params: ``sample_params(key)``, or the defaults (one task)."""
        if self._sample is None:
            return self.env.default_params
        return self._sample(key)


def from_gymnax(
    env: Any,
    sample_params: Callable[[jax.Array], Any] | None = None,
    horizon: int | None = None,
    name: str | None = None,
) -> GymnaxTaskFamily:
    """Any gymnax environment as an agentrl task family.

    Args:
      env: a gymnax environment (``gymnax.make(id)[0]``, or your own subclass
        of ``gymnax.environments.environment.Environment``).
      sample_params: ``key -> EnvParams``, the task distribution (jittable,
        vmappable over keys); ``None``: every task is ``env.default_params``.
      horizon: most steps an episode takes under any sampled params (sizes the
        histories); default ``default_params.max_steps_in_episode``.
      name: how listings and datasets name it (default ``gymnax:<env.name>``).
    """
    return GymnaxTaskFamily(env, sample_params, horizon, name)


def to_gymnax(env: Any) -> Any:
    """``env`` (agentrl) as a gymnax ``Environment`` with gymnax spaces.

    Its ``step``/``reset`` are ``env``'s own; only the spaces change type, so
    gymnax's wrappers (``LogWrapper``, ``FlattenObservationWrapper``, ...)
    accept it. A gymnax environment is returned as it is.
    """
    from gymnax.environments.environment import Environment as GymnaxEnvironment

    if isinstance(env, GymnaxEnvironment):
        return env
    if isinstance(env, GymnaxTaskFamily):
        return env.env

    class GymnaxView(GymnaxEnvironment):
        """An agentrl environment seen through gymnax's types."""

        def __init__(self, inner: Any):
            super().__init__()
            self.inner = inner

        def __repr__(self) -> str:
            return f"to_gymnax({self.inner!r})"

        @property
        def name(self) -> str:
            return self.inner.name

        @property
        def default_params(self) -> Any:
            return self.inner.default_params

        def reset(self, key, params=None):
            return self.inner.reset(key, params)

        def step(self, key, state, action, params=None):
            return self.inner.step(key, state, action, params)

        def reset_env(self, key, params):
            return self.inner.reset_env(key, params)

        def step_env(self, key, state, action, params):
            return self.inner.step_env(key, state, action, params)

        def is_truncated(self, state, params):
            return self.inner.is_truncated(state, params)

        @property
        def num_actions(self) -> int:
            return self.inner.num_actions

        def action_space(self, params=None):
            return space_to_gymnax(self.inner.action_space(params))

        def observation_space(self, params=None):
            return space_to_gymnax(self.inner.observation_space(params))

    return GymnaxView(env)
