"""Multi-armed bandits: Bernoulli and Gaussian arms, one task = arm means.

An episode is ``horizon`` pulls of the same bandit; the observation is a
constant dummy ``[1]`` float32 (bandits have no state). The DPT setting is
``gaussian_bandit`` with ``num_arms=5, horizon=500`` and means uniform in
``[0, 1]``. Its noise: the DPT paper's text says "variance 0.3" (this class's
default, ``noise_variance=0.3``, a standard deviation of 0.55), but its
reference code draws ``means[a] + normal(0, 0.3)``, a standard deviation of
0.3, and its numbers come from that code: ``noise_std=0.3`` (what the
``dpt_bandit`` experiment uses). Give one of ``noise_variance`` and
``noise_std``.

Arm means are i.i.d. uniform in ``[0, 1]``; ``means_beta=(a, b)`` draws them
from Beta(a, b) instead (e.g. ``(0.5, 0.5)``: most arms near 0 or 1), a
shift to evaluate a learner trained on uniform means
(:mod:`agentrl.evaluate.shift`).

Static (constructor): ``num_arms``, ``horizon``, the noise level,
``means_beta``.
Traced (``BanditParams``): ``means [num_arms]``, ``noise_std`` (Gaussian only),
``max_steps_in_episode``.

Reward: Bernoulli arms pay 1 with probability ``means[a]`` else 0; Gaussian
arms pay ``means[a] + noise_std * N(0, 1)``. Episodes never terminate; they
are truncated after ``horizon`` pulls. The oracle pulls ``argmax(means)`` and
its expected return is ``horizon * max(means)``.

``reward_distribution`` (``"bernoulli"`` or ``"gaussian"``, a class attribute)
says which, for algorithms that pick a model of the rewards (Thompson
sampling's posterior); ``arm_means(params, t)`` states the arms' expected
rewards (stationary here) for regret. The bandit contract a family of your
own follows is in ``docs/usage.md``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

import agentrl.envs.spaces as spaces
from agentrl.envs.base import Environment, EnvParams, EnvState
from agentrl.envs.validate import check_float, check_int


@struct.dataclass
class BanditState(EnvState):
    """Only the step counter: a bandit has no state."""


@struct.dataclass
class BanditParams(EnvParams):
    """``means [num_arms]`` (the task) and the Gaussian ``noise_std``."""

    means: jax.Array
    noise_std: jax.Array


class _Bandit(Environment[BanditState, BanditParams]):
    kind = "bandit"
    reward_distribution: str  # "bernoulli" | "gaussian", set by each subclass
    stochastic_reset = False

    def __init__(
        self,
        num_arms: int = 5,
        horizon: int = 100,
        noise_variance=0.0,
        means_beta: tuple[float, float] | None = None,
    ):
        self.num_arms = check_int(self.name, "num_arms", num_arms, 2)
        self.horizon = check_int(self.name, "horizon", horizon, 1)
        self.noise_variance = check_float(
            self.name, "noise_variance", noise_variance, 0
        )
        self.means_beta = _beta(self.name, means_beta)

    @property
    def default_params(self) -> BanditParams:
        # Deterministic, distinct means so the default task has one best arm.
        means = jnp.linspace(0.1, 0.9, self.num_arms, dtype=jnp.float32)
        return self._params(means)

    def _params(self, means: jax.Array) -> BanditParams:
        return BanditParams(
            max_steps_in_episode=jnp.int32(self.horizon),
            means=means,
            noise_std=jnp.sqrt(jnp.float32(self.noise_variance)),
        )

    def sample_params(self, key: jax.Array) -> BanditParams:
        """Arm means i.i.d. uniform in ``[0, 1]`` (Beta(a, b): ``means_beta``)."""
        if self.means_beta is not None:
            a, b = self.means_beta
            return self._params(jax.random.beta(key, a, b, (self.num_arms,)))
        return self._params(jax.random.uniform(key, (self.num_arms,)))

    def reset_env(self, key: jax.Array, params: BanditParams):
        return self._obs(), BanditState(time=jnp.int32(0))

    def _obs(self) -> jax.Array:
        return jnp.zeros((1,), jnp.float32)

    def step_env(self, key: jax.Array, state: BanditState, action: Any, params):
        reward = self._reward(key, jnp.asarray(action, jnp.int32), params)
        state = BanditState(time=state.time + 1)
        return self._obs(), state, reward, jnp.bool_(False), {}

    def _reward(self, key, action, params) -> jax.Array:
        raise NotImplementedError

    def action_space(self, params=None) -> spaces.Discrete:
        return spaces.Discrete(self.num_arms)

    def observation_space(self, params=None) -> spaces.Box:
        return spaces.Box(0.0, 0.0, (1,))

    def arm_means(self, params: BanditParams, t: jax.Array) -> jax.Array:
        """``[num_arms]`` expected reward of every arm at step ``t``: the
        stationary ``means`` (the bandit contract, ``docs/usage.md``)."""
        del t  # the arms never change within a task
        return params.means

    def optimal_action(self, state: BanditState, params: BanditParams) -> jax.Array:
        return jnp.argmax(params.means).astype(jnp.int32)

    def optimal_return(self, params: BanditParams) -> jax.Array:
        return params.max_steps_in_episode * jnp.max(params.means)


def _beta(env: str, value: Any) -> tuple[float, float] | None:
    """``means_beta`` as ``(a, b)`` with ``a, b > 0``, or ``None``."""
    if value is None:
        return None
    ok = isinstance(value, list | tuple) and len(value) == 2
    if ok:
        ok = all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    if not ok or min(value) <= 0:
        raise ValueError(
            f"{env}: `means_beta` must be two numbers (a, b) > 0, e.g. "
            f"(0.5, 0.5), got {value!r}"
        )
    return float(value[0]), float(value[1])


class BernoulliBandit(_Bandit):
    """k-armed Bernoulli bandit; the task is the vector of success rates."""

    reward_distribution = "bernoulli"

    def __init__(
        self,
        num_arms: int = 5,
        horizon: int = 100,
        means_beta: tuple[float, float] | None = None,
    ):
        super().__init__(num_arms=num_arms, horizon=horizon, means_beta=means_beta)

    def _reward(self, key, action, params) -> jax.Array:
        p = params.means[action]
        return jax.random.bernoulli(key, p).astype(jnp.float32)


class GaussianBandit(_Bandit):
    """k-armed Gaussian bandit (DPT: k=5, H=500; noise: see the module doc).

    ``noise_variance`` (default 0.3, the DPT paper's text) or ``noise_std``
    (0.3 in DPT's reference code), not both.
    """

    reward_distribution = "gaussian"

    def __init__(
        self,
        num_arms: int = 5,
        horizon: int = 500,
        noise_variance: float | None = None,
        noise_std: float | None = None,
        means_beta: tuple[float, float] | None = None,
    ):
        if noise_variance is not None and noise_std is not None:
            raise ValueError(
                f"{self.name}: give one of `noise_variance` and `noise_std`, got "
                f"noise_variance={noise_variance!r} and noise_std={noise_std!r}"
            )
        if noise_std is not None:
            noise_variance = check_float(self.name, "noise_std", noise_std, 0) ** 2
        super().__init__(
            num_arms,
            horizon,
            0.3 if noise_variance is None else noise_variance,
            means_beta,
        )

    def _reward(self, key, action, params) -> jax.Array:
        noise = jax.random.normal(key, (), jnp.float32)
        return params.means[action] + params.noise_std * noise
