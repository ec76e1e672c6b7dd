"""Evaluation under shift: a trained learner on a changed task family.

``agentrl eval RUN --env-arg KEY=VALUE`` (repeatable) or
``evaluate_run(run_dir, env_args={...})`` builds the run's task family with
those constructor arguments changed, e.g.

- bandit arm means from another distribution: ``means_beta=(0.5, 0.5)``;
- another reward noise: ``noise_std=0.6`` (Gaussian bandits);
- a horizon longer than in training: ``horizon=1000``;
- Dark Room goals outside the training region: train with
  ``max_goal_distance=4``, evaluate with ``min_goal_distance=5,
  max_goal_distance=None``;
- Point-Robot goals at another radius: ``radius=1.5``.

The learner acts with frozen weights as always; the baselines (random,
oracle, UCB, Thompson sampling, the data's source) run on the same shifted
tasks with the same keys, so the normalized score compares like with like.
A shift may not change the observation or the action space (the model
reads and writes those): :func:`shifted_env` refuses it, naming the space
and both values.

Which tasks: a continuous family (bandit means, Point-Robot without fixed
goals) draws fresh held-out tasks from the shifted family with the run's
evaluation key. A finite family keeps the split's held-out task ids where
the shift keeps the number of tasks (a longer horizon, another radius);
where it changes the task set (a goal region), the tasks are the shifted
family's tasks that are no training task of the run (compared by their
parameters, the horizon aside), shuffled with the evaluation seed and cut
in two halves once: the test tasks are the first ``num_tasks`` of the first
half (the larger, where the count is odd), the validation tasks the first
of the second, so the two never share a task whatever each asks for; a
count beyond its half is refused.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from agentrl.envs.registry import make as make_env

#: base parameter fields that are no part of a task's identity
_NOT_IDENTITY = ("max_steps_in_episode",)


def shifted_env(name: str, trained_args: dict, shift: dict) -> Any:
    """The family ``name`` with ``trained_args`` updated by ``shift``.

    Raises ``ValueError`` for an argument the family does not take or a bad
    value (the family's own message), and for a shift that changes the
    observation or action space.
    """
    for key in shift:
        if not isinstance(key, str) or not key:
            raise ValueError(f"--env-arg expects KEY=VALUE, got the key {key!r}")
    trained = make_env(name, **trained_args)
    env = make_env(name, **{**trained_args, **shift})
    for space in ("observation", "action"):
        before = repr(getattr(trained, f"{space}_space")(None))
        after = repr(getattr(env, f"{space}_space")(None))
        if before != after:
            raise ValueError(
                f"the shift {describe(shift)} changes the {space} space of "
                f"{name} from {before} to {after}; a trained model reads and "
                "writes the spaces it was trained on: shift only what keeps them"
            )
    return env


def describe(shift: dict) -> str:
    """``"means_beta=(0.5, 0.5), horizon=1000"``."""
    return ", ".join(f"{k}={v!r}" for k, v in shift.items())


def shifted_tasks(
    run: Any,
    env: Any,
    num_tasks: int,
    seed: int,
    which: str,
) -> tuple[Any, list[int] | None]:
    """``(params [task, ...], ids | None)`` of the held-out tasks under shift.

    See the module docstring for which tasks; ``run`` is the
    :class:`~agentrl.train.rundir.Run`, ``env`` the shifted family. Raises
    ``ValueError`` for more test or validation tasks than their half holds.
    """
    if env.num_tasks is None or env.num_tasks == run.env.num_tasks:
        # the run's own held-out (or trained-on) ids, on the shifted family
        return run.held_out(num_tasks, seed, which, env=env)
    if which == "train":
        raise ValueError(
            "the shifted family has another task space: its tasks are no "
            "training tasks (evaluate --split train without --env-arg)"
        )
    unseen = _unseen_task_ids(run, env)
    test, validation = _halves(unseen, seed)
    part = test if which == "test" else validation
    if num_tasks > len(part):
        raise ValueError(
            f"{num_tasks} {which} tasks asked for under the shift: the shifted "
            f"family has {len(unseen)} tasks that are no training task, "
            f"{len(test)} of them test tasks and {len(validation)} validation "
            "tasks (kept apart, so no validation task is a test task); ask for "
            f"at most {len(part)} {which} tasks (--tasks, eval.num_tasks or "
            "eval.validation_tasks)"
        )
    ids = sorted(int(i) for i in part[:num_tasks])
    return jax.vmap(env.params_for_task)(jnp.asarray(ids, jnp.int32)), ids


def _halves(unseen: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(test [ceil(n / 2)], validation [floor(n / 2)])``: ``unseen [n]``
    shuffled with ``seed``, cut in two.

    Cut where no count asked for moves it: test and validation tasks are
    asked for by separate calls with separate counts, and a cut at the
    validation count (as once) put fewer validation tasks than test tasks
    inside the test tasks. The test half comes first, so the first ``k``
    test tasks are those reported before.
    """
    order = np.random.default_rng(seed).permutation(unseen)
    half = (len(order) + 1) // 2
    return order[:half], order[half:]


def _unseen_task_ids(run: Any, env: Any) -> np.ndarray:
    """Task ids of ``env`` whose parameters match no training task of ``run``."""
    ids = np.arange(env.num_tasks)
    train = [int(i) for i in (run.split or {}).get("train", [])]
    if not train:
        return ids
    candidates = _identity(jax.vmap(env.params_for_task)(jnp.asarray(ids)))
    trained = _identity(jax.vmap(run.env.params_for_task)(jnp.asarray(train)))
    same = np.ones((len(ids), len(train)), bool)
    for a, b in zip(candidates, trained, strict=True):
        a, b = a.reshape(len(ids), -1), b.reshape(len(train), -1)
        same &= (a[:, None, :] == b[None, :, :]).all(-1)
    return ids[~same.any(axis=1)]


def _identity(params: Any) -> list[np.ndarray]:
    """The leaves of ``params`` that tell tasks apart (the horizon aside)."""
    fields = {
        k: v
        for k, v in vars(params).items()
        if k not in _NOT_IDENTITY and v is not None
    }
    return [np.asarray(x) for x in jax.tree.leaves(fields)]
