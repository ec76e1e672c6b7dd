"""The online learner's program: a config mapped onto its jitted trainer.

:func:`make_program` is what :meth:`Algorithm.make_online_train` returns for
the learners of this package: an :class:`OnlineProgram` whose ``__call__(key,
hparams)`` is the whole training run (pure, vmappable over seeds and the
traced hyperparameters), and whose ``init``/``update`` pieces let
:func:`agentrl.train.fit` run it update by update with checkpoints.
``hparams`` is the experiment's traced dict (``{"train.lr": ..,
"algo.gamma": ..}``, :func:`agentrl.train.step.default_hparams`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from agentrl.envs.tasks import DEFAULT_VALIDATION_SHARE
from agentrl.online.ppo import HPARAMS, PPOShape, TrialPPO


def training_tasks(env: Any, data: Any):
    """``key -> params`` of one training task.

    Finite task spaces: a uniform draw from the split's train ids (the same
    split ``fit`` records in ``run.json``, so evaluation's held-out tasks
    were never trained on). Continuous ones: ``env.sample_params`` (held-out
    tasks are drawn from another key by the evaluation).
    """
    if getattr(env, "num_tasks", None):
        ids = jnp.asarray(env.task_split(data.split_fraction, data.seed).train)

        def sample(key):
            i = jax.random.randint(key, (), 0, ids.shape[0])
            return env.params_for_task(ids[i])

        return sample
    return env.sample_params


def task_split_json(env: Any, data: Any) -> dict | None:
    """The split recorded in ``run.json`` (``None`` for continuous task spaces).

    Three-way, as a dataset's: the held-out ids are cut into validation
    (protocol choices) and test (the reported number) with the datasets'
    default share; the train ids are the same as a two-way split's.
    """
    if getattr(env, "num_tasks", None):
        return env.task_split(
            data.split_fraction, data.seed, DEFAULT_VALIDATION_SHARE
        ).to_json()
    return None


class OnlineProgram:
    """``program(key, hparams) -> (state, metrics)``; ``init``/``update`` pieces.

    ``weights(state)`` is the policy's weights pytree (what a checkpoint
    gives :meth:`Algorithm.make_agent`).
    """

    def __init__(self, trainer: TrialPPO):
        self.trainer = trainer

    @staticmethod
    def hp(hparams: dict) -> dict:
        out = {}
        for name in HPARAMS:
            path = f"train.{name}" if name in ("lr", "weight_decay") else f"algo.{name}"
            out[name] = hparams[path]
        return out

    def init(self, key: jax.Array, hparams: dict):
        return self.trainer.init(key, self.hp(hparams))

    def update(self, state, hparams: dict):
        return self.trainer.update(state, self.hp(hparams))

    def __call__(self, key: jax.Array, hparams: dict):
        return self.trainer(key, self.hp(hparams))

    def weights(self, state) -> Any:
        return self.trainer.weights(state)


def make_program(config: Any, env: Any, core: str = "gru") -> OnlineProgram:
    """The :class:`OnlineProgram` of ``config`` (an ``ExperimentConfig``) on ``env``."""
    from agentrl.train.step import schedule_shape

    algo, train = config.algo, config.train
    sample_task = training_tasks(env, config.data)
    if core == "transformer":
        from agentrl.online.transformer import TransformerPPO, TransformerShape
        from agentrl.train.config import complete_model_config

        trial_steps = algo.trial_episodes * env.horizon
        shape = TransformerShape(
            num_envs=algo.num_envs,
            trial_steps=trial_steps,
            update_every=algo.update_every or trial_steps,
            num_epochs=algo.num_epochs,
            num_minibatches=algo.num_minibatches,
            num_updates=train.steps,
            grad_clip=train.grad_clip,
            lr_shape=schedule_shape(train),
        )
        model = complete_model_config(config.model, env, algo)
        return OnlineProgram(TransformerPPO(env, shape, model, sample_task))
    if core != "gru":
        raise ValueError(f"online core must be 'gru' or 'transformer', got {core!r}")
    shape = PPOShape(
        num_envs=algo.num_envs,
        trial_episodes=algo.trial_episodes,
        rollout_steps=algo.rollout_steps,
        num_epochs=algo.num_epochs,
        num_minibatches=algo.num_minibatches,
        num_updates=train.steps,
        hidden=algo.hidden,
        embed=algo.embed,
        grad_clip=train.grad_clip,
        init_log_std=algo.init_log_std,
        lr_shape=schedule_shape(train),
        grid_size=algo.grid_size(env),
    )
    return OnlineProgram(TrialPPO(env, shape, sample_task))


def train_members(
    config: Any,
    env: Any,
    seeds: list[int],
    settings: list[dict[str, float]] | None = None,
):
    """Train ``S`` seeds x ``H`` traced settings of an online learner in ONE jit.

    Member ``m`` is seed ``seeds[m // H]`` with ``settings[m % H]`` (dicts of
    traced fields by path, e.g. ``{"train.lr": 3e-4, "algo.ent_coef": 0.0}``)
    and follows exactly the run :func:`agentrl.train.fit` makes with that
    seed and setting (the same program, vmapped).

    Returns:
      ``(state, metrics)``: the final trainer state with leaves ``[S * H,
      ...]`` (``program.weights`` of a member's slice is its policy) and
      metrics ``{name: [S, H, train.steps]}``.
    """
    from agentrl.train.config import complete_config
    from agentrl.train.step import default_hparams

    full = complete_config(config, env)
    program = full.algo.make_online_train(full, env)
    settings = list(settings or [{}])
    base = default_hparams(full)
    for setting in settings:
        unknown = sorted(set(setting) - set(base))
        if unknown:
            raise ValueError(
                f"settings: {unknown} are not traced fields of this config; "
                f"traced: {sorted(base)}"
            )
    num_s, num_h = len(seeds), len(settings)
    hparams = {
        name: jnp.asarray(
            [float(s.get(name, value)) for _ in seeds for s in settings], jnp.float32
        )
        for name, value in base.items()
    }
    keys = jnp.stack([jax.random.key(int(s)) for s in seeds for _ in settings])
    state, metrics = jax.jit(jax.vmap(program))(keys, hparams)
    metrics = {k: v.reshape(num_s, num_h, *v.shape[1:]) for k, v in metrics.items()}
    return state, metrics
