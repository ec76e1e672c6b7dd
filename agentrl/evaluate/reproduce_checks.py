"""What ``agentrl reproduce`` checks before it trains or generates anything.

:func:`check_validation`: the validation tasks each seed will choose its
acting rule on (refused beyond what the split holds on a family with
nothing more to draw; a note where too few to resolve a choice).
:func:`check_comparable`: a ``--compare`` pair can be paired per (seed,
task), sharing :data:`PAIRED_SETTINGS`, under two names.
"""

from __future__ import annotations

from typing import Any

import agentrl.configtools as configtools
from agentrl.envs.base import can_draw_tasks, validation_beyond_split
from agentrl.envs.registry import make as make_env
from agentrl.envs.tasks import DEFAULT_VALIDATION_SHARE
from agentrl.evaluate.metrics import MIN_RESOLVING_TASKS
from agentrl.evaluate.reproduce_report import method_labels


def check_validation(config: Any) -> str | None:
    """The validation tasks ``config``'s seeds will choose on, before any data.

    ``eval.validation_tasks`` beyond what the split will hold, on a family
    with nothing to draw beyond its fixed tasks, is a ``ValueError``
    (a dataset given by ``data.path`` is checked when its split is read).
    Returns a one-line note where the choices will see fewer tasks than can
    resolve one (:data:`~agentrl.evaluate.metrics.MIN_RESOLVING_TASKS`),
    else ``None``.
    """
    data, ev = config.data, config.eval
    if data.path:
        return None
    env = make_env(data.env, **dict(data.env_args))
    if not env.num_tasks:
        return None  # a continuous family draws as many as asked
    split = env.task_split(data.split_fraction, data.seed, DEFAULT_VALIDATION_SHARE)
    held, draws = len(split.validation), can_draw_tasks(env)
    if ev.validation_tasks is not None and ev.validation_tasks > held and not draws:
        raise validation_beyond_split(
            env,
            f"eval.validation_tasks={ev.validation_tasks}",
            held,
            f"the split (data.split_fraction={data.split_fraction})",
        )
    count = ev.validation_tasks or min(ev.num_tasks, held)
    if count >= MIN_RESOLVING_TASKS:
        return None
    if draws:
        more = "`--set eval.validation_tasks=32` draws more from the task distribution"
    elif count < held:
        more = f"the split holds {held}: `--set eval.validation_tasks={held}`"
    else:
        more = "the family has no more"
    return (
        f"{config.name}: acting rules are chosen on {count} validation tasks a "
        f"seed, too few to resolve a choice (at least {MIN_RESOLVING_TASKS}); "
        f"{more}"
    )


#: What a ``--compare`` pair must share to be paired per (seed, task): the
#: same test tasks (family, split, data seeds), evaluation keys and episodes.
PAIRED_SETTINGS = (
    "data.env",
    "data.env_args",
    "data.split_fraction",
    "data.held_out",
    "data.seed",
    "eval.seed",
    "eval.num_tasks",
    "eval.num_episodes",
)


def check_comparable(configs: list[Any]) -> list[str]:
    """The methods ``configs`` report as (:func:`method_labels`), after
    checking a ``--compare`` pair can be paired: a ``ValueError`` where both
    have one ``name`` (they would share runs, caches and results) or differ
    in a :data:`PAIRED_SETTINGS` field."""
    labels = method_labels(configs)
    if len(configs) < 2:
        return labels
    a, b = configs
    if a.name == b.name or labels[0] == labels[1]:
        raise ValueError(
            f"--compare: both experiments are named {b.name!r} (their config's "
            "`name`), so their runs and results would be one; give the variant "
            "its own `name`"
        )
    fa, fb = (configtools.flat_fields(c) for c in configs)
    differ = [f"{k} {fa[k]!r} vs {fb[k]!r}" for k in PAIRED_SETTINGS if fa[k] != fb[k]]
    if differ:
        raise ValueError(
            f"--compare {b.name}: a difference is paired per (seed, task) over "
            f"the same test tasks, keys and episodes as {a.name}'s; they differ "
            f"in {'; '.join(differ)} (a --set applies to both)"
        )
    return labels
