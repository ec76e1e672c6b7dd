"""Tiny fake models that satisfy the evaluation model contract, and their tests.

Other ``test_evaluate_*`` files import these so that evaluation is tested
without the real decision model:

- :class:`RepeatRewardedAD` (AD contract): logits favour the last rewarded
  action, a win-stay policy that beats random on bandits;
- :class:`EmpiricalMeanDPT` (DPT contract): logits proportional to each
  action's empirical mean reward over the first ``i`` context transitions.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx


class Out(NamedTuple):
    action: jax.Array


class RepeatRewardedAD:
    """AD contract: ``init_cache`` / ``decode``; the cache counts decoded tokens."""

    def __init__(self, num_actions: int, strength: float = 4.0):
        self.num_actions = num_actions
        self.strength = strength

    def init_cache(self, batch: int, max_steps: int):
        return {
            "best": jnp.zeros((batch,), jnp.int32),
            "has": jnp.zeros((batch,), bool),
            "length": jnp.zeros((batch,), jnp.int32),
        }

    def decode(self, cache, obs, prev_action, prev_reward):
        rewarded = prev_reward > 0
        best = jnp.where(rewarded, prev_action.astype(jnp.int32), cache["best"])
        has = cache["has"] | rewarded
        logits = self.strength * jax.nn.one_hot(best, self.num_actions) * has[:, None]
        cache = {"best": best, "has": has, "length": cache["length"] + 1}
        return Out(logits), cache


class EmpiricalMeanDPT:
    """DPT contract: ``predict_query`` -> ``out.action [B, N + 1, A]``."""

    def __init__(self, num_actions: int, strength: float = 20.0):
        self.num_actions = num_actions
        self.strength = strength

    def predict_query(self, query_obs, ctx_obs, ctx_action, ctx_reward, ctx_next_obs):
        onehot = jax.nn.one_hot(ctx_action, self.num_actions)  # [B, N, A]

        def prefix(x):  # position i sums the first i transitions
            return jnp.pad(jnp.cumsum(x, axis=1), ((0, 0), (1, 0), (0, 0)))

        sums = prefix(onehot * ctx_reward[..., None])
        counts = prefix(onehot)
        return Out(self.strength * (sums + 0.5) / (counts + 1.0))


def arm_two_paid_once(env, params, key, tasks: int):
    """``(params, context)``: arm 2 of a 3-armed bandit never pays, and a
    DPT context of three pulls ``[0, 2, 1]`` in which it was paid once, so a
    model reading that context alone keeps pulling arm 2 (paid 0), while one
    reading its own pulls would soon leave it."""
    from agentrl.agents.context_set import empty_context

    params = params.replace(means=params.means.at[:, 2].set(0.0))
    keys = jax.random.split(key, tasks)
    context = empty_context(env, keys, params, 3)._replace(
        action=jnp.tile(jnp.array([0, 2, 1], jnp.int32), (tasks, 1)),
        reward=jnp.tile(jnp.array([0.0, 1.0, 0.0]), (tasks, 1)),
        count=jnp.full((tasks,), 3, jnp.int32),
    )
    return params, context


def test_dpt_fake_position_uses_only_first_transitions():
    model = EmpiricalMeanDPT(3)
    action = jnp.array([[2, 2, 0]])
    reward = jnp.array([[1.0, 1.0, 0.0]])
    out = model.predict_query(None, None, action, reward, None).action
    assert out.shape == (1, 4, 3)
    np.testing.assert_allclose(out[0, 0], [10.0, 10.0, 10.0])  # prior only
    assert int(jnp.argmax(out[0, 2])) == 2
    # Changing a later transition leaves earlier positions unchanged.
    out2 = model.predict_query(None, None, action, reward.at[0, 2].set(5.0), None)
    np.testing.assert_array_equal(out[:, :3], out2.action[:, :3])


def test_ad_fake_repeats_rewarded_action():
    model = RepeatRewardedAD(4)
    cache = model.init_cache(2, 10)
    out, cache = model.decode(cache, None, jnp.array([3, 1]), jnp.array([1.0, 0.0]))
    assert out.action.shape == (2, 4)
    assert int(jnp.argmax(out.action[0])) == 3
    np.testing.assert_array_equal(out.action[1], 0.0)
    np.testing.assert_array_equal(cache["length"], [1, 1])


class BiasNNX(nnx.Module):
    """An NNX module with the AD contract: logits are a learned bias."""

    def __init__(self, num_actions: int):
        self.bias = nnx.Param(jnp.zeros((num_actions,)))

    def init_cache(self, batch: int, max_steps: int):
        return jnp.zeros((batch,), jnp.int32)

    def decode(self, cache, obs, prev_action, prev_reward):
        logits = jnp.broadcast_to(self.bias[...], (cache.shape[0], self.bias.shape[0]))
        return Out(logits), cache + 1


def test_nnx_model_runs_with_weights_as_arguments():
    from agentrl import envs
    from agentrl.evaluate import run_model_online

    env = envs.make("bernoulli_bandit", num_arms=4, horizon=5)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 3))
    model = BiasNNX(4)
    model.bias[...] = jnp.array([0.0, 0.0, 1.0, 0.0])
    history, state = run_model_online(
        env, model, params, jax.random.key(1), 2, greedy=True
    )
    np.testing.assert_array_equal(history.action, 2)
    np.testing.assert_array_equal(state.cache, 11)
    model.bias[...] = jnp.array([0.0, 3.0, 1.0, 0.0])
    history, _ = run_model_online(env, model, params, jax.random.key(1), 2, greedy=True)
    np.testing.assert_array_equal(history.action, 1)
