"""Acting rules on continuous actions: the model agents sample their Gaussian.

A model agent's scores of a ``Box`` space are the Gaussian, ``[B, 2,
*action_shape]`` (mean, log std; :func:`action_scores`): ``greedy`` takes
the mean, ``sample`` draws ``mean + temperature * std * N(0, 1)``, both
clipped to the bounds; an ``"mse"`` head (no std) samples its mean.
"""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.errors import KeyReuseError

from agentrl import envs
from agentrl.agents.acting import SampleThenGreedy, acting_agent
from agentrl.agents.agent import Step
from agentrl.agents.context_set import (
    Context,
    DPTCachedModelAgent,
    DPTModelAgent,
)
from agentrl.agents.model_agents import action_scores, out_shape, select_action
from agentrl.agents.rolling import ADModelAgent, rolling_cache_agent
from agentrl.models.heads import ModelOutput
from agentrl.train.config import EvalConfig

MEAN = (0.02, -0.03)  # well inside point_robot's [-0.1, 0.1]
STD = 0.01
LOG_STD = float(np.log(STD))


@pytest.fixture(scope="module")
def env():
    return envs.make("point_robot")


def _keys(n, seed=0):
    return jax.random.split(jax.random.key(seed), n)


class GaussianAD:
    """AD contract on a ``Box`` space: the same mean and log std at every step
    (``log_std=None``: the ``"mse"`` head)."""

    def __init__(self, mean=MEAN, log_std=LOG_STD):
        self.mean = jnp.asarray(mean, jnp.float32)
        self.log_std = None if log_std is None else jnp.asarray(log_std, jnp.float32)

    def init_cache(self, batch, max_steps):
        return jnp.zeros((batch,), jnp.int32)

    def decode(self, cache, obs, prev_action, prev_reward):
        shape = (obs.shape[0], *self.mean.shape[-1:])
        mean = jnp.broadcast_to(self.mean, shape)
        log_std = None
        if self.log_std is not None:
            log_std = jnp.broadcast_to(self.log_std, shape)
        return ModelOutput(mean, log_std, {}), cache + 1


def _started(agent, batch):
    """``agent`` initialised and started on zero observations of ``batch`` rows."""
    state = agent.init(_keys(batch, 99), None)
    return agent.start(state, jnp.zeros((batch, 2), jnp.float32))


def _actions(agent, batch, seed=0):
    state = _started(agent, batch)
    return np.asarray(jax.jit(agent.act)(_keys(batch, seed), state, None, None, None))


def test_scores_carry_the_gaussian(env):
    space = env.action_space(None)
    assert out_shape(space) == (2, 2)
    mean = jnp.arange(6.0).reshape(3, 2)
    scores = action_scores(ModelOutput(mean, -mean, {}), space)
    assert scores.shape == (3, 2, 2) and scores.dtype == jnp.float32
    np.testing.assert_array_equal(scores[:, 0], mean)
    np.testing.assert_array_equal(scores[:, 1], -mean)
    # leading axes are kept (DPT's [B, N + 1, ...]); mse: a std of zero
    mse = action_scores(ModelOutput(mean[None], None, {}), space)
    assert mse.shape == (1, 3, 2, 2)
    assert np.all(np.isneginf(np.asarray(mse[:, :, 1])))
    # discrete: the logits as they are
    discrete = envs.make("bernoulli_bandit", num_arms=3).action_space(None)
    assert out_shape(discrete) == (3,)
    logits = action_scores(
        ModelOutput(mean[:, :1] + jnp.zeros((3, 3)), None, {}), discrete
    )
    assert logits.shape == (3, 3)


def test_greedy_is_the_mean_exactly(env):
    actions = _actions(ADModelAgent(GaussianAD(), env, 8, greedy=True), 16)
    np.testing.assert_array_equal(actions, np.broadcast_to(np.float32(MEAN), (16, 2)))
    # whatever the key
    again = _actions(ADModelAgent(GaussianAD(), env, 8, greedy=True), 16, seed=5)
    np.testing.assert_array_equal(actions, again)


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_sample_has_the_mean_and_temperature_times_the_std(env, temperature):
    n = 4000
    agent = ADModelAgent(GaussianAD(), env, 8, greedy=False, temperature=temperature)
    actions = _actions(agent, n)
    spread = temperature * STD
    np.testing.assert_allclose(actions.mean(0), MEAN, atol=5 * spread / np.sqrt(n))
    np.testing.assert_allclose(actions.std(0), spread, rtol=0.06)
    # one key per row: rows differ, and no sample is the mean
    assert len(np.unique(actions[:, 0])) == n
    assert not np.any(actions == np.float32(MEAN))
    # the sample equals the Gaussian's draw on each row's key
    noise = jax.vmap(lambda k: jax.random.normal(k, (2,)))(_keys(n))
    np.testing.assert_allclose(
        actions, np.float32(MEAN) + spread * np.asarray(noise), rtol=1e-5, atol=1e-7
    )


def test_mse_head_samples_its_mean(env):
    model = GaussianAD(log_std=None)
    for rule in ("sample", "greedy", "sample_then_greedy"):
        agent = acting_agent(
            lambda g: ADModelAgent(model, env, 8, greedy=g, temperature=2.0), rule
        )
        np.testing.assert_array_equal(
            _actions(agent, 8), np.broadcast_to(np.float32(MEAN), (8, 2))
        )


def test_actions_are_clipped_to_the_bounds(env):
    high = np.float32(env.max_action)
    outside = GaussianAD(mean=(0.5, -0.5))
    greedy = _actions(ADModelAgent(outside, env, 8, greedy=True), 4)
    np.testing.assert_array_equal(greedy, np.broadcast_to([high, -high], (4, 2)))
    wide = GaussianAD(mean=(0.0, 0.0), log_std=0.0)  # std 1, ten half-widths
    sampled = _actions(ADModelAgent(wide, env, 8), 256)
    assert sampled.min() >= -high and sampled.max() <= high
    at_bounds = np.isclose(np.abs(sampled), high)
    assert at_bounds.mean() > 0.8 and not at_bounds.all()
    assert (sampled == high).any() and (sampled == -high).any()


def test_select_action_uses_each_rows_key_once():
    """Under ``jax_debug_key_reuse`` a key drawn twice raises."""
    space = envs.make("point_robot").action_space(None)
    scores = action_scores(
        ModelOutput(jnp.zeros((3, 2)), jnp.full((3, 2), -3.0), {}), space
    )
    with jax.debug_key_reuse(True):
        keys = _keys(3)
        a = select_action(keys, scores, space, False, 1.0)
        # greedy does not draw: the same key may serve both (acting rules)
        g = select_action(keys, scores, space, True, 1.0)
        with pytest.raises(KeyReuseError):
            select_action(keys, scores, space, False, 1.0)
    assert np.all(np.asarray(g) == 0.0) and np.all(np.asarray(a) != 0.0)


def _step(reward):
    r = jnp.asarray(reward, jnp.float32)
    z = jnp.zeros((r.shape[0], 2), jnp.float32)
    done = jnp.zeros(r.shape, bool)
    return Step(z, z, r, z, done, done, z)


def test_sample_then_greedy_samples_until_rewarded_then_takes_the_mean(env):
    make = lambda g: ADModelAgent(GaussianAD(), env, 8, greedy=g)  # noqa: E731
    rule = acting_agent(make, "sample_then_greedy")
    sample = acting_agent(make, "sample")
    assert isinstance(rule, SampleThenGreedy)
    state, plain = _started(rule, 3), _started(sample, 3)
    act = jax.jit(rule.act)
    first = np.asarray(act(_keys(3, 1), state, None, None, None))
    # the same draws as "sample" on the same keys (fresh copies: one use each)
    np.testing.assert_array_equal(
        first, sample.act(_keys(3, 1), plain, None, None, None)
    )
    assert not np.any(first == np.float32(MEAN))  # sampled on every row
    state = rule.update(state, _step([0.0, 1.0, -1.0]))
    later = np.asarray(act(_keys(3, 2), state, None, None, None))
    np.testing.assert_array_equal(later[1], np.float32(MEAN))  # greedy once paid
    assert not np.any(later[[0, 2]] == np.float32(MEAN))  # still sampling


class PositionDPT:
    """DPT contract: position ``i``'s mean is ``(i, -i) / 100``, its log std
    ``-1 - i`` (so a gather that mixed positions would show)."""

    def predict_query(self, query_obs, ctx_obs, ctx_action, ctx_reward, ctx_next_obs):
        b, n = ctx_reward.shape
        i = jnp.broadcast_to(jnp.arange(n + 1, dtype=jnp.float32), (b, n + 1))
        mean = jnp.stack([i, -i], -1) / 100
        return ModelOutput(mean, -1.0 - jnp.stack([i, i + 0.5], -1), {})

    def init_cache(self, batch, size):
        return jnp.zeros((batch,), jnp.float32)

    def decode_query(self, cache, obs):
        return self._at(cache), cache

    def decode_transition(self, cache, obs, action, reward, next_obs):
        return self._at(cache + 1), cache + 1

    def _at(self, i):
        mean = jnp.stack([i, -i], -1) / 100
        return ModelOutput(mean, -1.0 - jnp.stack([i, i + 0.5], -1), {})


def test_dpt_gathers_mean_and_log_std_of_the_same_position(env):
    n, count = 6, jnp.asarray([0, 3, 6], jnp.int32)
    ctx = Context(
        obs=jnp.zeros((3, n, 2)),
        action=jnp.zeros((3, n, 2)),
        reward=jnp.zeros((3, n)),
        next_obs=jnp.zeros((3, n, 2)),
        count=count,
    )
    agent = DPTModelAgent(PositionDPT(), env, context=ctx, context_update="none")
    state = agent.init(_keys(3), None)
    scores = np.asarray(agent.scores(state, jnp.zeros((3, 2)), None, None))
    i = np.asarray(count, np.float32)
    assert scores.shape == (3, 2, 2)
    np.testing.assert_allclose(scores[:, 0], np.stack([i, -i], -1) / 100)
    np.testing.assert_allclose(scores[:, 1], -1.0 - np.stack([i, i + 0.5], -1))
    greedy = agent.select(_keys(3), jnp.asarray(scores), True)
    np.testing.assert_allclose(greedy, np.clip(scores[:, 0], -0.1, 0.1))
    # the cached bandit agent keeps the Gaussian of its next pull alike
    cached = DPTCachedModelAgent(PositionDPT(), env, context_size=4)
    state = _started(cached, 3)
    state = cached.update(state, _step([0.0, 0.0, 0.0]))
    scores = np.asarray(cached.scores(state, None, None, None))
    np.testing.assert_allclose(scores[:, 0], np.broadcast_to([0.01, -0.01], (3, 2)))
    np.testing.assert_allclose(scores[:, 1], np.broadcast_to([-2.0, -2.5], (3, 2)))


@pytest.mark.parametrize("head", ["gaussian", "mse"])
@pytest.mark.long
def test_decision_model_agent_acts_on_its_gaussian(head):
    """A real (tiny) decision model on Point-Robot: greedy is its mean;
    sampling draws from its std (a Gaussian head) or is the mean (MSE).
    Bounds wide enough that the random model's actions are not clipped."""
    from model_factory import make_model

    from agentrl.models import ModelConfig

    cfg = ModelConfig(
        obs_size=2,
        action_size=2,
        obs_kind="continuous",
        action_kind="continuous",
        head=head,
        num_layers=1,
        num_heads=1,
        d_model=8,
        d_ff=16,
        max_steps=8,
    )
    model = make_model(cfg)
    env = envs.make("point_robot", max_action=1e3)
    config = types.SimpleNamespace(
        model=types.SimpleNamespace(max_steps=8), eval=EvalConfig(acting="sample")
    )
    obs = jax.random.uniform(jax.random.key(3), (4, 2), minval=-1.0, maxval=1.0)
    out, _ = model.decode(
        model.init_cache(4, 8), obs, jnp.zeros((4, 2)), jnp.zeros((4,))
    )
    mean = np.asarray(out.action)
    assert np.abs(mean).max() < 1e3  # nothing clipped

    def act(rule):
        config.eval = EvalConfig(acting=rule)
        agent = rolling_cache_agent(model, env, config)
        state = agent.start(agent.init(_keys(4, 7), None), obs)
        return np.asarray(agent.act(_keys(4), state, obs, None, None))

    np.testing.assert_allclose(act("greedy"), mean, rtol=1e-5, atol=1e-6)
    if head == "mse":
        np.testing.assert_array_equal(act("sample"), act("greedy"))
        return
    std = np.exp(np.asarray(out.log_std))
    noise = np.asarray(jax.vmap(lambda k: jax.random.normal(k, (2,)))(_keys(4)))
    want = mean + std * noise
    np.testing.assert_allclose(act("sample"), want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(act("sample"), act("greedy"))
