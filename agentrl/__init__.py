"""agentrl: in-context reinforcement learning research in pure, jit-compiled JAX.

The package is organised along one data path (see ``DESIGN.md``): task families
(:mod:`agentrl.envs`) feed source algorithms that write learning histories, which
train decision models that are then evaluated in context on held-out tasks.
Submodules are imported on demand so that ``import agentrl`` stays cheap.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
