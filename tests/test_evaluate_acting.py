"""Acting rules (eval.acting): sample, greedy, sample until rewarded then
greedy, sample above the median logit (RA-DT's)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl.agents.acting import SampleAboveMedian, SampleThenGreedy, acting_agent
from agentrl.agents.agent import Step
from agentrl.envs.spaces import Discrete
from agentrl.train.config import EvalConfig


class _Fake:
    """Greedy: action 1; sampling: action 0; state counts updates per row."""

    batched = True

    def __init__(self, greedy: bool):
        self.greedy = greedy

    def init(self, key, params):
        return jnp.zeros((key.shape[0],), jnp.int32)

    def scores(self, state, obs, env_state, params):
        return jnp.zeros((*state.shape, 2))

    def select(self, key, scores, greedy):
        return jnp.full(scores.shape[:1], 1 if greedy else 0, jnp.int32)

    def act(self, key, state, obs, env_state, params):
        return self.select(key, self.scores(state, obs, env_state, params), self.greedy)

    def update(self, state, step):
        return state + 1


def _step(reward):
    r = jnp.asarray(reward, jnp.float32)
    z = jnp.zeros(r.shape)
    return Step(z, z.astype(jnp.int32), r, z, z > 1, z > 1, z)


def test_sample_then_greedy_switches_per_task_on_first_positive_reward():
    agent = acting_agent(_Fake, "sample_then_greedy")
    assert isinstance(agent, SampleThenGreedy)
    init_key, *act_keys = jax.random.split(jax.random.key(0), 5)
    state = agent.init(jax.random.split(init_key, 3), None)
    acts = iter(act_keys)  # a fresh key each act (jax_debug_key_reuse)
    act = lambda s: np.asarray(agent.act(next(acts), s, None, None, None))  # noqa: E731
    assert act(state).tolist() == [0, 0, 0]
    state = agent.update(state, _step([0.0, 1.0, -1.0]))
    assert act(state).tolist() == [0, 1, 0]  # a negative reward is no success
    state = agent.update(state, _step([0.0, 0.0, 0.5]))
    assert act(state).tolist() == [0, 1, 1]  # and it stays greedy once found
    state = agent.update(state, _step([0.0, 0.0, 0.0]))
    assert act(state).tolist() == [0, 1, 1]
    assert np.asarray(state.inner).tolist() == [3, 3, 3]  # one shared state
    assert acting_agent(_Fake, "greedy").greedy
    assert not acting_agent(_Fake, "sample").greedy
    with pytest.raises(ValueError, match="eval.acting must be one of"):
        acting_agent(_Fake, "argmax")


def test_eval_config_acting_field():
    assert EvalConfig(acting="sample_then_greedy").acting == "sample_then_greedy"
    with pytest.raises(ValueError, match="eval.acting must be one of"):
        EvalConfig(acting="argmax")


def _algo(name):
    from agentrl.algos import AD, DT, TransformerPPO

    # DT's target return only shifts its tokens' return-to-go feature, which
    # the fake model ignores
    if name == "dt":
        return DT(target_return=1.0)
    return AD() if name == "ad" else TransformerPPO()


@pytest.mark.parametrize("algo", ["ad", "dt", "transformer_ppo"])
def test_agent_samples_until_rewarded_then_repeats_the_argmax(algo):
    """make_agent honours eval.acting (AD and DT), on a model that favours
    the last rewarded arm (weakly: sampling often leaves it)."""
    import types

    from test_evaluate_fakes import RepeatRewardedAD

    from agentrl import envs
    from agentrl.agents.agent import run_batched_agent

    env = envs.make("bernoulli_bandit", num_arms=5, horizon=40)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(1), 64))
    model = RepeatRewardedAD(5, strength=1.0)

    @functools.cache
    def actions(rule, key=2):
        config = types.SimpleNamespace(
            model=types.SimpleNamespace(max_steps=40), eval=EvalConfig(acting=rule)
        )
        agent = _algo(algo).make_agent(model, env, 40, config)
        run = jax.jit(lambda p, k: run_batched_agent(env, agent, p, k, 40)[0])
        h = run(params, jax.random.key(key))
        return np.asarray(h.action), np.asarray(h.reward)

    def repeats_after_first_reward(action, reward):
        """Share of steps after a row's first reward that repeat its last
        rewarded action (the model's argmax there)."""
        hits = total = 0
        for a, r in zip(action, reward, strict=True):
            best = None
            for t in range(len(a)):
                if best is not None:
                    hits, total = hits + (a[t] == best), total + 1
                if r[t] > 0:
                    best = a[t]
        return hits / total

    then_greedy = repeats_after_first_reward(*actions("sample_then_greedy"))
    sampled = repeats_after_first_reward(*actions("sample"))
    assert then_greedy == 1.0
    assert sampled < 0.6  # softmax(1 vs 0 over 5 arms) picks it ~40%
    # greedy: the argmax, whatever the key (all-zero logits before any reward)
    greedy, _ = actions("greedy")
    np.testing.assert_array_equal(greedy, actions("greedy", key=3)[0])
    assert repeats_after_first_reward(*actions("greedy")) == 1.0
    # sample_then_greedy samples exactly like "sample" (same keys, same
    # scores) up to each task's first positive reward
    (a_stg, r_stg), (a_s, _) = actions("sample_then_greedy"), actions("sample")
    first = np.argmax(r_stg > 0, axis=1)
    for row in range(len(a_s)):
        end = first[row] + 1 if (r_stg[row] > 0).any() else a_s.shape[1]
        np.testing.assert_array_equal(a_stg[row, :end], a_s[row, :end])


class _CountingDPT:
    """Counts ``predict_query`` calls (at trace time) of a fake DPT model."""

    def __init__(self, num_actions):
        from test_evaluate_fakes import EmpiricalMeanDPT

        self.model, self.calls = EmpiricalMeanDPT(num_actions), 0

    def predict_query(self, *args):
        self.calls += 1
        return self.model.predict_query(*args)


@pytest.mark.parametrize(
    "rule", ["sample", "greedy", "sample_then_greedy", "sample_above_median"]
)
def test_every_acting_rule_calls_the_model_once_per_step(rule):
    """One model application per step under every rule (the DPT agent calls
    its model in ``act``; the scan body is traced once)."""
    import types

    from agentrl import envs
    from agentrl.agents.agent import run_batched_agent
    from agentrl.algos import DPT

    env = envs.make("bernoulli_bandit", num_arms=3, horizon=6)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(1), 2))
    model = _CountingDPT(3)
    config = types.SimpleNamespace(
        model=types.SimpleNamespace(max_steps=7),
        eval=EvalConfig(acting=rule, temperature=1.0),
    )
    agent = DPT(context_size=6).make_agent(model, env, 6, config)
    jax.eval_shape(
        lambda p, k: run_batched_agent(env, agent, p, k, 6), params, jax.random.key(0)
    )
    assert model.calls == 1


@pytest.mark.long
def test_rl2_agent_honours_each_acting_rule():
    """RL²'s GRU agent has scores/select: each rule runs on one core step."""
    from test_online_rl2 import FlipBandit, small_shape

    from agentrl.agents.agent import run_batched_agent
    from agentrl.online.agent import RL2Agent
    from agentrl.online.ppo import TrialPPO

    env = FlipBandit(num_arms=2, horizon=3)
    trainer = TrialPPO(env, small_shape(trial_episodes=2), env.sample_params)
    weights = jax.tree.map(
        lambda w: w + 0.5 * jax.random.normal(jax.random.key(5), w.shape),
        trainer.core.init(jax.random.key(1)),
    )
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(2), 32))

    def run(rule, key):
        agent = acting_agent(
            lambda g: RL2Agent(weights, trainer.core, env, greedy=g), rule
        )
        h = run_batched_agent(env, agent, params, jax.random.key(key), 6)[0]
        return np.asarray(h.action), np.asarray(h.reward)

    greedy = run("greedy", 3)[0]
    np.testing.assert_array_equal(greedy, run("greedy", 4)[0])
    sampled = run("sample", 3)[0]
    assert (sampled != greedy).any()
    a, r = run("sample_then_greedy", 3)
    for row in range(len(a)):
        end = np.argmax(r[row] > 0) + 1 if (r[row] > 0).any() else a.shape[1]
        np.testing.assert_array_equal(a[row, :end], sampled[row, :end])


def _reference_keep(logits):
    """ml-jku/RA-DT ``sample_from_logits(top_p=0.5)``'s kept actions, in
    numpy: above the row's 0.5 quantile (linear, as ``torch.quantile``),
    all of them where that quantile is the row's largest logit."""
    median = np.quantile(logits, 0.5, axis=-1, keepdims=True)
    top = logits.max(axis=-1, keepdims=True)
    return np.where(median == top, True, logits > median)


@pytest.mark.parametrize("actions", [2, 3, 5, 6])
def test_above_median_keeps_the_reference_rules_actions(actions):
    from agentrl.agents.acting import above_median
    from agentrl.envs.spaces import Discrete

    rng = np.random.default_rng(actions)
    logits = rng.normal(size=(200, actions)).astype(np.float32)
    logits[:20] = np.round(logits[:20])  # ties, some at the top
    logits[20:25] = 1.0  # all equal: nothing above the median
    kept = np.isfinite(np.asarray(above_median(jnp.asarray(logits), Discrete(actions))))
    np.testing.assert_array_equal(kept, _reference_keep(logits))
    assert kept.any(axis=-1).all()
    if actions == 5:  # the two most likely of Dark Room's 5, without ties
        assert (kept[25:].sum(-1) == 2).all()


def test_sample_above_median_draws_the_kept_actions_by_their_softmax():
    """Over 20,000 rows, logits [3, 2, 1, 0, -1]: actions 0 and 1 only, in
    the ratio of ``softmax([3, 2])`` (0.731; binomial sd 0.003)."""
    from agentrl.envs.spaces import Discrete

    class Fixed:
        batched, space = True, Discrete(5)

        def init(self, key, params):
            return jnp.zeros((key.shape[0],))

        def scores(self, state, obs, env_state, params):
            row = jnp.asarray([3.0, 2.0, 1.0, 0.0, -1.0])
            return jnp.broadcast_to(row, (*state.shape, 5))

        def select(self, key, scores, greedy):
            from agentrl.agents.model_agents import select_action

            return select_action(key, scores, self.space, greedy, 1.0)

        def act(self, key, state, obs, env_state, params):
            return self.select(key, self.scores(state, obs, env_state, params), False)

        def update(self, state, step):
            return state

    agent = acting_agent(lambda greedy: Fixed(), "sample_above_median")
    n = 20_000
    key_init, key_act = jax.random.split(jax.random.key(0))
    state = agent.init(jax.random.split(key_init, n), None)
    actions = np.asarray(
        agent.act(jax.random.split(key_act, n), state, None, None, None)
    )
    assert set(np.unique(actions)) == {0, 1}
    share = (actions == 0).mean()
    assert abs(share - 1 / (1 + np.exp(-1.0))) < 0.015, share


def test_above_median_leaves_a_gaussians_scores_alone():
    from agentrl.agents.acting import above_median
    from agentrl.envs.spaces import Box

    scores = jax.random.normal(jax.random.key(3), (4, 2, 3))
    np.testing.assert_array_equal(
        np.asarray(above_median(scores, Box(-1.0, 1.0, (3,)))), np.asarray(scores)
    )


def test_a_presets_own_rule_joins_the_candidates_after_the_usual_three():
    from agentrl.evaluate.selection import ACTING_RULES, candidate_rules

    assert candidate_rules("sample_then_greedy") == ACTING_RULES
    rules = candidate_rules("sample_above_median")
    assert list(rules) == [*ACTING_RULES, "sample_above_median"]
    assert rules["sample_above_median"]["acting"] == "sample_above_median"


@pytest.mark.parametrize("name", ["radt_darkroom", "radt_key_to_door"])
def test_ra_dt_presets_act_by_the_references_rule(name):
    from agentrl.train.experiments import load_experiment

    for preset in ("smoke", "cpu", "gpu", "full"):
        assert load_experiment(name, preset).eval.acting == "sample_above_median"


class _Summing(_Fake):
    """:class:`_Fake` whose state is the sum of the rewards it was shown."""

    space = Discrete(2)

    def init(self, key, params):
        return jnp.zeros((key.shape[0],), jnp.float32)

    def update(self, state, step):
        return state + jnp.asarray(step.reward, jnp.float32).reshape(state.shape)


@pytest.mark.parametrize("rule", ["sample_then_greedy", "sample_above_median"])
def test_a_control_goes_inside_every_acting_rule(rule):
    """``controlled_agent`` wraps the model agent inside the rule: under
    ``zero_rewards`` the model agent is shown 0 where the task paid 1."""
    from agentrl.evaluate.controls import ControlledAgent, controlled_agent

    agent = controlled_agent(acting_agent(_Summing, rule), "zero_rewards", 4)
    assert isinstance(agent, (SampleThenGreedy, SampleAboveMedian))
    assert isinstance(agent.agent, ControlledAgent)
    state = agent.init(jax.random.split(jax.random.key(0), 2), None)
    state = agent.update(state, _step(jnp.ones((2,))))
    inner = state.inner if rule == "sample_then_greedy" else state
    np.testing.assert_array_equal(np.asarray(inner.inner), [0.0, 0.0])  # zeroed


@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_discrete_sampling_divides_the_logits_by_the_temperature(temperature):
    """Logits [1, 0] at temperature t: action 0 with probability
    1 / (1 + exp(-1 / t)) (0.881 at t = 0.5, 0.622 at t = 2; binomial sd
    over 20,000 rows <= 0.0035); greedy takes the argmax whatever t."""
    from agentrl.agents.model_agents import select_action

    n = 20_000
    keys = jax.random.split(jax.random.key(0), n)
    logits = jnp.broadcast_to(jnp.asarray([1.0, 0.0]), (n, 2))
    actions = np.asarray(select_action(keys, logits, Discrete(2), False, temperature))
    want = 1.0 / (1.0 + np.exp(-1.0 / temperature))
    assert abs((actions == 0).mean() - want) < 0.015, (actions == 0).mean()
    greedy = select_action(keys, logits, Discrete(2), True, temperature)
    assert (np.asarray(greedy) == 0).all()
