"""PPO as a source of learning histories (PureJaxRL style, one jit).

Each task gets its own freshly initialised actor-critic which learns online,
in a single stream of ``num_episodes * env.horizon`` environment steps (the
environment auto-resets between episodes). Every ``steps_per_update`` steps
the agent does a PPO update (clipped surrogate, GAE, value loss, entropy
bonus; ``num_epochs`` passes over ``num_minibatches`` shuffled minibatches).
The recorded history is therefore an RL *learning* history whose returns
rise over its episodes: the data Algorithm Distillation is trained on.

- Policies: categorical over ``Discrete`` actions, diagonal Gaussian over
  ``Box`` actions. The Gaussian lives in units of half the box width; the
  env receives (and the history records) the sample clipped to the box and
  rescaled, the log-probability is that of the unclipped sample.
- Inputs: ``Discrete`` observations are one-hot encoded, ``Box`` ones
  flattened, ``Dict`` ones (e.g. :class:`~agentrl.envs.MultiEpisodeTrial`)
  concatenated, so a trial-wrapped env also works (the MLP then also sees
  ``prev_action``, ``prev_reward`` and ``episode``).
- Truncated episodes bootstrap from the value of ``final_observation``;
  terminated ones do not.

The whole run, all tasks at once, is one ``jax.jit(jax.vmap(...))`` with the
network weights ``[task, ...]``.
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import optax

from agentrl.envs import spaces
from agentrl.history import History, episode_index


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """PPO settings (all static). ``None`` fields take a per-env default.

    ``steps_per_update`` defaults to ``4 * env.horizon`` (or the largest
    divisor of ``num_episodes`` not above 4, times the horizon);
    ``ent_coef`` defaults to 0.01 for discrete and 0.0 for continuous actions.
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


def make_config(env: Any, num_episodes: int, **settings: Any) -> PPOConfig:
    """Validate ``settings`` (PPOConfig fields) and fill the per-env defaults."""
    fields = {f.name: f.default for f in dataclasses.fields(PPOConfig)}
    unknown = sorted(set(settings) - set(fields))
    if unknown:
        allowed = ", ".join(f"{k}={v!r}" for k, v in fields.items())
        raise ValueError(f"ppo: unknown setting(s) {unknown}; valid: {allowed}")
    horizon = getattr(env, "horizon", None)
    if not isinstance(horizon, int) or horizon < 1:
        raise ValueError(f"ppo: env.horizon must be an int >= 1, got {horizon!r}")
    if isinstance(num_episodes, bool) or not isinstance(num_episodes, int):
        raise ValueError(f"ppo: num_episodes must be an int >= 1, got {num_episodes}")
    if num_episodes < 1:
        raise ValueError(f"ppo: num_episodes must be an int >= 1, got {num_episodes}")
    config = PPOConfig(**settings)
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
    for name in ("num_epochs", "num_minibatches", "hidden"):
        value = getattr(config, name)
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"ppo: {name} must be an int >= 1, got {value!r}")
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
    return dataclasses.replace(config, steps_per_update=steps, ent_coef=float(ent))


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
    num_tasks = jax.tree.leaves(params)[0].shape[0]
    if task_id is None:
        task_id = jnp.full((num_tasks,), -1, jnp.int32)
    return _run_tasks(
        env,
        config,
        num_episodes * env.horizon,
        params,
        jax.random.split(key, num_tasks),
        jnp.asarray(task_id, jnp.int32),
    )


@partial(jax.jit, static_argnums=(0, 1, 2))
def _run_tasks(env, config: PPOConfig, num_steps: int, params, keys, task_id):
    one = lambda p, k, t: _run_one(env, config, num_steps, p, k, t)  # noqa: E731
    return jax.vmap(one)(params, keys, task_id)


def _run_one(env, config: PPOConfig, num_steps: int, params, key, task_id):
    """One task's PPO run: history leaves ``[num_steps, ...]``."""
    action_space = env.action_space(params)
    policy = Policy(env.observation_space(params), action_space)
    record_optimal = bool(getattr(env, "has_oracle", False))
    tx = optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm), optax.adam(config.lr)
    )
    k_net, k_env, k_loop = jax.random.split(key, 3)
    weights = policy.init(k_net, config.hidden, config.init_log_std)
    opt_state = tx.init(weights)
    obs, env_state = env.reset(k_env, params)
    rollout_len = config.steps_per_update

    def env_step(carry, k):
        weights, obs, env_state = carry
        k_act, k_step = jax.random.split(k)
        x = policy.features(obs)
        raw, logp, value = policy.sample(weights, x, k_act)
        action = policy.to_env(raw)
        optimal = env.optimal_action(env_state, params) if record_optimal else None
        next_obs, env_state, reward, term, trunc, info = env.step(
            k_step, env_state, action, params
        )
        record = {
            "obs": obs,
            "action": action,
            "reward": jnp.asarray(reward, jnp.float32),
            "terminated": term,
            "truncated": trunc,
            "optimal_action": optimal,
        }
        learn = {
            "x": x,
            "raw": raw,
            "logp": logp,
            "value": value,
            "next_x": policy.features(info["final_observation"]),
        }
        return (weights, next_obs, env_state), (record, learn)

    def loss_fn(weights, batch):
        logp, entropy, value = policy.evaluate(weights, batch["x"], batch["raw"])
        ratio = jnp.exp(logp - batch["logp"])
        adv = batch["adv"]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        clipped = jnp.clip(ratio, 1 - config.clip_eps, 1 + config.clip_eps)
        pg = -jnp.minimum(ratio * adv, clipped * adv).mean()
        vf = 0.5 * jnp.square(value - batch["target"]).mean()
        return pg + config.vf_coef * vf - config.ent_coef * entropy.mean()

    def sgd_step(carry, index):
        weights, opt_state, batch = carry
        minibatch = jax.tree.map(lambda a: a[index], batch)
        grads = jax.grad(loss_fn)(weights, minibatch)
        updates, opt_state = tx.update(grads, opt_state, weights)
        return (optax.apply_updates(weights, updates), opt_state, batch), None

    def minibatch_indices(key):
        """``[epochs * minibatches, minibatch]`` shuffled indices per epoch."""
        keys = jax.random.split(key, config.num_epochs)
        perms = jnp.argsort(
            jax.vmap(lambda k: jax.random.uniform(k, (rollout_len,)))(keys)
        )
        return perms.reshape(config.num_epochs * config.num_minibatches, -1)

    def update(carry, k):
        weights, opt_state, obs, env_state = carry
        k_roll, k_train = jax.random.split(k)
        (_, obs, env_state), (record, learn) = jax.lax.scan(
            env_step, (weights, obs, env_state), jax.random.split(k_roll, rollout_len)
        )
        next_value = policy.value(weights, learn["next_x"])
        adv = _gae(
            learn["value"],
            next_value,
            record["reward"],
            record["terminated"],
            jnp.logical_or(record["terminated"], record["truncated"]),
            config.gamma,
            config.gae_lambda,
        )
        batch = {
            "x": learn["x"],
            "raw": learn["raw"],
            "logp": learn["logp"],
            "adv": adv,
            "target": adv + learn["value"],
        }
        (weights, opt_state, _), _ = jax.lax.scan(
            sgd_step, (weights, opt_state, batch), minibatch_indices(k_train)
        )
        return (weights, opt_state, obs, env_state), record

    num_updates = num_steps // rollout_len
    _, record = jax.lax.scan(
        update,
        (weights, opt_state, obs, env_state),
        jax.random.split(k_loop, num_updates),
    )
    record = jax.tree.map(lambda a: a.reshape(num_steps, *a.shape[2:]), record)
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


def _gae(value, next_value, reward, terminated, done, gamma, lam):
    """``[time]`` GAE advantages; ``next_value`` is V(true successor)."""
    not_term = 1.0 - terminated.astype(jnp.float32)
    not_done = 1.0 - done.astype(jnp.float32)
    delta = reward + gamma * not_term * next_value - value

    def back(acc, xs):
        d, nd = xs
        acc = d + gamma * lam * nd * acc
        return acc, acc

    _, adv = jax.lax.scan(back, jnp.float32(0.0), (delta, not_done), reverse=True)
    return adv


# ------------------------------------------------------------------ network
def dense(key: jax.Array, n_in: int, n_out: int, scale: float) -> dict:
    """A dense layer ``{"w": [n_in, n_out], "b": [n_out]}``, orthogonal init."""
    w = jax.nn.initializers.orthogonal(scale)(key, (n_in, n_out), jnp.float32)
    return {"w": w, "b": jnp.zeros(n_out, jnp.float32)}


def mlp(layers: list[dict], x: jax.Array) -> jax.Array:
    """``x [..., n_in]`` through :func:`dense` ``layers``, tanh between them."""
    for layer in layers[:-1]:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
    return x @ layers[-1]["w"] + layers[-1]["b"]


class ActionHead:
    """Categorical (``Discrete``) or diagonal Gaussian (``Box``) policy head.

    ``out`` is the actor's output width. Raw samples are what the learner
    scores (int32 indices, or unclipped Gaussian samples ``[*shape]``);
    :meth:`to_env` maps them to the env's action.
    """

    def __init__(self, action_space: Any):
        self.space = action_space
        self.discrete = spaces.is_discrete(action_space)
        if self.discrete:
            self.out = int(action_space.n)
            self.shape: tuple[int, ...] = ()
        else:
            self.shape = tuple(action_space.shape)
            self.out = max(1, math.prod(self.shape))
            low = jnp.broadcast_to(
                jnp.asarray(action_space.low, jnp.float32), self.shape
            )
            high = jnp.broadcast_to(
                jnp.asarray(action_space.high, jnp.float32), self.shape
            )
            self.center, self.half = (high + low) / 2, (high - low) / 2

    def action_features(self, action: jax.Array) -> jax.Array:
        """Flat features of an env action (one-hot, or scaled to [-1, 1])."""
        if self.discrete:
            return jax.nn.one_hot(
                jnp.asarray(action, jnp.int32), self.out, dtype=jnp.float32
            )
        a = (jnp.asarray(action, jnp.float32) - self.center) / self.half
        return a.reshape(-1)

    def _log_std(self, log_std):
        return jnp.clip(log_std, -5.0, 2.0)

    def logp_entropy(self, out, log_std, raw):
        """``(log pi(raw), entropy)``, each ``[...]`` for ``out [..., A]``."""
        if self.discrete:
            logits = jax.nn.log_softmax(out)
            logp = jnp.take_along_axis(logits, raw[..., None], -1)[..., 0]
            entropy = -jnp.sum(jnp.exp(logits) * logits, -1)
            return logp, entropy
        ls = self._log_std(log_std)
        flat = raw.reshape(*raw.shape[: raw.ndim - len(self.shape)], -1)
        z = (flat - out) / jnp.exp(ls)
        logp = jnp.sum(-0.5 * z**2 - ls - 0.5 * jnp.log(2 * jnp.pi), -1)
        entropy = jnp.sum(ls + 0.5 * (1.0 + jnp.log(2 * jnp.pi))) * jnp.ones_like(logp)
        return logp, entropy

    def sample(self, key, out, log_std, greedy=False, temperature=1.0):
        """A raw action ``[...]`` / ``[..., *shape]`` from ``out [..., A]``."""
        if self.discrete:
            if greedy:
                return jnp.argmax(out, -1).astype(jnp.int32)
            return jax.random.categorical(key, out / temperature).astype(jnp.int32)
        if greedy:
            return out.reshape(*out.shape[:-1], *self.shape)
        std = jnp.exp(self._log_std(log_std))
        raw = out + std * jax.random.normal(key, out.shape)
        return raw.reshape(*out.shape[:-1], *self.shape)

    def to_env(self, raw: jax.Array) -> jax.Array:
        if self.discrete:
            return raw
        return self.center + self.half * jnp.clip(raw, -1.0, 1.0)


class Policy:
    """Separate two-layer tanh MLPs for actor and critic (orthogonal init).

    ``features(obs) -> [dim]``; ``sample(w, x, key) -> (raw, logp, value)``;
    ``evaluate(w, x [batch, dim], raw [batch, ...]) -> (logp, entropy, value)``
    each ``[batch]``; ``to_env(raw)`` maps a raw sample to the env's action.
    """

    def __init__(self, obs_space: Any, action_space: Any):
        self.obs_space = obs_space
        self.head = ActionHead(action_space)
        self.discrete, self.out = self.head.discrete, self.head.out
        self.dim = self.features(example(obs_space)).shape[0]

    def features(self, obs: Any) -> jax.Array:
        return obs_features(self.obs_space, obs)

    def init(self, key: jax.Array, hidden: int, init_log_std: float) -> dict:
        ka, kc = jax.random.split(key)
        ka, kc = jax.random.split(ka, 3), jax.random.split(kc, 3)
        root2 = math.sqrt(2.0)
        weights = {
            "actor": [
                dense(ka[0], self.dim, hidden, root2),
                dense(ka[1], hidden, hidden, root2),
                dense(ka[2], hidden, self.out, 0.01),
            ],
            "critic": [
                dense(kc[0], self.dim, hidden, root2),
                dense(kc[1], hidden, hidden, root2),
                dense(kc[2], hidden, 1, 1.0),
            ],
        }
        if not self.discrete:
            weights["log_std"] = jnp.full(self.out, init_log_std, jnp.float32)
        return weights

    def value(self, weights: dict, x: jax.Array) -> jax.Array:
        return mlp(weights["critic"], x)[..., 0]

    def sample(self, weights: dict, x: jax.Array, key: jax.Array):
        out = mlp(weights["actor"], x)
        log_std = weights.get("log_std")
        raw = self.head.sample(key, out, log_std)
        logp, _ = self.head.logp_entropy(out, log_std, raw)
        return raw, logp, self.value(weights, x)

    def evaluate(self, weights: dict, x: jax.Array, raw: jax.Array):
        out = mlp(weights["actor"], x)
        logp, entropy = self.head.logp_entropy(out, weights.get("log_std"), raw)
        return logp, entropy, self.value(weights, x)

    def to_env(self, raw: jax.Array) -> jax.Array:
        return self.head.to_env(raw)


def obs_features(space: Any, obs: Any) -> jax.Array:
    """Flat float32 features of one observation (``Dict`` spaces concatenated)."""
    if hasattr(space, "spaces"):
        return jnp.concatenate(
            [obs_features(sub, obs[name]) for name, sub in space.spaces.items()]
        )
    if spaces.is_discrete(space):
        return jax.nn.one_hot(jnp.asarray(obs, jnp.int32), space.n, dtype=jnp.float32)
    return jnp.asarray(obs, jnp.float32).reshape(-1)


def example(space: Any) -> Any:
    """A zero observation of ``space``."""
    if hasattr(space, "spaces"):
        return {k: example(v) for k, v in space.spaces.items()}
    return jnp.zeros(space.shape, space.dtype)
