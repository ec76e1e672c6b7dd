"""The checks the learned sources (PPO, SAC) share on their settings.

Each learned source has a frozen dataclass of settings; :func:`config_from`
turns a run's keyword settings into it after the checks every such source
makes (known fields, an ``env.horizon``, a positive episode count), and
:func:`resolve_labels` checks and resolves its DPT labels. Errors are
``ValueError``s that start with the source's name and name the field.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentrl.checks import is_int

LABELS = ("auto", "oracle", "final_policy", "none")  # a source's DPT labels


def config_from(
    source: str, config_cls: type, env: Any, num_episodes: Any, settings: dict
) -> Any:
    """``config_cls(**settings)`` once ``settings`` name only its fields,
    ``env.horizon`` is an int >= 1 and ``num_episodes`` an int >= 1."""
    fields = {f.name: f.default for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(settings) - set(fields))
    if unknown:
        allowed = ", ".join(f"{k}={v!r}" for k, v in fields.items())
        raise ValueError(f"{source}: unknown setting(s) {unknown}; valid: {allowed}")
    horizon = getattr(env, "horizon", None)
    if not isinstance(horizon, int) or horizon < 1:
        raise ValueError(f"{source}: env.horizon must be an int >= 1, got {horizon!r}")
    check_ints(source, num_episodes=num_episodes)
    return config_cls(**settings)


def check_ints(source: str, minimum: int = 1, **values: Any) -> None:
    """Each of ``values`` must be an int (not a bool) >= ``minimum``."""
    for name, value in values.items():
        if not is_int(value, minimum):
            raise ValueError(
                f"{source}: {name} must be an int >= {minimum}, got {value!r}"
            )


def resolve_labels(source: str, env: Any, labels: Any) -> str:
    """``labels`` (one of :data:`LABELS`) checked for ``env``, ``"auto"``
    resolved: the env's oracle where it has one, else none. ``source`` names
    the source in the error."""
    if labels not in LABELS:
        raise ValueError(f"{source}: labels must be one of {LABELS}, got {labels!r}")
    has_oracle = bool(getattr(env, "has_oracle", False))
    if labels == "oracle" and not has_oracle:
        raise ValueError(
            f"{source}: labels='oracle' needs an env with an oracle; "
            f"{getattr(env, 'name', type(env).__name__)} has none (use "
            "'final_policy')"
        )
    if labels == "auto":
        return "oracle" if has_oracle else "none"
    return labels
