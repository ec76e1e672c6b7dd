"""Checks for constructor arguments that fail early with the field's name."""

from __future__ import annotations

from typing import Any

from agentrl.checks import is_int


def check_int(env: str, field: str, value: Any, minimum: int) -> int:
    """Return ``value`` as an int, or raise naming ``env.field`` and the bound."""
    if not is_int(value, minimum):
        raise ValueError(
            f"{env}: `{field}` must be an integer >= {minimum}, got {value!r}"
        )
    return value


def check_float(
    env: str, field: str, value: Any, low: float, high: float | None = None
) -> float:
    """Return ``value`` as a float in ``[low, high]`` or raise naming the field."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok:
        ok = value >= low and (high is None or value <= high)
    if not ok:
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{env}: `{field}` must be a number {bound}, got {value!r}")
    return float(value)


def check_choice(env: str, field: str, value: Any, allowed: tuple) -> Any:
    """Return ``value`` if it is one of ``allowed`` or raise listing them."""
    if value not in allowed:
        raise ValueError(f"{env}: `{field}` must be one of {allowed}, got {value!r}")
    return value
