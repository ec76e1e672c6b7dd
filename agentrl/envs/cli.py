"""``agentrl envs``: list task families with their random and oracle returns."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from agentrl.cliargs import Positional, PositiveInt
from agentrl.configtools import ConfigError
from agentrl.envs.registry import registered


@dataclasses.dataclass
class Args:
    """List task families with their random and oracle returns."""

    names: Annotated[tuple[str, ...], Positional] = ()
    """families to show (default: all)"""
    tasks: PositiveInt = 256
    """tasks per family"""


def run(args: Args) -> int:
    from agentrl.envs.report import returns_table

    unknown = sorted(set(args.names) - set(registered()))
    if unknown:
        raise ConfigError(f"unknown families {unknown}; registered: {registered()}")
    print(returns_table(list(args.names) or None, args.tasks))
    return 0
