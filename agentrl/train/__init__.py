"""Training: experiment configs, the jitted update step, mesh, checkpoints, fit.

``fit`` is imported lazily so that ``import agentrl.train.config`` stays light.
"""

from __future__ import annotations

from typing import Any


def fit(*args: Any, **kwargs: Any):
    """See :func:`agentrl.train.loop.fit`."""
    from agentrl.train.loop import fit as _fit

    return _fit(*args, **kwargs)


__all__ = ["fit"]
