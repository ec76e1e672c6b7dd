"""PPO as a source of learning histories (PureJaxRL style, one jit).

Each task gets its own freshly initialised actor-critic which learns online,
in a single stream of ``num_episodes * env.horizon`` environment steps (the
environment auto-resets between episodes). Every ``steps_per_update`` steps
the agent does a PPO update (clipped surrogate, GAE, value loss, entropy
bonus; ``num_epochs`` passes over ``num_minibatches`` shuffled minibatches).
The recorded history is therefore an RL *learning* history whose returns
rise over its episodes: the data Algorithm Distillation is trained on.

- Core (``core``): ``"mlp"`` (default), separate two-layer tanh MLPs for
  actor and critic of width ``hidden``, with no memory; ``"gru"``, a GRU
  actor-critic of width ``core_hidden`` whose hidden state runs through the
  task's whole stream, fed the previous action too, its update replaying
  the core over chunks of the rollout (XLand-100B's collector's shape:
  :mod:`agentrl.sources.ppo_gru`); with ``obs_encoder="cells"`` it reads
  ``[h, w, 2]`` (tile, colour) id observations through the collector's
  per-cell embeddings and convolutions (XLand's; ``"flat"``, the default,
  as the MLP reads them).
- Policies: categorical over ``Discrete`` actions, diagonal Gaussian over
  ``Box`` actions. The Gaussian lives in units of half the box width; the
  env receives (and the history records) the sample clipped to the box and
  rescaled, the log-probability is that of the unclipped sample.
- Inputs: ``Discrete`` observations are one-hot encoded, ``Box`` ones
  flattened, ``Dict`` ones (e.g. :class:`~agentrl.envs.MultiEpisodeTrial`)
  concatenated, so a trial-wrapped env also works (the core then also sees
  ``prev_action``, ``prev_reward`` and ``episode``).
- Truncated episodes bootstrap from the value of ``final_observation``;
  terminated ones do not.
- DPT's labels (``optimal_action``), by ``labels``: ``"oracle"`` the env's
  optimal action at each recorded state; ``"final_policy"`` the run's final
  policy acting deterministically there (the Gaussian's mean clipped to the
  box, or the argmax), for families without an oracle (MuJoCo; what the
  continuous-control references' SAC-collected data amount to, see
  docs/references.md); ``"none"``; ``"auto"`` (default): the oracle where
  the env has one, else none.

The whole run, all tasks at once, is one ``jax.jit(jax.vmap(...))`` with the
network weights ``[task, ...]``. The loss, GAE, optimizer and networks are
:mod:`agentrl.rl`'s (shared with the online learners).
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

import agentrl.envs.spaces as spaces
from agentrl.history import History, episode_index, task_ids
from agentrl.prng import key_scan
from agentrl.rl.nets import Policy
from agentrl.rl.ppo import (
    Learner,
    batch_loss,
    episode_advantages,
    optimizer,
    sgd_epochs,
)
from agentrl.sources.ppo_gru import ENCODERS, GRUTaskRun, cells_problem
from agentrl.sources.recording import recorded_step
from agentrl.sources.settings import check_ints, config_from, resolve_labels

#: the ``core`` choices (module docstring)
CORES = ("mlp", "gru")


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """PPO settings (all static). ``None`` fields take a per-env default.

    ``steps_per_update`` defaults to ``4 * env.horizon`` (or the largest
    divisor of ``num_episodes`` not above 4, times the horizon);
    ``ent_coef`` defaults to 0.01 for discrete and 0.0 for continuous actions.
    ``hidden`` is the ``"mlp"`` core's width, ``core_hidden`` the ``"gru"``
    core's (its GRU, input layer and heads; 256 is XLand-100B's collector's
    for XLand-Trivial, 1,024 for medium); each core ignores the other's.
    ``obs_encoder`` (``"gru"`` only): ``"flat"`` or ``"cells"`` (module
    docstring).
    """

    steps_per_update: int | None = None
    num_epochs: int = 4
    num_minibatches: int = 4
    lr: float = 3e-3
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    ent_coef: float | None = None
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 64
    init_log_std: float = -0.5
    labels: str = "auto"
    core: str = "mlp"
    core_hidden: int = 256
    obs_encoder: str = "flat"


def make_config(env: Any, num_episodes: int, **settings: Any) -> PPOConfig:
    """Validate ``settings`` (PPOConfig fields) and fill the per-env defaults."""
    config = config_from("ppo", PPOConfig, env, num_episodes, settings)
    horizon = env.horizon
    total = num_episodes * horizon
    steps = config.steps_per_update
    if steps is None:
        per = max(d for d in (1, 2, 3, 4) if num_episodes % d == 0)
        steps = per * horizon
    if not isinstance(steps, int) or steps < 1 or total % steps:
        raise ValueError(
            f"ppo: steps_per_update must be a positive divisor of num_episodes * "
            f"horizon = {total}, got {steps!r}"
        )
    check_ints(
        "ppo",
        num_epochs=config.num_epochs,
        num_minibatches=config.num_minibatches,
        hidden=config.hidden,
        core_hidden=config.core_hidden,
    )
    if config.core not in CORES:
        raise ValueError(f"ppo: core must be one of {CORES}, got {config.core!r}")
    _check_encoder(env, config)
    if steps % config.num_minibatches:
        raise ValueError(
            f"ppo: num_minibatches must divide steps_per_update = {steps}, got "
            f"{config.num_minibatches}"
        )
    for name in ("gamma", "gae_lambda"):
        if not 0.0 <= getattr(config, name) <= 1.0:
            raise ValueError(
                f"ppo: {name} must be in [0, 1], got {getattr(config, name)}"
            )
    if config.lr <= 0 or config.clip_eps <= 0:
        raise ValueError(
            f"ppo: lr and clip_eps must be > 0, got {config.lr}, {config.clip_eps}"
        )
    discrete = spaces.is_discrete(env.action_space(None))
    ent = config.ent_coef
    if ent is None:
        ent = 0.01 if discrete else 0.0
    return dataclasses.replace(
        config,
        steps_per_update=steps,
        ent_coef=float(ent),
        labels=resolve_labels("ppo", env, config.labels),
    )


def _check_encoder(env: Any, config: PPOConfig) -> None:
    """``obs_encoder`` is one of :data:`ENCODERS`; ``"cells"`` needs the GRU
    core and ``[h, w, 2]`` id observations."""
    encoder = config.obs_encoder
    if encoder not in ENCODERS:
        raise ValueError(f"ppo: obs_encoder must be one of {ENCODERS}, got {encoder!r}")
    if encoder == "cells" and config.core != "gru":
        raise ValueError(
            f"ppo: obs_encoder='cells' needs core='gru', got core={config.core!r}"
        )
    if encoder == "cells":
        problem = cells_problem(env.observation_space(env.default_params))
        if problem:
            raise ValueError(f"ppo: obs_encoder='cells' cannot be used: {problem}")


def generate_ppo(
    env: Any,
    params: Any,
    key: jax.Array,
    num_episodes: int,
    task_id: jax.Array | None = None,
    **settings: Any,
) -> History:
    """PPO learning histories on a batch of tasks.

    Args:
      env: an agentrl (or gymnax) environment with a static ``horizon``.
      params: env params with leaves ``[task, ...]``.
      key: PRNG key.
      num_episodes: the history holds exactly ``num_episodes * env.horizon``
        steps per task (more episodes if some terminate early).
      task_id: ``[task]`` ids to record (``-1`` when ``None``).
      **settings: :class:`PPOConfig` fields.

    Returns:
      :class:`History` with leaves ``[task, num_episodes * horizon, ...]``;
      ``action`` is what the env received.
    """
    config = make_config(env, num_episodes, **settings)
    task_id = task_ids(params, task_id)
    keys = jax.random.split(key, task_id.shape[0])
    return _run_tasks(env, config, num_episodes * env.horizon, params, keys, task_id)


@partial(jax.jit, static_argnums=(0, 1, 2))
def _run_tasks(env, config: PPOConfig, num_steps: int, params, keys, task_id):
    one = lambda p, k, t: _run_one(env, config, num_steps, p, k, t)  # noqa: E731
    return jax.vmap(one)(params, keys, task_id)


class Acting(NamedTuple):
    """The rollout scan's carry: the acting weights and the env."""

    weights: Any
    obs: Any
    env_state: Any


class RunCarry(NamedTuple):
    """The update scan's carry: the learner and the env."""

    learner: Learner
    obs: Any
    env_state: Any


def _run_one(env, config: PPOConfig, num_steps: int, params, key, task_id):
    """One task's PPO run: history leaves ``[num_steps, ...]``."""
    run = (GRUTaskRun if config.core == "gru" else TaskRun)(env, config, params)
    k_net, k_env, k_loop = jax.random.split(key, 3)
    weights = run.init_weights(k_net)
    obs, env_state = env.reset(k_env, params)
    carry = run.start(Learner(weights, run.tx.init(weights)), obs, env_state)
    num_updates = num_steps // config.steps_per_update
    carry, record = key_scan(run.update, carry, jax.random.split(k_loop, num_updates))
    record = jax.tree.map(lambda a: a.reshape(num_steps, *a.shape[2:]), record)
    if config.labels == "final_policy":
        record["optimal_action"] = run.greedy_actions(carry.learner.params, record)
    done = jnp.logical_or(record["terminated"], record["truncated"])
    return History(
        obs=record["obs"],
        action=record["action"],
        reward=record["reward"],
        terminated=record["terminated"],
        truncated=record["truncated"],
        episode=episode_index(done),
        optimal_action=record["optimal_action"],
        task_id=jnp.asarray(task_id, jnp.int32),
        params=params,
    )


class TaskRun:
    """The pieces of one task's run (``params``: that task's env params), the
    ``"mlp"`` core's (:class:`~agentrl.sources.ppo_gru.GRUTaskRun` the
    ``"gru"`` one's)."""

    def __init__(self, env, config: PPOConfig, params):
        self.env, self.config, self.params = env, config, params
        self.policy = Policy(env.observation_space(params), env.action_space(params))
        self.record_optimal = config.labels == "oracle"
        self.tx = optimizer(config.lr, config.max_grad_norm)

    def init_weights(self, key: jax.Array) -> dict:
        c = self.config
        return self.policy.init(key, c.hidden, c.init_log_std)

    def start(self, learner: Learner, obs, env_state) -> RunCarry:
        """The carry at the stream's start."""
        return RunCarry(learner, obs, env_state)

    def greedy_actions(self, weights, record: dict) -> jax.Array:
        """``[steps, ...]`` the deterministic policy of ``weights`` at every
        recorded observation (``"final_policy"`` labels)."""
        x = jax.vmap(self.policy.features)(record["obs"])
        return self.policy.greedy_action(weights, x)

    def env_step(self, carry: Acting, k):
        """One step: ``(carry, (record, learn))``, what the history records
        and what the update learns from."""
        policy, params = self.policy, self.params
        k_act, k_step = jax.random.split(k)
        x = policy.features(carry.obs)
        raw, logp, value = policy.sample(carry.weights, x, k_act)
        action = policy.to_env(raw)
        next_obs, env_state, record, info = recorded_step(
            self.env,
            params,
            carry.env_state,
            carry.obs,
            action,
            k_step,
            self.record_optimal,
        )
        learn = {
            "x": x,
            "raw": raw,
            "logp": logp,
            "value": value,
            "next_x": policy.features(info["final_observation"]),
        }
        return Acting(carry.weights, next_obs, env_state), (record, learn)

    def loss(self, weights, batch):
        logp, entropy, value = self.policy.evaluate(weights, batch["x"], batch["raw"])
        c = self.config
        return batch_loss(
            logp, entropy, value, batch, c.clip_eps, c.vf_coef, c.ent_coef
        )

    def minibatch_indices(self, key):
        """``[epochs * minibatches, minibatch]`` shuffled indices per epoch."""
        c = self.config
        keys = jax.random.split(key, c.num_epochs)
        perms = jnp.argsort(
            jax.vmap(lambda k: jax.random.uniform(k, (c.steps_per_update,)))(keys)
        )
        return perms.reshape(c.num_epochs * c.num_minibatches, -1)

    def batch(self, weights, record, learn) -> dict:
        """The rollout's training batch, with GAE advantages and targets."""
        next_value = self.policy.value(weights, learn["next_x"])
        c = self.config
        adv, target = episode_advantages(
            learn["value"], next_value, record, c.gamma, c.gae_lambda
        )
        return {
            "x": learn["x"],
            "raw": learn["raw"],
            "logp": learn["logp"],
            "adv": adv,
            "target": target,
        }

    def update(self, carry: RunCarry, k):
        """One rollout of ``steps_per_update`` steps and its PPO update."""
        k_roll, k_train = jax.random.split(k)
        weights = carry.learner.params
        acting, (record, learn) = key_scan(
            self.env_step,
            Acting(weights, carry.obs, carry.env_state),
            jax.random.split(k_roll, self.config.steps_per_update),
        )
        batch = self.batch(weights, record, learn)
        learner, _ = sgd_epochs(
            self.tx,
            self.loss,
            carry.learner,
            self.minibatch_indices(k_train),
            lambda index: (jax.tree.map(lambda a: a[index], batch),),
        )
        return RunCarry(learner, acting.obs, acting.env_state), record
