"""Bandit source algorithms: UCB, Thompson sampling, epsilon-greedy, DPT roll-in.

Each is an :class:`~agentrl.agents.agent.Agent` for ONE task (vmap outside,
e.g. with :func:`~agentrl.agents.agent.run_agent_on_tasks`). They learn
across episodes: the statistics are never reset inside a history, since the
task (the arm means) stays fixed.

State of the count-based agents (:class:`ArmStats`): ``count [arm]`` pulls,
``total [arm]`` summed rewards, ``t []`` pulls so far. They see only their own
rewards, never ``env_state`` or ``params``.

- :class:`UCB`: UCB1, ``argmax mean + c * sqrt(2 ln t / n)``, each arm once first
  (the textbook baseline).
- :class:`UCBDPT`: the DPT reference code's "UCB1.0", ``argmax mean + c /
  max(1, sqrt(n))`` with no ``log t`` (an untried arm has mean 0); it
  explores far less than UCB1 and is the baseline the DPT paper's figures
  compare against.
- :class:`BernoulliThompson`: Beta(``alpha + s``, ``beta + f``) posteriors.
- :class:`GaussianThompson`: normal prior ``N(prior_mean, prior_var)`` and a
  known noise variance (conjugate update); the defaults are the DPT
  reference's prior matched to arm means uniform in ``[0, 1]`` (mean 0.5,
  variance 1/12).
- :class:`EpsilonGreedy`: the empirical best arm, a uniform arm w.p. ``epsilon``.
- :class:`~agentrl.agents.agent.RandomAgent` (any environment) lives with the
  agent protocol.
- :class:`FixedPolicyBandit`: DPT's Dirichlet-mixed random roll-in policy.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from agentrl.agents.agent import Step


@struct.dataclass
class ArmStats:
    """``count [arm]``, ``total [arm]`` (float32) and ``t []`` pulls so far."""

    count: jax.Array
    total: jax.Array
    t: jax.Array


def _init_stats(num_arms: int) -> ArmStats:
    zeros = jnp.zeros((num_arms,), jnp.float32)
    return ArmStats(count=zeros, total=zeros, t=jnp.float32(0))


def _update_stats(stats: ArmStats, step: Step) -> ArmStats:
    onehot = jax.nn.one_hot(step.action, stats.count.shape[0], dtype=jnp.float32)
    return ArmStats(
        count=stats.count + onehot,
        total=stats.total + onehot * step.reward,
        t=stats.t + 1,
    )


def _argmax_random_ties(key: jax.Array, values: jax.Array) -> jax.Array:
    """``argmax`` of ``values [arm]`` breaking ties uniformly at random."""
    best = values >= jnp.max(values)
    noise = jax.random.uniform(key, values.shape)
    return jnp.argmax(jnp.where(best, noise, -1.0)).astype(jnp.int32)


@dataclasses.dataclass(frozen=True)
class UCB:
    """UCB1 with exploration constant ``c`` (DPT's baseline uses ``c = 1``)."""

    num_arms: int
    c: float = 1.0

    def init(self, key: jax.Array, params: Any) -> ArmStats:
        return _init_stats(self.num_arms)

    def act(self, key, state: ArmStats, obs, env_state, params) -> jax.Array:
        n = jnp.maximum(state.count, 1.0)
        mean = state.total / n
        bonus = self.c * jnp.sqrt(2.0 * jnp.log(jnp.maximum(state.t, 1.0)) / n)
        score = jnp.where(state.count > 0, mean + bonus, jnp.inf)
        return _argmax_random_ties(key, score)

    def update(self, state: ArmStats, step: Step) -> ArmStats:
        return _update_stats(state, step)


@dataclasses.dataclass(frozen=True)
class UCBDPT:
    """DPT's reference "UCB1.0": ``mean + c / max(1, sqrt(n))``, no ``log t``.

    As the reference's vectorised evaluation (``UCBPolicy.act_numpy_vec``,
    which its online evaluation runs): while an arm is untried the
    lowest-index untried arm is pulled, so each arm is pulled once first;
    then ties are broken uniformly at random (the reference takes the first
    index; the arms are exchangeable, so the regret is the same).
    """

    num_arms: int
    c: float = 1.0

    def init(self, key: jax.Array, params: Any) -> ArmStats:
        return _init_stats(self.num_arms)

    def act(self, key, state: ArmStats, obs, env_state, params) -> jax.Array:
        mean = state.total / jnp.maximum(state.count, 1.0)
        bonus = self.c / jnp.maximum(1.0, jnp.sqrt(state.count))
        untried = jnp.argmin(state.count).astype(jnp.int32)  # lowest index
        best = _argmax_random_ties(key, mean + bonus)
        return jnp.where(state.count[untried] == 0, untried, best)

    def update(self, state: ArmStats, step: Step) -> ArmStats:
        return _update_stats(state, step)


@dataclasses.dataclass(frozen=True)
class BernoulliThompson:
    """Thompson sampling with Beta(``alpha``, ``beta``) priors (rewards in [0, 1])."""

    num_arms: int
    alpha: float = 1.0
    beta: float = 1.0

    def init(self, key: jax.Array, params: Any) -> ArmStats:
        return _init_stats(self.num_arms)

    def act(self, key, state: ArmStats, obs, env_state, params) -> jax.Array:
        a = self.alpha + state.total
        b = self.beta + state.count - state.total
        return jnp.argmax(jax.random.beta(key, a, b)).astype(jnp.int32)

    def update(self, state: ArmStats, step: Step) -> ArmStats:
        return _update_stats(state, step)


@dataclasses.dataclass(frozen=True)
class GaussianThompson:
    """Thompson sampling, Gaussian prior and likelihood with known noise variance.

    The default prior ``N(0.5, 1/12)`` has the mean and variance of arm means
    uniform in ``[0, 1]`` (the DPT reference's); ``noise_variance`` should be
    the bandit's true one (the registry's ``thompson`` source reads it from
    the environment).
    """

    num_arms: int
    noise_variance: float = 0.3
    prior_mean: float = 0.5
    prior_variance: float = 1.0 / 12.0

    def init(self, key: jax.Array, params: Any) -> ArmStats:
        return _init_stats(self.num_arms)

    def posterior(self, state: ArmStats) -> tuple[jax.Array, jax.Array]:
        """Posterior ``(mean [arm], variance [arm])`` of the arm means."""
        precision = 1.0 / self.prior_variance + state.count / self.noise_variance
        var = 1.0 / precision
        mean = var * (
            self.prior_mean / self.prior_variance + state.total / self.noise_variance
        )
        return mean, var

    def act(self, key, state: ArmStats, obs, env_state, params) -> jax.Array:
        mean, var = self.posterior(state)
        sample = mean + jnp.sqrt(var) * jax.random.normal(key, mean.shape)
        return jnp.argmax(sample).astype(jnp.int32)

    def update(self, state: ArmStats, step: Step) -> ArmStats:
        return _update_stats(state, step)


@dataclasses.dataclass(frozen=True)
class EpsilonGreedy:
    """The empirical best arm (untried arms first), a random arm w.p. ``epsilon``."""

    num_arms: int
    epsilon: float = 0.1

    def init(self, key: jax.Array, params: Any) -> ArmStats:
        return _init_stats(self.num_arms)

    def act(self, key, state: ArmStats, obs, env_state, params) -> jax.Array:
        key_explore, key_arm, key_tie = jax.random.split(key, 3)
        mean = jnp.where(
            state.count > 0, state.total / jnp.maximum(state.count, 1.0), jnp.inf
        )
        greedy = _argmax_random_ties(key_tie, mean)
        uniform = jax.random.randint(key_arm, (), 0, self.num_arms, jnp.int32)
        explore = jax.random.uniform(key_explore) < self.epsilon
        return jnp.where(explore, uniform, greedy)

    def update(self, state: ArmStats, step: Step) -> ArmStats:
        return _update_stats(state, step)


#: the reference roll-in's mixing weights are ``k / MIXING_STEPS``
MIXING_STEPS = 10


@dataclasses.dataclass(frozen=True)
class FixedPolicyBandit:
    """DPT's bandit roll-in: one random arm distribution per task, kept fixed.

    ``init`` draws ``p = (1 - w) * Dirichlet(concentration * 1) + w * onehot(j)``
    with ``w`` uniform on ``{0, 0.1, ..., 1}`` (the reference's
    ``rollin_bandit``: one context in 11 pulls a single arm throughout, one
    in 11 is the Dirichlet draw alone) and ``j`` a uniform arm, so the
    weight on the best arm (and the context's coverage of it) varies from
    task to task. State: ``p [arm]``.
    """

    num_arms: int
    concentration: float = 1.0

    def init(self, key: jax.Array, params: Any) -> jax.Array:
        key_d, key_w, key_j = jax.random.split(key, 3)
        alpha = jnp.full((self.num_arms,), self.concentration, jnp.float32)
        dirichlet = jax.random.dirichlet(key_d, alpha)
        w = jax.random.randint(key_w, (), 0, MIXING_STEPS + 1) / MIXING_STEPS
        j = jax.random.randint(key_j, (), 0, self.num_arms)
        return (1.0 - w) * dirichlet + w * jax.nn.one_hot(j, self.num_arms)

    def act(self, key, state: jax.Array, obs, env_state, params) -> jax.Array:
        return jax.random.categorical(key, jnp.log(state)).astype(jnp.int32)

    def update(self, state: jax.Array, step: Step) -> jax.Array:
        return state
