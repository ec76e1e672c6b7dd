"""Decision Transformer (Chen et al., 2021), return-conditioned, as a baseline.

DT predicts ``a_t`` from the returns-to-go ``R_<=t``, states ``s_<=t`` and
earlier actions. agentrl feeds the return-to-go through the observation: the
model's observation at step t is ``[one_hot(s_t) (or s_t), R_t / scale]``
(so a DT model has a continuous observation of size ``obs_size + 1``), with
the usual previous action and reward. Returns-to-go are computed inside each
episode of the window and reset at episode boundaries. The reference's
tokens are ``(R, s, a)`` without rewards ("we don't care about the past
rewards", kzl/decision-transformer ``model.py``, as embedded in
NJU-RL/Meta-DT): here every token also reads the previous reward, so a
window that spans episodes shows earlier episodes' rewards directly (within
one episode they follow from the return-to-go's steps anyway), and the
reward controls act on both channels.

In context DT acts like AD (one token per step on a rolling KV cache across
episodes, or, with ``eval_context="window"``, its last ``max_steps`` steps
re-encoded every step as the DT reference's ``get_action`` does with its
last K steps) but conditioned on a target return: each episode starts at
``target_return`` (by default the best episode return in the training data,
as the DT and in-context RL literature set it) and the return-to-go falls by
every reward received. It has no mechanism to improve across episodes beyond
what its context gives it, which is the contrast with AD.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agentrl.agents.agent import start_agent
from agentrl.agents.model_agents import model_agent
from agentrl.agents.rolling import ADModelAgent
from agentrl.agents.window import WindowModelAgent
from agentrl.algos.ad import check_episodes_fit, check_positive
from agentrl.algos.base import Algorithm, check, register_algorithm
from agentrl.algos.losses import action_loss
from agentrl.data.learning import returns_by_record
from agentrl.data.samplers import ADSampler
from agentrl.envs.base import env_horizon

#: How DT reads its context when acting (``DT.eval_context``).
EVAL_CONTEXTS = ("rolling", "window")


def returns_to_go(reward: jax.Array, done: jax.Array) -> jax.Array:
    """``[B, T]`` sum of the rewards from t to the end of t's episode."""

    def back(carry, x):
        r, d = x
        carry = r + jnp.where(d, 0.0, carry)
        return carry, carry

    def one(r, d):
        _, rtg = jax.lax.scan(back, jnp.float32(0), (r, d), reverse=True)
        return rtg

    return jax.vmap(one)(reward.astype(jnp.float32), done)


def dt_observation(
    obs: jax.Array, rtg: jax.Array, num_obs: int | None, scale: float
) -> jax.Array:
    """``[B, T, obs_dim + 1]``: one-hot (discrete) or raw obs, then ``rtg/scale``."""
    base = (
        jax.nn.one_hot(obs, num_obs, dtype=jnp.float32)
        if num_obs is not None
        else obs.astype(jnp.float32).reshape(*obs.shape[:2], -1)
    )
    return jnp.concatenate([base, (rtg / scale)[..., None]], axis=-1)


def dt_observation_size(env: Any) -> int:
    """Length of :func:`dt_observation`'s vector for ``env``'s observations."""
    space = env.observation_space(env.default_params)
    return (discrete_obs_count(env) or int(np.prod(space.shape))) + 1


def dt_loss(
    model: Any,
    batch: dict[str, jax.Array],
    *,
    num_obs: int | None,
    rtg_scale: float,
    deterministic: bool = False,
):
    """Return-conditioned next-action loss on windows of whole episodes.

    Args:
      batch: ``obs [B, T]``, ``action``, ``reward [B, T]``, ``done [B, T]``.
      num_obs: number of discrete observations (``None`` for vector obs).
      rtg_scale: returns-to-go are divided by it (e.g. the oracle return).
    """
    rtg = returns_to_go(batch["reward"], batch["done"])
    obs = dt_observation(batch["obs"], rtg, num_obs, rtg_scale)
    out = model(obs, batch["action"], batch["reward"], deterministic=deterministic)
    loss, metrics = action_loss(
        model.config.head, out, batch["action"], batch.get("mask")
    )
    return loss, metrics, out


def check_return_conditioning(rtg_scale: Any, target_return: Any) -> None:
    """Refuse a return-to-go scale that is not > 0 or a non-finite target."""
    if rtg_scale is not None:
        check(
            isinstance(rtg_scale, int | float) and rtg_scale > 0,
            f"algo.rtg_scale must be a number > 0 or None, got {rtg_scale!r}",
        )
    if target_return is not None:
        check(
            isinstance(target_return, int | float) and np.isfinite(target_return),
            "algo.target_return must be a finite number or None, got "
            f"{target_return!r}",
        )


def resolved_return_conditioning(
    algo: Any, env: Any, dataset: Any | None
) -> dict[str, float | None]:
    """``algo``'s ``rtg_scale`` and ``target_return`` with their defaults
    filled in: the scale is the env's horizon (1 without one), the target
    the dataset's best episode return (left ``None`` without a dataset)."""
    scale = algo.rtg_scale
    if scale is None:
        scale = float(getattr(env, "horizon", 1) or 1)
    target = algo.target_return
    if target is None and dataset is not None:
        target = best_episode_return(dataset)
    return {"rtg_scale": scale, "target_return": target}


def discrete_obs_count(env: Any) -> int | None:
    """Number of discrete observations of ``env`` (``None``: vector obs)."""
    space = env.observation_space(env.default_params)
    return int(space.n) if hasattr(space, "n") else None


def best_episode_return(dataset: Any, split: str = "train") -> float:
    """The largest episode return in ``dataset``'s ``split`` (read in chunks;
    a cut-off last episode counts as it stands)."""
    returns = returns_by_record(dataset, split, whole_only=False)
    return float(max((r.max() for r in returns if r.size), default=-np.inf))


def check_target_return(target_return: float | None) -> None:
    """Acting needs the return to condition on: a trained run has it."""
    check(
        target_return is not None,
        "algo.target_return is unset: evaluate a trained run (fit fills it "
        "from the data's best episode return) or set it",
    )


@register_algorithm
@dataclasses.dataclass(frozen=True)
class DT(Algorithm):
    """Decision Transformer with a target return at evaluation.

    Attributes:
      context_episodes: whole episodes per training window (as AD's).
      rtg_scale: returns-to-go are divided by it in the observation
        (``None``: the environment's horizon).
      target_return: the return each evaluation episode is conditioned on
        (``None``: the best episode return in the training data, filled in
        when the run's dataset is known and saved with the run).
      eval_context: ``"rolling"`` (default): one token a step on a KV cache
        of its last ``context_episodes * horizon`` steps; ``"window"``: those
        steps re-encoded from scratch every step (the DT reference's reading
        of its last K steps; :mod:`agentrl.agents.window`).
    """

    name = "dt"
    description = "Decision Transformer: return-conditioned imitation"

    context_episodes: int = 4
    rtg_scale: float | None = None
    target_return: float | None = None
    eval_context: str = "rolling"

    def __post_init__(self):
        check_positive("algo", context_episodes=self.context_episodes)
        check_return_conditioning(self.rtg_scale, self.target_return)
        check(
            self.eval_context in EVAL_CONTEXTS,
            f"algo.eval_context must be one of {EVAL_CONTEXTS}, "
            f"got {self.eval_context!r}",
        )

    def check(self, config: Any) -> None:
        super().check(config)
        check(
            config.model.obs_encoding == "table",
            "model.obs_encoding must be 'table' for algo 'dt' (its observation "
            f"is a vector with the return-to-go), got {config.model.obs_encoding!r}",
        )
        check_episodes_fit(config, "algo", self.context_episodes, 1)

    def complete_model(self, model_config: Any, env: Any) -> Any:
        # The return-to-go is appended to the (one-hot or vector) observation.
        return dataclasses.replace(
            model_config, obs_kind="continuous", obs_size=model_config.obs_size + 1
        )

    def context_steps(self, env: Any) -> int:
        return self.context_episodes * env_horizon(env)

    def resolve(self, env: Any, dataset: Any | None) -> DT:
        conditioning = resolved_return_conditioning(self, env, dataset)
        return dataclasses.replace(self, **conditioning)

    def make_sampler(self, dataset: Any, train: Any, *, paired: bool = False) -> Any:
        return ADSampler(
            dataset,
            train.batch_size,
            num_episodes=self.context_episodes,
            paired=paired,
            seed=train.seed,
        )

    def loss(self, model, batch, aux, hparams, *, env, deterministic=False):
        return dt_loss(
            model,
            batch,
            num_obs=discrete_obs_count(env),
            rtg_scale=self._scale(env),
            deterministic=deterministic,
        )

    def _scale(self, env: Any) -> float:
        return float(self.resolve(env, None).rtg_scale)

    def make_agent(self, model: Any, env: Any, num_steps: int, config: Any) -> Any:
        check_target_return(self.target_return)

        return model_agent(
            DTModelAgent,
            model,
            env,
            config,
            target_return=float(self.target_return),
            rtg_scale=self._scale(env),
            window=self.eval_context == "window",
        )


class DTState(NamedTuple):
    """The AD agent's state and the return-to-go ``[B]`` of the next token."""

    inner: Any
    rtg: jax.Array


class DTModelAgent:
    """DT acting online: AD's cached decoding on return-conditioned tokens
    (``window``: the last ``cache_steps`` steps re-encoded every step).

    The observation token of step t is ``[obs_t, rtg_t / scale]`` with
    ``rtg_t = target - (rewards earlier in the episode)``; ``rtg`` is back
    at ``target`` at every episode start. Batched (one row per task).
    """

    batched = True

    def __init__(
        self,
        model: Any,
        env: Any,
        cache_steps: int,
        target_return: float,
        rtg_scale: float,
        greedy: bool = False,
        temperature: float = 1.0,
        window: bool = False,
    ):
        self.num_obs = discrete_obs_count(env)
        acting = {"greedy": greedy, "temperature": temperature}
        if window:
            token = jax.ShapeDtypeStruct((dt_observation_size(env),), jnp.float32)
            self.inner = WindowModelAgent(
                model, env, cache_steps, obs_space=token, **acting
            )
        else:
            self.inner = ADModelAgent(model, env, cache_steps, **acting)
        self.target = float(target_return)
        self.scale = float(rtg_scale)

    def _obs(self, obs: jax.Array, rtg: jax.Array) -> jax.Array:
        """``[B, obs_dim + 1]`` model observation of env obs ``[B, ...]``."""
        return dt_observation(obs[:, None], rtg[:, None], self.num_obs, self.scale)[
            :, 0
        ]

    def init(self, key: jax.Array, params: Any) -> DTState:
        rtg = jnp.full((key.shape[0],), self.target, jnp.float32)
        return DTState(self.inner.init(key, params), rtg)

    def start(self, state: DTState, obs: Any) -> DTState:
        """The first token: ``obs`` at the target return."""
        inner = start_agent(self.inner, state.inner, self._obs(obs, state.rtg))
        return state._replace(inner=inner)

    @property
    def greedy(self) -> bool:
        return self.inner.greedy

    @property
    def space(self) -> Any:
        """The env's action space (a scored agent's, as :func:`select_action`'s)."""
        return self.inner.space

    def scores(self, state: DTState, obs, env_state, params) -> jax.Array:
        """Action scores, AD's (one model call per step, in ``update``)."""
        return self.inner.scores(
            state.inner, self._obs(obs, state.rtg), env_state, params
        )

    def select(self, key: jax.Array, scores: jax.Array, greedy: bool) -> jax.Array:
        return self.inner.select(key, scores, greedy)

    def act(self, key, state: DTState, obs, env_state, params) -> jax.Array:
        return self.select(key, self.scores(state, obs, env_state, params), self.greedy)

    def update(self, state: DTState, step: Any) -> DTState:
        reward = jnp.asarray(step.reward, jnp.float32).reshape(state.rtg.shape)
        done = jnp.asarray(step.done).reshape(state.rtg.shape)
        next_rtg = jnp.where(done, self.target, state.rtg - reward)
        step = step._replace(
            obs=self._obs(step.obs, state.rtg),
            reset_obs=self._obs(step.reset_obs, next_rtg),
        )
        return DTState(self.inner.update(state.inner, step), next_rtg)
