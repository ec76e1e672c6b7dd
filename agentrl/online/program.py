"""The online learners' programs: a config mapped onto its jitted trainer.

:func:`gru_program` (RL²'s) and :func:`transformer_program` (transformer
PPO's) are what those algorithms' :meth:`Algorithm.make_online_train`
returns: an :class:`OnlineProgram` whose ``__call__(key, hparams)`` is the
whole training run (pure, vmappable over seeds and the traced
hyperparameters), and whose ``init``/``update`` pieces let the training
runner (:mod:`agentrl.train.runner`) run it update by update with
checkpoints. ``hparams`` is the config's tree of traced values
(:func:`agentrl.configtools.default_hparams`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from agentrl.envs.tasks import DEFAULT_VALIDATION_SHARE
from agentrl.models.config import complete_model_config
from agentrl.online.ppo import HPARAMS, PPOShape, TrialPPO
from agentrl.online.transformer import TransformerPPO, TransformerShape
from agentrl.schedule import schedule_shape, warmup_cosine_shape


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
    gives :meth:`Algorithm.make_agent`). ``hparam_names``: the traced
    settings the trainer reads (a trainer with others subclasses this).
    """

    hparam_names: tuple[str, ...] = HPARAMS

    def __init__(self, trainer: Any):
        self.trainer = trainer

    def hp(self, hparams: dict) -> dict:
        """The trainer's flat ``{name: value}`` from the config's traced tree
        (the optimizer's ``train`` fields and the algorithm's)."""
        fields = {**hparams["train"], **hparams["algo"]}
        return {name: fields[name] for name in self.hparam_names}

    def init(self, key: jax.Array, hparams: dict):
        return self.trainer.init(key, self.hp(hparams))

    def update(self, state, hparams: dict):
        return self.trainer.update(state, self.hp(hparams))

    def __call__(self, key: jax.Array, hparams: dict):
        return self.trainer(key, self.hp(hparams))

    def weights(self, state) -> Any:
        return self.trainer.weights(state)


def _common(config: Any, env: Any) -> dict[str, Any]:
    """The shape fields both trainers take from the config."""
    algo, train = config.algo, config.train
    return {
        "num_envs": algo.num_envs,
        "num_epochs": algo.num_epochs,
        "num_minibatches": algo.num_minibatches,
        "num_updates": train.steps,
        "grad_clip": train.grad_clip,
        "lr_shape": schedule_shape(train),
        "adam_b2": train.adam_b2,
    }


def gru_program(config: Any, env: Any) -> OnlineProgram:
    """RL²'s program: :class:`TrialPPO` of ``config`` (an ``ExperimentConfig``)."""
    algo = config.algo
    shape = PPOShape(
        trial_episodes=algo.trial_episodes,
        rollout_steps=algo.rollout_steps,
        hidden=algo.hidden,
        embed=algo.embed,
        init_log_std=algo.init_log_std,
        grid_size=algo.grid_size(env),
        **_common(config, env),
    )
    return OnlineProgram(TrialPPO(env, shape, training_tasks(env, config.data)))


def transformer_program(config: Any, env: Any) -> OnlineProgram:
    """Transformer PPO's program: the causal transformer trained over trials.

    ``config.model`` must be complete (``complete_config`` fills it).
    """
    algo = config.algo
    trial_steps = algo.trial_episodes * env.horizon
    common = _common(config, env)
    if algo.lr_clock == "env_steps":
        common["lr_shape"] = env_step_shape(config, trial_steps)
    shape = TransformerShape(
        trial_steps=trial_steps,
        lr_clock=algo.lr_clock,
        update_every=algo.update_every or trial_steps,
        full_update=algo.full_update,
        normalize_advantages=algo.normalize_advantages,
        clip_values=algo.clip_values,
        summed_minibatches=algo.summed_minibatches,
        shuffle_episodes=env.horizon if algo.shuffle_episodes else 0,
        episode_steps=env.horizon if algo.advantage_scope == "episode" else 0,
        init_log_std=algo.init_log_std,
        **common,
    )
    model = complete_model_config(config.model, env, algo)
    return OnlineProgram(
        TransformerPPO(env, shape, model, training_tasks(env, config.data))
    )


def env_step_shape(config: Any, trial_steps: int):
    """Transformer PPO's rate multiplier over env steps
    (``algo.lr_clock="env_steps"``, ReLIC's): the warm-up from
    ``algo.lr_warmup_start`` of the rate over ``algo.lr_warmup_env_steps``,
    then ``train.schedule`` (to ``train.cosine_end``) over the run's env
    steps (``train.schedule_length`` trials of ``algo.num_envs`` x
    ``trial_steps``; ReLIC's ``lrsched_T_max``, its ``total_num_steps``)."""
    algo, train = config.algo, config.train
    return warmup_cosine_shape(
        algo.lr_warmup_env_steps,
        algo.lr_warmup_start,
        train.schedule_length * algo.num_envs * trial_steps,
        train.schedule,
        train.cosine_end,
    )


def gru_core(algo: Any, env: Any) -> Any:
    """The :class:`~agentrl.rl.cores.GRUCore` of RL² ``algo`` on ``env``.

    The core depends only on the algorithm's network fields and the env's
    spaces; the trainer's loop lengths are placeholders here.
    """
    shape = PPOShape(
        num_envs=1,
        trial_episodes=algo.trial_episodes,
        rollout_steps=algo.rollout_steps,
        num_epochs=1,
        num_minibatches=1,
        num_updates=1,
        hidden=algo.hidden,
        embed=algo.embed,
        grad_clip=0.0,
        init_log_std=algo.init_log_std,
        grid_size=algo.grid_size(env),
    )
    return TrialPPO(env, shape, env.sample_params).core
