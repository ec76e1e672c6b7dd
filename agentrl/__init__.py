"""agentrl: in-context reinforcement learning research in pure, jit-compiled JAX.

The package is organised along one data path (see ``docs/design.md``): task families
(:mod:`agentrl.envs`) feed source algorithms that write learning histories, which
train decision models that are then evaluated in context on held-out tasks.
Submodules are imported on demand so that ``import agentrl`` stays cheap.
"""

from typing import Any

from agentrl.version import __version__

__all__ = ["__version__", "load_run"]


def load_run(run_dir: Any, step: int | None = None) -> Any:
    """Open a trained run: model parameters, config, env, held-out tasks.

    See :func:`agentrl.train.rundir.load_run` (imported on demand).
    """
    from agentrl.train.rundir import load_run as _load_run

    return _load_run(run_dir, step)
