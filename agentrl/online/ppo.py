"""PPO over multi-episode trials with a recurrent core (RL²), in one jit.

``num_envs`` environments run in parallel, each inside a
:class:`~agentrl.envs.MultiEpisodeTrial` of ``trial_episodes`` episodes of
one task. When a trial ends the slot draws a new task (a training task:
the split's train ids for finite task spaces, ``sample_params`` otherwise),
starts a new trial and zeroes the core's hidden state; inside a trial the
hidden state is kept across episode boundaries. The core's input at each
step is :func:`~agentrl.rl.cores.step_features` (observation, previous
action, previous reward, new-episode flag).

Every ``rollout_steps`` steps the learner does a PPO update (clipped
surrogate, value loss, entropy bonus; ``num_epochs`` passes over
``num_minibatches`` minibatches of whole env streams, the core replayed
from the rollout's first hidden state with trial starts reset). The
advantage (GAE) runs *across* episode boundaries inside a trial: the trial
is the RL² episode, so an episode's end is not a terminal state (the return
of exploring now is paid in later episodes); only the end of a trial stops
bootstrapping. Hidden states carry over rollout boundaries (truncated
backpropagation through time at each rollout).

:class:`TrialPPO` exposes ``init(key, hp) -> state`` and
``update(state, hp) -> (state, metrics)`` (one rollout + update), and
``__call__(key, hp)``: the whole run as one ``lax.scan`` over updates, a
pure function vmappable over seeds and the traced hyperparameters ``hp``
(``lr``, ``weight_decay``, ``gamma``, ``gae_lambda``, ``clip_eps``,
``ent_coef``, ``vf_coef``, ``reward_scale``; float32 scalars).
``reward_scale`` multiplies the rewards the learner is trained on (not the
ones its inputs and metrics show): returns of long trials would otherwise
give a value loss whose gradient, through the shared core and the global
norm clip, leaves the policy almost no step.

Metrics per update: ``loss``, ``pg_loss``, ``vf_loss``, ``entropy``,
``approx_kl``, ``reward`` (mean per step), ``trial_return`` (mean over the
trials that ended in the rollout, NaN if none), ``episode_return_first`` /
``episode_return_last`` (the first and the last episode of those trials:
a learner that learns in context raises the second above the first).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agentrl.envs.trial import MultiEpisodeTrial
from agentrl.prng import key_scan
from agentrl.rl.cores import GRUCore, step_features
from agentrl.rl.nets import ActionHead, example
from agentrl.rl.ppo import (
    Learner,
    batch_loss,
    epoch_permutations,
    gae_across_episodes,
    mean_metrics,
    optimizer,
    sgd_epochs,
)

#: the traced hyperparameters ``hp`` of the trainers, at the settings of
#: XLand-MiniGrid's RL² baseline (no weight decay, rewards unscaled). A named
#: difference: PureJaxRL's PPO, which that baseline follows, also clips the
#: value loss around the old value (``clip_eps``); these trainers' value
#: loss is unclipped (not compared; transformer PPO's ``algo.clip_values``
#: is habitat-baselines' other form, ReLIC's).
DEFAULT_HPARAMS = {
    "lr": 1e-3,
    "weight_decay": 0.0,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_eps": 0.2,
    "ent_coef": 0.01,
    "vf_coef": 0.5,
    "reward_scale": 1.0,
}
HPARAMS = tuple(DEFAULT_HPARAMS)


def trial_hparams(**changes: float) -> dict[str, jax.Array]:
    """``hp`` for a trainer run outside an experiment (benchmarks, tests).

    :data:`DEFAULT_HPARAMS` with ``changes``, as float32 scalars (an
    experiment's come from its config: :mod:`agentrl.online.program`).
    """
    unknown = sorted(set(changes) - set(HPARAMS))
    if unknown:
        raise ValueError(f"unknown PPO hparams {unknown}; known: {list(HPARAMS)}")
    return {k: jnp.float32(v) for k, v in {**DEFAULT_HPARAMS, **changes}.items()}


@dataclasses.dataclass(frozen=True)
class PPOShape:
    """The static settings of a run (shapes and loop lengths).

    ``lr_shape(update) -> multiplier`` is the learning-rate schedule.
    """

    num_envs: int
    trial_episodes: int
    rollout_steps: int
    num_epochs: int
    num_minibatches: int
    num_updates: int
    hidden: int
    embed: int
    grad_clip: float | None
    init_log_std: float = -0.5
    lr_shape: Callable[[Any], Any] | None = None
    adam_b2: float = 0.999  # Adam's second-moment decay (train.adam_b2)
    grid_size: int | None = None  # encode discrete obs as grid cells


class Streams(NamedTuple):
    """The envs' part of the run, which the rollout scan carries (``[N, ...]``)."""

    env_state: Any
    obs: Any
    task: Any
    hidden: jax.Array
    first: jax.Array  # [N] the current step starts an episode
    trial_start: jax.Array  # [N] the current step starts a trial (reset hidden)
    episode_return: jax.Array  # [N] running return of the current episode
    first_return: jax.Array  # [N] return of the trial's first episode
    trial_return: jax.Array  # [N] running return of the trial


class RunnerState(NamedTuple):
    """Everything a run carries between updates (leaves ``[num_envs, ...]``).

    The fields from ``env_state`` to ``trial_return`` are :class:`Streams`'.
    """

    weights: Any
    opt_state: Any
    env_state: Any
    obs: Any
    task: Any
    hidden: jax.Array
    first: jax.Array
    trial_start: jax.Array
    episode_return: jax.Array
    first_return: jax.Array
    trial_return: jax.Array
    key: jax.Array
    update: jax.Array  # [] updates done

    def streams(self) -> Streams:
        return Streams(*(getattr(self, name) for name in Streams._fields))


def hparam(hp: dict, name: str) -> jax.Array:
    """The traced hyperparameter ``name`` of ``hp`` as a float32 scalar."""
    return jnp.asarray(hp[name], jnp.float32)


def trial_optimizer(shape: Any, hp: dict, update: jax.Array, grad_scale: int = 1):
    """The online trainers' chain: :func:`agentrl.rl.ppo.optimizer` with
    Adam's ``eps=1e-5`` and ``b2=shape.adam_b2``, ``hp``'s weight decay and
    learning rate, the rate scaled by ``shape.lr_shape(update)``, the
    gradient by ``grad_scale``."""
    lr = hparam(hp, "lr")
    if shape.lr_shape is not None:
        lr = lr * shape.lr_shape(update)
    return optimizer(
        lr,
        shape.grad_clip,
        eps=1e-5,
        weight_decay=hparam(hp, "weight_decay"),
        b2=shape.adam_b2,
        grad_scale=grad_scale,
    )


class TrialPPO:
    """RL²: PPO over trials with a GRU core (see the module docstring).

    Args:
      env: the (inner) environment; it is wrapped in a trial here.
      shape: static settings.
      sample_task: ``key -> params`` of one training task (jittable).
    """

    def __init__(self, env: Any, shape: PPOShape, sample_task: Callable):
        self.env = env
        self.trial = MultiEpisodeTrial(env, shape.trial_episodes)
        self.shape = shape
        self.sample_task = sample_task
        params = env.default_params
        self.obs_space = env.observation_space(params)
        self.head = ActionHead(env.action_space(params))
        dim = self.features(
            {
                "obs": example(self.obs_space),
                "prev_action": jnp.zeros(self.head.space.shape, self.head.space.dtype),
                "prev_reward": jnp.float32(0.0),
            },
            jnp.bool_(True),
        ).shape[0]
        self.core = GRUCore(
            dim, self.head.out, shape.hidden, shape.embed, self.head.discrete
        )

    # ---------------------------------------------------------------- pieces
    def features(self, trial_obs: dict, first: jax.Array) -> jax.Array:
        """``[dim]`` core input from a trial observation and the episode flag."""
        return step_features(
            self.obs_space,
            self.head,
            trial_obs["obs"],
            trial_obs["prev_action"],
            trial_obs["prev_reward"],
            first,
            self.shape.grid_size,
        )

    def _new_trial(self, key):
        k_task, k_reset = jax.random.split(key)
        return self._new_trial_from(k_task, k_reset)

    def _new_trial_from(self, k_task, k_reset):
        task = self.sample_task(k_task)
        obs, state = self.trial.reset(k_reset, task)
        return obs, state, task

    def rollout_keys(self, key: jax.Array) -> dict:
        """Every key a rollout's steps use, drawn before the loop.

        Step ``t`` of the rollout gets the ``t``-th of ``split(key, T)`` and
        splits it into (act, env step, new trial); the env-step and
        new-trial keys split once more per env (and a new trial's into task
        and reset). Drawn in the loop, each of these splits is one of
        XLA:CPU's rolled threefry loops per step; drawn here they are one
        per rollout, with the same values. Returns ``{"act": [T], "step":
        [T, N], "task": [T, N], "reset": [T, N]}``.
        """
        n = self.shape.num_envs
        per_step = jax.vmap(lambda k: jax.random.split(k, 3))(
            jax.random.split(key, self.shape.rollout_steps)
        )
        per_env = jax.vmap(lambda k: jax.random.split(k, n))
        new = jax.vmap(jax.vmap(jax.random.split))(per_env(per_step[:, 2]))
        return {
            "act": per_step[:, 0],
            "step": per_env(per_step[:, 1]),
            "task": new[:, :, 0],
            "reset": new[:, :, 1],
        }

    def init(self, key: jax.Array, hp: dict) -> RunnerState:
        del hp  # the initial state does not depend on the hyperparameters
        s = self.shape
        k_net, k_env, key = jax.random.split(key, 3)
        weights = self.core.init(k_net, s.init_log_std)
        tx = trial_optimizer(s, {"lr": 1.0, "weight_decay": 0.0}, 0)
        opt_state = tx.init(weights)
        obs, env_state, task = jax.vmap(self._new_trial)(
            jax.random.split(k_env, s.num_envs)
        )
        n = s.num_envs
        zeros = jnp.zeros((n,), jnp.float32)
        return RunnerState(
            weights=weights,
            opt_state=opt_state,
            env_state=env_state,
            obs=obs,
            task=task,
            hidden=self.core.init_hidden((n,)),
            first=jnp.ones((n,), bool),
            trial_start=jnp.ones((n,), bool),
            episode_return=zeros,
            first_return=zeros,
            trial_return=zeros,
            key=key,
            update=jnp.zeros((), jnp.int32),
        )

    def _act(self, weights, carry: Streams, keys):
        """The core's step on ``carry``: ``(x, hidden, raw, logp, value, action)``."""
        x = jax.vmap(self.features)(carry.obs, carry.first)
        h_in = jnp.where(carry.trial_start[:, None], 0.0, carry.hidden)
        hidden, out, value = self.core.step(weights, h_in, x)
        raw = self.head.sample(keys["act"], out, weights.get("log_std"))
        logp, _ = self.head.logp_entropy(out, weights.get("log_std"), raw)
        return x, hidden, raw, logp, value, self.head.to_env(raw)

    def _env_step(self, weights, carry: Streams, keys):
        """One step of every env: act, step, start new trials where one ended.

        ``keys``: this step's slice of :meth:`rollout_keys`.
        """
        x, hidden, raw, logp, value, action = self._act(weights, carry, keys)
        next_obs, env_state, reward, _, trial_end, info = jax.vmap(self.trial.step)(
            keys["step"], carry.env_state, action, carry.task
        )
        reward = jnp.asarray(reward, jnp.float32)
        ep_end = jnp.logical_or(info["episode_terminated"], info["episode_truncated"])
        # A finished trial: a new task, a new trial, a zeroed hidden state.
        new_obs, new_state, new_task = jax.vmap(self._new_trial_from)(
            keys["task"], keys["reset"]
        )

        def pick(new, old):
            mask = trial_end.reshape(trial_end.shape + (1,) * (old.ndim - 1))
            return jnp.where(mask, new, old)

        next_obs = jax.tree.map(pick, new_obs, next_obs)
        env_state = jax.tree.map(pick, new_state, env_state)
        task = jax.tree.map(pick, new_task, carry.task)
        ep_ret = carry.episode_return + reward
        tr_ret = carry.trial_return + reward
        # The trial's first episode ends where the trial's episode index was 0.
        ended_first = jnp.logical_and(ep_end, carry.obs["episode"] == 0)
        first_ret = jnp.where(ended_first, ep_ret, carry.first_return)
        record = {
            "x": x,
            "raw": raw,
            "logp": logp,
            "value": value,
            "reward": reward,
            "trial_end": trial_end,
            "reset": carry.trial_start,
            "trial_return": tr_ret,
            "first_return": first_ret,
            "last_return": ep_ret,
        }
        carry = Streams(
            env_state=env_state,
            obs=next_obs,
            task=task,
            hidden=hidden,
            first=ep_end,
            trial_start=trial_end,
            episode_return=jnp.where(ep_end, 0.0, ep_ret),
            first_return=first_ret,
            trial_return=jnp.where(trial_end, 0.0, tr_ret),
        )
        return carry, record

    def _loss(self, weights, batch, h0, hp):
        out, value = self.core.unroll(weights, h0, batch["x"], batch["reset"])
        logp, entropy = self.head.logp_entropy(
            out, weights.get("log_std"), batch["raw"]
        )
        return batch_loss(
            logp,
            entropy,
            value,
            batch,
            hparam(hp, "clip_eps"),
            hparam(hp, "vf_coef"),
            hparam(hp, "ent_coef"),
        )

    def _batch(self, weights, streams: Streams, rec: dict, hp: dict) -> dict:
        """The rollout's training batch ``[T, N, ...]`` (GAE across episodes;
        ``streams``: where the rollout ended)."""
        # V of the step after the rollout (with the state it will start from).
        x_next = jax.vmap(self.features)(streams.obs, streams.first)
        h_next = jnp.where(streams.trial_start[:, None], 0.0, streams.hidden)
        _, _, next_value = self.core.step(weights, h_next, x_next)
        adv = gae_across_episodes(
            rec["value"],
            next_value,
            rec["reward"] * hparam(hp, "reward_scale"),
            rec["trial_end"],
            hparam(hp, "gamma"),
            hparam(hp, "gae_lambda"),
        )
        return {
            "x": rec["x"],
            "raw": rec["raw"],
            "logp": rec["logp"],
            "reset": rec["reset"],
            "adv": adv,
            "target": adv + rec["value"],
        }

    def update(self, state: RunnerState, hp: dict) -> tuple[RunnerState, dict]:
        """One rollout of ``rollout_steps`` steps and its PPO update."""
        s = self.shape
        key, k_roll, k_perm = jax.random.split(state.key, 3)
        h0 = state.hidden
        streams, rec = key_scan(
            lambda c, k: self._env_step(state.weights, c, k),
            state.streams(),
            self.rollout_keys(k_roll),
        )
        batch = self._batch(state.weights, streams, rec, hp)
        learner, m = sgd_epochs(
            trial_optimizer(s, hp, state.update),
            self._loss,
            Learner(state.weights, state.opt_state),
            epoch_permutations(k_perm, s.num_envs, s.num_epochs, s.num_minibatches),
            lambda idx: (jax.tree.map(lambda a: a[:, idx], batch), h0[idx], hp),
        )
        metrics = mean_metrics(m, hparam(hp, "vf_coef"), hparam(hp, "ent_coef"))
        metrics.update(rollout_metrics(rec))
        new = state._replace(
            weights=learner.params,
            opt_state=learner.opt_state,
            key=key,
            update=state.update + 1,
            **streams._asdict(),
        )
        return new, metrics

    def weights(self, state: RunnerState) -> Any:
        """The trained policy: the core's weights pytree."""
        return state.weights

    def __call__(self, key: jax.Array, hp: dict) -> tuple[RunnerState, dict]:
        """The whole run: ``(final state, metrics {name: [num_updates]})``."""
        state = self.init(key, hp)
        return jax.lax.scan(
            lambda st, _: self.update(st, hp), state, None, self.shape.num_updates
        )


def trial_metrics(rewards: jax.Array, episode_end: jax.Array) -> dict:
    """``reward`` (mean per step), ``trial_return``, ``episode_return_first``
    and ``episode_return_last`` of whole trials ``rewards [n, L]`` whose
    episodes end where ``episode_end [n, L]`` is true.

    The first episode runs to the first end (the whole trial if none); the
    last is the last complete one, between the last two ends (a trial of a
    fixed number of steps may cut its final episode short, as on families
    whose episodes end early, such as Dark Key-to-Door's at the door).
    """
    length = rewards.shape[1]
    step = jnp.arange(length)[None]

    def last_end(ends):  # [n] index of the last end (-1 if none)
        found = ends.any(1)
        return jnp.where(found, length - 1 - jnp.argmax(ends[:, ::-1], 1), -1)

    any_end = episode_end.any(1)
    first_end = jnp.where(any_end, jnp.argmax(episode_end, 1), length - 1)
    final = jnp.where(any_end, last_end(episode_end), length - 1)
    before = last_end(episode_end & (step < final[:, None]))
    in_last = (step > before[:, None]) & (step <= final[:, None])
    return {
        "reward": rewards.mean(),
        "trial_return": rewards.sum(1).mean(),
        "episode_return_first": jnp.where(step <= first_end[:, None], rewards, 0.0)
        .sum(1)
        .mean(),
        "episode_return_last": jnp.where(in_last, rewards, 0.0).sum(1).mean(),
    }


def rollout_metrics(rec: dict) -> dict:
    """``reward`` (mean per step) and, over the trials that ended in the
    rollout (NaN if none), ``trial_return``, ``episode_return_first`` and
    ``episode_return_last``."""
    metrics = {"reward": rec["reward"].mean()}
    ended = rec["trial_end"].astype(jnp.float32)
    count = ended.sum()

    def over_trials(values):
        return jnp.where(count > 0, (values * ended).sum() / count, jnp.nan)

    metrics["trial_return"] = over_trials(rec["trial_return"])
    metrics["episode_return_first"] = over_trials(rec["first_return"])
    metrics["episode_return_last"] = over_trials(rec["last_return"])
    return metrics
