"""The task plan of a dataset: which task each record of each split holds.

>>> plan = plan_tasks(env, num_tasks=1000, split_fraction=0.8, seed=0)
>>> plan.task_ids["train"]      # record i of the train split: its task id
>>> params = task_params(env, plan, plan.task_ids["train"][:64], key_tasks)

For a finite task space (Dark Room goals) the env's task ids are split
``split_fraction`` / rest with ``seed``, the rest halved into validation and
test ids (recorded), and histories cycle over the *train* ids (one
``train`` split). For a continuous task space (bandits) the tasks are
``sample_params(fold_in(task_key, i))`` for ``i < num_tasks``, and the
indices are split into ``train`` and ``test`` splits.
:func:`training_tasks` rebuilds a written dataset's training tasks from its
``agentrl.json``, as :func:`agentrl.data.writer.write_dataset` made them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from agentrl.checks import is_int
from agentrl.envs.tasks import DEFAULT_VALIDATION_SHARE, TaskSplit, split_task_ids


@dataclasses.dataclass(frozen=True)
class TaskPlan:
    """Which task each record holds: ``task_ids[split] [record]`` and the split."""

    task_ids: dict[str, np.ndarray]
    split: TaskSplit
    finite: bool


def plan_tasks(
    env: Any,
    num_tasks: int,
    split_fraction: float,
    seed: int,
    validation_share: float = DEFAULT_VALIDATION_SHARE,
    num_train_tasks: int | None = None,
) -> TaskPlan:
    """Task ids per split for ``num_tasks`` histories (see the module docstring).

    A finite task space is split train / validation / test
    (``validation_share`` of the held-out ids validate; the training ids do
    not depend on it). A continuous one splits record indices train / test;
    its validation and test tasks are fresh draws at evaluation
    (:func:`agentrl.train.rundir.held_out_params`).

    ``num_train_tasks``: the training histories cycle over only this many
    distinct tasks (the first of the shuffled training ids; on a continuous
    family the first training record indices, each index one drawn task),
    the memorisation-to-generalisation axis of the GPICL study; ``None``:
    all of them. The held-out ids are those of the unrestricted split.
    """
    if getattr(env, "num_tasks", None):
        split = env.task_split(split_fraction, seed, validation_share)
        order = np.random.default_rng(seed).permutation(split.train)
        order = order[: _distinct(num_train_tasks, len(order), "training task ids")]
        ids = order[np.arange(num_tasks) % len(order)].astype(np.int32)
        return TaskPlan({"train": ids}, split, True)
    split = split_task_ids(num_tasks, split_fraction, seed)
    train = split.train
    train = train[: _distinct(num_train_tasks, len(train), "training histories")]
    ids = train[np.arange(len(split.train)) % len(train)].astype(np.int32)
    return TaskPlan({"train": ids, "test": split.test}, split, False)


def _distinct(num_train_tasks: int | None, available: int, what: str) -> int:
    """How many distinct training tasks: ``num_train_tasks`` or all ``available``."""
    if num_train_tasks is None:
        return available
    if not is_int(num_train_tasks, 1) or num_train_tasks > available:
        raise ValueError(
            f"num_train_tasks (data.num_train_tasks) must be an integer in [1, "
            f"{available}] (the split has {available} {what}) or None, got "
            f"{num_train_tasks!r}"
        )
    return num_train_tasks


def training_tasks(env: Any, metadata: dict[str, Any]) -> tuple[Any, np.ndarray]:
    """``(params [task, ...], ids [task])``: a dataset's distinct training tasks.

    In the order the training records first use them, from the dataset's
    ``agentrl.json`` (``task_ids``, ``task_space``, ``seed``): the tasks its
    histories were generated on, rebuilt as
    :func:`~agentrl.data.writer.write_dataset` made them.
    """
    records = np.asarray(metadata["task_ids"]["train"], np.int32)
    _, first = np.unique(records, return_index=True)
    ids = records[np.sort(first)]
    finite = metadata.get("task_space") == "finite"
    plan = TaskPlan({"train": ids}, TaskSplit.from_json(metadata["split"]), finite)
    key_tasks, _ = jax.random.split(jax.random.key(int(metadata["seed"])))
    return task_params(env, plan, ids, key_tasks), ids


def task_params(env: Any, plan: TaskPlan, ids: np.ndarray, task_key: jax.Array):
    """Params ``[task, ...]`` of task ``ids``."""
    ids = jnp.asarray(ids, jnp.int32)
    if plan.finite:
        return jax.vmap(env.params_for_task)(ids)
    keys = jax.vmap(lambda i: jax.random.fold_in(task_key, i))(ids)
    return jax.vmap(env.sample_params)(keys)
