"""``agentrl envs``: list task families; with names or ``--returns``, measure
their random and oracle returns.

The listing reads the registry's names and descriptions only (the built-in
families are registered lazily), so it imports no JAX and prints at once;
measuring returns compiles a rollout per family.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

from agentrl.cliargs import Positional, PositiveInt
from agentrl.configtools import ConfigError
from agentrl.envs.registry import ENVS, GYMNAX_PREFIX, registered


@dataclasses.dataclass
class Args:
    """List task families; NAMES or --returns: their random and oracle returns."""

    names: Annotated[tuple[str, ...], Positional] = ()
    """families whose random and oracle returns to measure (default: list all)"""
    returns: bool = False
    """measure the random and oracle returns of every family (compiles each)"""
    tasks: PositiveInt = 256
    """tasks per family when measuring returns"""


def listing() -> str:
    """One line per registered family: its name and description."""
    names = registered()
    width = max(map(len, names), default=0)
    lines = [f"  {name:<{width}}  {ENVS.describe(name)}" for name in names]
    return "\n".join(
        [
            "task families (agentrl envs NAME ... measures random/oracle returns):",
            *lines,
            f"  {GYMNAX_PREFIX + '<id>':<{width}}  any gymnax environment, one task "
            "(as data.env; no oracle, so not measured here)",
        ]
    )


def run(args: Args) -> int:
    unknown = sorted(set(args.names) - set(registered()))
    if unknown:
        gymnax = " (gymnax:<id> families have no oracle to measure)" * any(
            n.startswith(GYMNAX_PREFIX) for n in unknown
        )
        raise ConfigError(
            f"unknown families {unknown}; registered: {registered()}{gymnax}"
        )
    if not args.names and not args.returns:
        print(listing())
        return 0
    from agentrl.envs.report import returns_table

    print(returns_table(list(args.names) or None, args.tasks))
    return 0
