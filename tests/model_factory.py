"""Random-weight decision models for tests, built without compiling initializers."""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from agentrl.models import DecisionModel, ModelConfig


def make_model(cfg: ModelConfig, seed: int = 0) -> DecisionModel:
    """Model with random N(0, 0.3) params, built without compiling initializers.

    ``DecisionModel(cfg, rngs=...)`` compiles every initializer eagerly (~20 s
    on a busy 2-core box); tests only need some random weights.
    """
    abstract = nnx.eval_shape(lambda: DecisionModel(cfg, rngs=nnx.Rngs(seed)))
    graphdef, state = nnx.split(abstract)
    rng = np.random.default_rng(seed)
    key = jax.random.key(seed)

    def fill(x):
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            return jnp.broadcast_to(key, x.shape)
        if jnp.issubdtype(x.dtype, jnp.integer):
            return jnp.zeros(x.shape, x.dtype)
        return jnp.asarray(rng.normal(0.0, 0.3, x.shape), x.dtype)

    return nnx.merge(graphdef, jax.tree.map(fill, state))
