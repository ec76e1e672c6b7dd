"""The agent's ``start`` hook: first-step work once, before the driver's scan.

The model agents decode their first observation in ``start``, so ``update``
inside the scan is one decode with no branch. Held here to the previous
implementation (a first-step ``lax.cond`` in ``scores`` and ``update``, kept
below as the reference) through every wrapper the evaluation runs; every
wrapper must forward ``start``; the compiled decode loop must have no
``conditional`` and no whole-cache copy. RL²'s GRU agent is held to its
own first-step ``lax.cond`` reference the same way. Each model case compiles the
driver twice, so the fast tier checks one layout and the wrappers whose
logic changed; ``make test-long`` runs the rest.
"""

import types
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hlo_tools import cache_shapes, count_conditionals, count_copies
from model_factory import make_model
from test_models_transformer import small

from agentrl import envs
from agentrl.agents.acting import SampleThenGreedy, acting_agent
from agentrl.agents.agent import as_batched, run_agent_on_tasks
from agentrl.agents.context_set import DPTCachedModelAgent
from agentrl.agents.driver import _Recorder, run_batched_agent
from agentrl.agents.model_agents import ModelHandle
from agentrl.agents.rolling import ADModelAgent, rolling_cache_agent
from agentrl.evaluate.agents import per_task
from agentrl.evaluate.controls import CONTEXT_CONTROLS, ControlledAgent
from agentrl.online.agent import RL2Agent
from agentrl.train.config import EvalConfig

ENV = envs.make("darkroom", size=3, horizon=5)
PARAMS = jax.vmap(ENV.sample_params)(jax.random.split(jax.random.key(0), 3))
STEPS, CACHE = 13, 4  # the window rolls


class _CondState(NamedTuple):
    cache: Any
    prev_action: jax.Array
    prev_reward: jax.Array
    scores: jax.Array
    started: jax.Array


class _FirstStepCondAD(ADModelAgent):
    """The reference: the AD agent before ``start`` (first-step ``lax.cond``).

    ``scores`` decodes the first observation without committing it; the
    first ``update`` commits it, then decodes the next token.
    """

    start = None  # no hook: the driver passes the state through

    def init(self, key, params):
        return _CondState(*super().init(key, params), jnp.bool_(False))

    def scores(self, state, obs, env_state, params):
        def first():
            out, _ = self.model.get().decode(
                state.cache, obs, state.prev_action, state.prev_reward
            )
            return out.action.astype(jnp.float32)

        return jax.lax.cond(state.started, lambda: state.scores, first)

    def update(self, state, step):
        model = self.model.get()
        action = jnp.asarray(step.action, self.space.dtype).reshape(
            state.prev_action.shape
        )
        reward = jnp.asarray(step.reward, jnp.float32).reshape(state.prev_reward.shape)

        def later(cache):
            out, cache = model.decode(cache, step.reset_obs, action, reward)
            return out.action.astype(jnp.float32), cache

        def first(cache):
            _, cache = model.decode(
                cache, step.obs, state.prev_action, state.prev_reward
            )
            return later(cache)

        logits, cache = jax.lax.cond(state.started, later, first, state.cache)
        return _CondState(cache, action, reward, logits, jnp.bool_(True))


def _model(layout):
    cfg = small(token_layout=layout, obs_size=9, action_size=5, max_steps=CACHE)
    return ModelHandle(*nnx.split(make_model(cfg, seed=4)))


def _run(agent, key=1, per_task_agent=False):
    if per_task_agent:
        return run_agent_on_tasks(ENV, agent, PARAMS, jax.random.key(key), STEPS)
    run = jax.jit(lambda p, k: run_batched_agent(ENV, agent, p, k, STEPS))
    return run(PARAMS, jax.random.key(key))


def _logits(state):
    while not hasattr(state, "scores"):
        state = state.inner if hasattr(state, "inner") else state[0]
    return state.scores


def _assert_same(new, ref):
    (h, s), (h_ref, s_ref) = new, ref
    np.testing.assert_array_equal(h.action, h_ref.action)
    np.testing.assert_array_equal(h.reward, h_ref.reward)
    np.testing.assert_allclose(_logits(s), _logits(s_ref), rtol=1e-6, atol=1e-6)


LONG = pytest.mark.long


@pytest.mark.long
@pytest.mark.parametrize(
    "layout, greedy",
    [("sar", False), pytest.param("step", False, marks=LONG)]
    + [pytest.param(layout, True, marks=LONG) for layout in ("sar", "step")],
)
def test_ad_agent_equals_the_first_step_cond(layout, greedy):
    model = _model(layout)
    _assert_same(
        _run(ADModelAgent(model, ENV, CACHE, greedy=greedy)),
        _run(_FirstStepCondAD(model, ENV, CACHE, greedy=greedy)),
    )


@pytest.mark.long
@pytest.mark.parametrize(
    "wrap",
    ["sample_then_greedy", "empty_context"]
    + [
        pytest.param(w, marks=LONG)
        for w in ("zero_rewards", "shuffle_rewards", "per_task", "recorder")
    ],
)
def test_wrapped_ad_agent_equals_the_first_step_cond(wrap):
    model = _model("step")
    wrappers = {
        "sample_then_greedy": SampleThenGreedy,
        "per_task": per_task,
        "recorder": lambda a: _Recorder(a, ENV, STEPS),
        **{c: (lambda a, c=c: ControlledAgent(a, c, STEPS)) for c in CONTEXT_CONTROLS},
    }
    new, ref = (
        _run(wrappers[wrap](cls(model, ENV, CACHE)), per_task_agent=wrap == "per_task")
        for cls in (ADModelAgent, _FirstStepCondAD)
    )
    _assert_same(new, ref)


@pytest.mark.long
def test_dt_agent_equals_the_first_step_cond():
    from test_algos_dt import _dt_model_and_config

    env, config, model = _dt_model_and_config()
    params = jax.vmap(env.params_for_task)(jnp.array([3, 12, 20]))
    steps = 2 * env.horizon
    agent = config.algo.make_agent(model, env, steps, config)
    ref = config.algo.make_agent(model, env, steps, config)
    inner = ref.inner
    ref.inner = _FirstStepCondAD(inner.model, env, inner.cache_steps, greedy=True)
    run = lambda a: run_batched_agent(env, a, params, jax.random.key(0), steps)  # noqa: E731
    _assert_same(run(agent), run(ref))


class _Marks:
    """Batched fake: ``start`` stores ``obs + 1``; acts 1 once started, else 0."""

    batched = True

    def init(self, key, params):
        return jnp.zeros(key.shape[:1], jnp.int32)

    def start(self, state, obs):
        return jnp.asarray(obs, jnp.int32) + 1

    def scores(self, state, obs, env_state, params):
        return state

    def select(self, key, scores, greedy):
        return (scores > 0).astype(jnp.int32)

    def act(self, key, state, obs, env_state, params):
        return self.select(key, state, False)

    def update(self, state, step):
        return state


class _MarksOne:
    """The per-task :class:`_Marks` (vmapped by the driver)."""

    def init(self, key, params):
        return jnp.int32(0)

    def start(self, state, obs):
        return jnp.asarray(obs, jnp.int32) + 1

    def act(self, key, state, obs, env_state, params):
        return (state > 0).astype(jnp.int32)

    def update(self, state, step):
        return state


@pytest.mark.parametrize(
    "wrap",
    ["vmapped", "per_task", "sample_then_greedy", *CONTEXT_CONTROLS, "recorder"],
)
def test_every_wrapper_forwards_start(wrap):
    agent = {
        "vmapped": lambda: as_batched(_MarksOne()),
        "per_task": lambda: per_task(_Marks()),
        "sample_then_greedy": lambda: acting_agent(
            lambda greedy: _Marks(), "sample_then_greedy"
        ),
        "recorder": lambda: _Recorder(_Marks(), ENV, STEPS),
        **{
            c: (lambda c=c: ControlledAgent(_Marks(), c, STEPS))
            for c in CONTEXT_CONTROLS
        },
    }[wrap]()
    history, state = run_agent_on_tasks(ENV, agent, PARAMS, jax.random.key(0), STEPS)
    np.testing.assert_array_equal(history.action, 1)  # started before act
    if wrap != "empty_context":  # which keeps a fresh state (acts from obs alone)
        leaf = jax.tree.leaves(state)[0]
        np.testing.assert_array_equal(
            np.asarray(leaf).reshape(-1), np.asarray(history.obs[:, 0]) + 1
        )


@pytest.mark.long
@pytest.mark.parametrize("layout", ["sar", pytest.param("step", marks=LONG)])
def test_decode_loop_has_no_conditional_and_no_cache_copy(layout):
    """What the start hook is for: ``update`` in the scan is one decode."""
    model = _model(layout)
    cache = model.get().init_cache(3, CACHE)

    def hlo(make):
        def run(weights, params, key):
            agent = make(model._replace(weights=weights))
            return run_batched_agent(ENV, agent, params, key, STEPS)[0].action

        lowered = jax.jit(run).lower(model.weights, PARAMS, jax.random.key(1))
        return lowered.compile().as_text()

    config = types.SimpleNamespace(
        model=types.SimpleNamespace(max_steps=CACHE),
        eval=EvalConfig(acting="sample_then_greedy"),
    )
    # the agent under its acting rule's wrapper (AD's, transformer PPO's)
    text = hlo(lambda m: rolling_cache_agent(m, ENV, config))
    assert count_conditionals(text) == 0
    assert count_copies(text, cache_shapes(cache)) == 0
    # the counter sees the reference's first-step conds (so it can fail)
    assert count_conditionals(hlo(lambda m: _FirstStepCondAD(m, ENV, CACHE))) > 0


def test_cached_dpt_loop_has_no_conditional():
    from test_evaluate_dpt_cache import _bandit_and_model

    env, dpt = _bandit_and_model()
    handle = ModelHandle(*nnx.split(dpt))
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 2))

    def run(weights, params, key):
        agent = DPTCachedModelAgent(handle._replace(weights=weights), env, 8)
        return run_batched_agent(env, agent, params, key, 8)[0].action

    text = jax.jit(run).lower(handle.weights, params, jax.random.key(1))
    assert count_conditionals(text.compile().as_text()) == 0


class _CondRL2State(NamedTuple):
    hidden: jax.Array
    out: jax.Array
    started: jax.Array


class _FirstStepCondRL2(RL2Agent):
    """The reference: RL²'s agent before ``start`` (first-step ``lax.cond``)."""

    start = None  # no hook: the driver passes the state through

    def init(self, key, params):
        return _CondRL2State(*super().init(key, params), jnp.bool_(False))

    def scores(self, state, obs, env_state, params):
        first = lambda: self._first(state.hidden, obs)[1]  # noqa: E731
        return jax.lax.cond(state.started, lambda: state.out, first)

    def update(self, state, step):
        first = lambda: self._first(state.hidden, step.obs)[0]  # noqa: E731
        hidden = jax.lax.cond(state.started, lambda: state.hidden, first)
        hidden, out = self._advance(
            hidden, step.reset_obs, step.action, step.reward, step.done
        )
        return _CondRL2State(hidden, out, jnp.bool_(True))


def _rl2(env):
    from test_online_rl2 import small_shape

    from agentrl.online.ppo import TrialPPO

    core = TrialPPO(env, small_shape(trial_episodes=2), env.sample_params).core
    weights = jax.tree.map(  # perturbed so the actions vary over the history
        lambda w: w + 0.5 * jax.random.normal(jax.random.key(5), w.shape),
        core.init(jax.random.key(1)),
    )
    return weights, core


def _rl2_hidden(state):
    while not hasattr(state, "hidden"):
        state = state.inner if hasattr(state, "inner") else state[0]
    return state


@pytest.mark.long
@pytest.mark.parametrize(
    "rule", ["sample_then_greedy", pytest.param("greedy", marks=LONG)]
)
def test_rl2_agent_equals_the_first_step_cond(rule):
    """Bit-identical on a discrete task, through the acting rule's wrapper."""
    weights, core = _rl2(ENV)

    def run(cls):
        agent = acting_agent(lambda g: cls(weights, core, ENV, greedy=g), rule)
        return _run(agent)

    (h, s), (h_ref, s_ref) = run(RL2Agent), run(_FirstStepCondRL2)
    np.testing.assert_array_equal(h.action, h_ref.action)
    np.testing.assert_array_equal(h.reward, h_ref.reward)
    for field in ("hidden", "out"):
        np.testing.assert_array_equal(
            getattr(_rl2_hidden(s), field), getattr(_rl2_hidden(s_ref), field)
        )


@LONG
def test_rl2_agent_equals_the_first_step_cond_on_continuous_actions():
    """Point robot: the first step's input projection sums non-one-hot
    features, compiled outside the loop instead of in the cond's branch, so
    equal to float rounding (a few ulp per step), not bit for bit."""
    env = envs.make("point_robot")
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 3))
    weights, core = _rl2(env)
    h, h_ref = (
        jax.jit(
            lambda p, k, cls=cls: run_batched_agent(
                env, cls(weights, core, env), p, k, STEPS
            )[0]
        )(params, jax.random.key(1))
        for cls in (RL2Agent, _FirstStepCondRL2)
    )
    np.testing.assert_allclose(h.action, h_ref.action, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(h.reward, h_ref.reward, rtol=1e-5, atol=1e-5)


@pytest.mark.long
def test_rl2_loop_has_no_conditional():
    """RL²'s compiled evaluation loop (under its acting rule) has no branch."""
    weights, core = _rl2(ENV)

    def hlo(cls):
        def run(weights, params, key):
            agent = acting_agent(
                lambda g: cls(weights, core, ENV, greedy=g), "sample_then_greedy"
            )
            return run_batched_agent(ENV, agent, params, key, STEPS)[0].action

        lowered = jax.jit(run).lower(weights, PARAMS, jax.random.key(1))
        return lowered.compile().as_text()

    assert count_conditionals(hlo(RL2Agent)) == 0
    assert count_conditionals(hlo(_FirstStepCondRL2)) > 0  # the counter can fail
