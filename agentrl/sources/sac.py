"""SAC as a source of learning histories: every task at once, in one jit.

What the continuous-control references collect their data with (Meta-DT's
``data_collection/sac.py``, T2MIR's DPT configs; docs/references.md,
"Continuous-action data"): each task gets its own freshly initialised Soft
Actor-Critic, which learns online in one stream of ``num_episodes *
env.horizon`` steps (the env auto-resets between episodes), with its own
replay buffer on the device. Every task's run is the same ``lax.scan`` over
steps, vmapped over tasks (weights, optimizer states and buffers
``[task, ...]``): one compiled program for the whole batch.

Each step: act (uniformly random in the box for the first ``start_steps``
steps, then a sample of the tanh-squashed Gaussian policy), step the env,
write the transition into the buffer (a ring of ``buffer_size``; the next
state of a truncated step is ``info["final_observation"]``, and only
termination stops bootstrapping), then one update on a batch of
``batch_size`` transitions drawn uniformly from the buffer once it holds
that many (as the references: the twin-Q critic on the soft Bellman target
of the target critics, then the policy against the updated critic, fixed
temperature ``alpha``, Polyak target update ``tau`` every step).

The recorded history is the learning run: ``obs``, the env's ``action``,
``reward`` and the episode flags, with DPT's labels (``optimal_action``)
by ``labels`` as the PPO source's: ``"oracle"`` (the env's), ``"final_policy"``
(the run's final policy acting deterministically, the squashed mean, at each
recorded state), ``"none"``, or ``"auto"`` (the oracle where there is one).

Settings (:class:`SACConfig`) are Meta-DT's / T2MIR's SAC (hidden 128, Adam
lr 3e-4, gamma 0.99, tau 0.005, alpha 0.2, batch 256); ``start_steps``
defaults to ``min(2000, steps // 20)`` (their 2,000 of a MuJoCo run, 100 of
Point-Robot's 2,000) and ``buffer_size`` to ``min(steps, 10_000)`` (their
HalfCheetah-Vel buffer). Deviations: orthogonal initialisation (theirs
Xavier-uniform), one run per task for ``num_episodes`` episodes (theirs a
fixed number of steps with checkpoints), and one update per env step from
the first full batch on (theirs once the buffer holds more than a batch).
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

import agentrl.envs.spaces as spaces
from agentrl.history import History, episode_index, task_ids
from agentrl.prng import key_scan
from agentrl.rl.nets import ActionHead, dense, example, obs_features
from agentrl.sources.recording import recorded_step
from agentrl.sources.settings import check_ints, config_from, resolve_labels

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0  # the references' clamp


@dataclasses.dataclass(frozen=True)
class SACConfig:
    """SAC settings (all static); ``None`` fields take a per-run default."""

    hidden: int = 128
    lr: float = 3e-4
    gamma: float = 0.99
    tau: float = 0.005
    alpha: float = 0.2
    batch_size: int = 256
    start_steps: int | None = None
    buffer_size: int | None = None
    labels: str = "auto"


def make_config(env: Any, num_episodes: int, **settings: Any) -> SACConfig:
    """Validate ``settings`` (SACConfig fields) and fill the per-run defaults."""
    if spaces.is_discrete(env.action_space(None)):
        raise ValueError("sac: needs a continuous (Box) action space")
    config = config_from("sac", SACConfig, env, num_episodes, settings)
    horizon = env.horizon
    steps = num_episodes * horizon
    start = config.start_steps
    start = min(2000, steps // 20) if start is None else start
    size = min(steps, 10_000) if config.buffer_size is None else config.buffer_size
    check_ints(
        "sac", hidden=config.hidden, batch_size=config.batch_size, buffer_size=size
    )
    check_ints("sac", start_steps=start, minimum=0)
    for name in ("gamma", "tau"):
        value = getattr(config, name)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"sac: {name} must be in [0, 1], got {value}")
    if not config.lr > 0 or not config.alpha >= 0:
        raise ValueError(
            f"sac: lr must be > 0 and alpha >= 0, got {config.lr}, {config.alpha}"
        )
    labels = resolve_labels("sac", env, config.labels)
    return dataclasses.replace(
        config, start_steps=start, buffer_size=size, labels=labels
    )


def generate_sac(
    env: Any,
    params: Any,
    key: jax.Array,
    num_episodes: int,
    task_id: jax.Array | None = None,
    **settings: Any,
) -> History:
    """SAC learning histories on a batch of tasks ``params [task, ...]``.

    Returns a :class:`History` with leaves ``[task, num_episodes * horizon,
    ...]``; ``action`` is what the env received. ``settings``:
    :class:`SACConfig` fields.
    """
    config = make_config(env, num_episodes, **settings)
    task_id = task_ids(params, task_id)
    keys = jax.random.split(key, task_id.shape[0])
    return _run_tasks(env, config, num_episodes * env.horizon, params, keys, task_id)


@partial(jax.jit, static_argnums=(0, 1, 2))
def _run_tasks(env, config: SACConfig, num_steps: int, params, keys, task_id):
    one = lambda p, k, t: TaskRun(env, config, p).run(num_steps, k, t)  # noqa: E731
    return jax.vmap(one)(params, keys, task_id)


# ------------------------------------------------------------------ networks
def _relu_mlp(layers: list[dict], x: jax.Array) -> jax.Array:
    for layer in layers[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    return x @ layers[-1]["w"] + layers[-1]["b"]


def _init_mlp(key: jax.Array, sizes: list[int]) -> list[dict]:
    keys = jax.random.split(key, len(sizes) - 1)
    return [
        dense(k, n_in, n_out, 1.0)
        for k, n_in, n_out in zip(keys, sizes[:-1], sizes[1:], strict=True)
    ]


class SACNets:
    """Tanh-squashed Gaussian actor and twin Q critics (ReLU MLPs, 2 layers).

    Actions ``a`` live in ``[-1, 1]^A`` (the squashed sample); ``to_env``
    rescales them to the box.
    """

    def __init__(self, obs_space: Any, action_space: Any, hidden: int):
        self.obs_space, self.hidden = obs_space, hidden
        self.head = ActionHead(action_space)
        self.act_dim = self.head.out
        self.dim = self.features(example(obs_space)).shape[0]

    def features(self, obs: Any) -> jax.Array:
        return obs_features(self.obs_space, obs)

    def init(self, key: jax.Array) -> dict:
        ka, k1, k2 = jax.random.split(key, 3)
        h, a = self.hidden, self.act_dim
        q_sizes = [self.dim + a, h, h, 1]
        return {
            "actor": _init_mlp(ka, [self.dim, h, h, 2 * a]),
            "critic": (_init_mlp(k1, q_sizes), _init_mlp(k2, q_sizes)),
        }

    def sample(self, actor, x: jax.Array, key: jax.Array):
        """``(a [..., A], log pi(a) [...])`` of the squashed Gaussian at ``x``."""
        mean, log_std = jnp.split(_relu_mlp(actor, x), 2, -1)
        log_std = jnp.clip(log_std, LOG_STD_MIN, LOG_STD_MAX)
        u = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)
        a = jnp.tanh(u)
        z = (u - mean) * jnp.exp(-log_std)
        logp = -0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi)
        logp = logp - jnp.log(1.0 - a**2 + 1e-6)  # the tanh's Jacobian
        return a, logp.sum(-1)

    def greedy(self, actor, x: jax.Array) -> jax.Array:
        """The env's action of the deterministic policy (the squashed mean)."""
        mean, _ = jnp.split(_relu_mlp(actor, x), 2, -1)
        return self.to_env(jnp.tanh(mean))

    def q(self, critic, x: jax.Array, a: jax.Array) -> jax.Array:
        """``[2, ...]`` the twin critics' values of ``(x, a)``."""
        xa = jnp.concatenate([x, a], -1)
        return jnp.stack([_relu_mlp(c, xa)[..., 0] for c in critic])

    def to_env(self, a: jax.Array) -> jax.Array:
        shape = self.head.shape
        env_a = self.head.center.reshape(-1) + self.head.half.reshape(-1) * a
        return env_a.reshape(*a.shape[:-1], *shape)


# ------------------------------------------------------------------- the run
class Learner(NamedTuple):
    """One task's SAC learner: weights, target critics, optimizer states."""

    actor: Any
    critic: Any
    target: Any
    actor_opt: Any
    critic_opt: Any


class RunState(NamedTuple):
    """The step scan's carry: the learner, the replay buffer and the env."""

    learner: Learner
    buffer: dict  # x, a, reward, next_x, done: [buffer_size, ...]
    size: jax.Array  # [] transitions held
    obs: Any
    env_state: Any


class TaskRun:
    """One task's SAC run (``params``: that task's env params)."""

    def __init__(self, env: Any, config: SACConfig, params: Any):
        self.env, self.config, self.params = env, config, params
        space = env.action_space(params)
        self.nets = SACNets(env.observation_space(params), space, config.hidden)
        self.tx = optax.adam(config.lr)

    def init(self, key: jax.Array) -> RunState:
        k_net, k_env = jax.random.split(key)
        w = self.nets.init(k_net)
        copy = jax.tree.map(jnp.copy, w["critic"])
        learner = Learner(
            w["actor"],
            w["critic"],
            copy,
            self.tx.init(w["actor"]),
            self.tx.init(w["critic"]),
        )
        size, dim, act = self.config.buffer_size, self.nets.dim, self.nets.act_dim
        buffer = {
            "x": jnp.zeros((size, dim)),
            "a": jnp.zeros((size, act)),
            "reward": jnp.zeros((size,)),
            "next_x": jnp.zeros((size, dim)),
            "done": jnp.zeros((size,)),
        }
        obs, env_state = self.env.reset(k_env, self.params)
        return RunState(learner, buffer, jnp.int32(0), obs, env_state)

    def run(self, num_steps: int, key: jax.Array, task_id: jax.Array) -> History:
        k_init, k_loop = jax.random.split(key)
        steps = (jnp.arange(num_steps), jax.random.split(k_loop, num_steps))
        state, record = key_scan(self.step, self.init(k_init), steps)
        labels = record.pop("optimal_action")
        if self.config.labels == "final_policy":
            x = jax.vmap(self.nets.features)(record["obs"])
            labels = self.nets.greedy(state.learner.actor, x)
        done = jnp.logical_or(record["terminated"], record["truncated"])
        return History(
            **record,
            episode=episode_index(done),
            optimal_action=labels,
            task_id=task_id,
            params=self.params,
        )

    def step(self, state: RunState, xs):
        """One env step, its transition into the buffer, one update."""
        t, key = xs
        k_act, k_rand, k_env, k_update = jax.random.split(key, 4)
        x = self.nets.features(state.obs)
        a, _ = self.nets.sample(state.learner.actor, x, k_act)
        random_a = jax.random.uniform(k_rand, a.shape, minval=-1.0, maxval=1.0)
        a = jnp.where(t < self.config.start_steps, random_a, a)
        action = self.nets.to_env(a)
        obs, env_state, record, info = recorded_step(
            self.env,
            self.params,
            state.env_state,
            state.obs,
            action,
            k_env,
            self.config.labels == "oracle",
        )
        buffer = self._write(
            state.buffer, t, x, a, record["reward"], info, record["terminated"]
        )
        size = jnp.minimum(state.size + 1, self.config.buffer_size)
        learner = self._update(state.learner, buffer, size, k_update)
        return RunState(learner, buffer, size, obs, env_state), record

    def _write(self, buffer, t, x, a, reward, info, term) -> dict:
        """The buffer with step ``t``'s transition at slot ``t % buffer_size``."""
        slot = t % self.config.buffer_size
        row = {
            "x": x,
            "a": a,
            "reward": reward,
            "next_x": self.nets.features(info["final_observation"]),
            "done": jnp.asarray(term, jnp.float32),
        }
        return {k: buffer[k].at[slot].set(row[k]) for k in buffer}

    def _update(self, learner: Learner, buffer, size, key) -> Learner:
        """One SAC update once the buffer holds a batch (else unchanged)."""
        c, nets = self.config, self.nets
        k_idx, k_next, k_pi = jax.random.split(key, 3)
        idx = jax.random.randint(k_idx, (c.batch_size,), 0, jnp.maximum(size, 1))
        b = {k: v[idx] for k, v in buffer.items()}
        a_next, logp_next = nets.sample(learner.actor, b["next_x"], k_next)
        soft_next = nets.q(learner.target, b["next_x"], a_next).min(0)
        soft_next = soft_next - c.alpha * logp_next
        target = b["reward"] + c.gamma * (1.0 - b["done"]) * soft_next

        def critic_loss(critic):
            q = nets.q(critic, b["x"], b["a"])
            return jnp.mean((q - target) ** 2, axis=1).sum()

        critic, critic_opt = _adam_step(
            self.tx, critic_loss, learner.critic, learner.critic_opt
        )

        def actor_loss(actor):
            a, logp = nets.sample(actor, b["x"], k_pi)
            return jnp.mean(c.alpha * logp - nets.q(critic, b["x"], a).min(0))

        actor, actor_opt = _adam_step(
            self.tx, actor_loss, learner.actor, learner.actor_opt
        )
        target_critic = optax.incremental_update(critic, learner.target, c.tau)
        new = Learner(actor, critic, target_critic, actor_opt, critic_opt)
        ready = size >= c.batch_size
        return jax.tree.map(lambda n, o: jnp.where(ready, n, o), new, learner)


def _adam_step(tx, loss_fn, params, opt_state):
    grads = jax.grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state
