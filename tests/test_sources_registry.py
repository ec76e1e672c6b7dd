"""The uniform source API: validation before compiling, shapes, determinism."""

import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs
from agentrl.history import History
from agentrl.sources import bandits, registry, source_histories
from agentrl.sources.registry import applicable_sources, generate, source_names


@pytest.fixture(scope="module")
def room():
    env = envs.make("darkroom", size=5, horizon=8)
    ids = jnp.arange(6)
    return env, jax.vmap(env.params_for_task)(ids), ids


def test_all_issue_sources_are_registered():
    want = {"ucb", "thompson", "epsilon_greedy", "random", "q_learning", "ppo"}
    assert want | {"noisy_oracle", "dpt_rollin"} <= set(source_names())
    assert set(applicable_sources(envs.make("gaussian_bandit"))) >= {
        "ucb",
        "thompson",
        "epsilon_greedy",
        "random",
        "dpt_rollin",
    }
    assert "ucb" not in applicable_sources(envs.make("darkroom"))
    assert "q_learning" not in applicable_sources(envs.make("gaussian_bandit"))


@pytest.mark.parametrize(
    "source, settings, match",
    [
        ("nope", {}, "unknown source 'nope'; registered: .*q_learning, random"),
        ("ucb", {}, "does not apply to DarkRoom: it needs a bandit"),
        ("q_learning", {"lr": 0.1}, r"unknown setting\(s\) \['lr'\].*learning_rate"),
        ("q_learning", {"learning_rate": 2.0}, "`learning_rate` must be a number in"),
        ("noisy_oracle", {"epsilon_end": "x"}, "`epsilon_end` must be a number"),
    ],
)
def test_bad_input_fails_before_compiling(room, monkeypatch, source, settings, match):
    env, params, ids = room
    monkeypatch.setattr(registry, "_run", None)  # calling it would crash
    with pytest.raises(ValueError, match=match):
        generate(source, env, params, jax.random.key(0), 2, ids, **settings)


def test_bad_sizes(room, monkeypatch):
    env, params, ids = room
    monkeypatch.setattr(registry, "_run", None)
    with pytest.raises(ValueError, match="`num_episodes` must be an integer >= 1"):
        generate("random", env, params, jax.random.key(0), 0)
    with pytest.raises(ValueError, match=r"`task_id` must have shape \[6\]"):
        generate("random", env, params, jax.random.key(0), 1, jnp.arange(3))
    with pytest.raises(ValueError, match="leading task axis"):
        generate("random", env, env.default_params, jax.random.key(0), 1)
    bandit = envs.make("gaussian_bandit")
    with pytest.raises(ValueError, match="`posterior` must be one of"):
        generate("thompson", bandit, None, jax.random.key(0), 1, posterior="beta")


@pytest.mark.parametrize(
    "source", ["random", "q_learning", "noisy_oracle", "dpt_rollin"]
)
def test_history_shapes_and_determinism(room, source):
    env, params, ids = room
    a = generate(source, env, params, jax.random.key(3), 4, ids)
    b = generate(source, env, params, jax.random.key(3), 4, ids)
    c = generate(source, env, params, jax.random.key(4), 4, ids)
    assert isinstance(a, History)
    assert a.obs.shape == (6, 4 * 8) and a.action.dtype == jnp.int32
    assert a.optimal_action.shape == (6, 32)
    np.testing.assert_array_equal(a.task_id, ids)
    np.testing.assert_array_equal(a.episode[0], np.repeat(np.arange(4), 8))
    assert int(a.truncated.sum()) == 6 * 4
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.action, c.action)


def test_ppo_dispatches_lazily(room, monkeypatch):
    env, params, ids = room
    calls = {}

    def fake_generate_ppo(env, params, key, num_episodes, **settings):
        calls["settings"] = settings
        return generate("random", env, params, key, num_episodes)

    module = types.ModuleType("agentrl.sources.ppo")
    module.generate_ppo = fake_generate_ppo
    monkeypatch.setitem(sys.modules, "agentrl.sources.ppo", module)
    h = generate("ppo", env, params, jax.random.key(0), 2, ids, total_steps=10)
    assert calls["settings"] == {"total_steps": 10}
    np.testing.assert_array_equal(h.task_id, ids)  # ids recorded by the registry
    monkeypatch.setitem(sys.modules, "agentrl.sources.ppo", types.ModuleType("x"))
    with pytest.raises(ValueError, match="has no generate_ppo"):
        generate("ppo", env, params, jax.random.key(0), 2, ids)
    monkeypatch.setitem(sys.modules, "agentrl.sources.ppo", None)
    with pytest.raises(ValueError, match="source 'ppo' is not available"):
        generate("ppo", env, params, jax.random.key(0), 2, ids)


@pytest.mark.long
def test_task_blocks_give_the_same_histories(room, monkeypatch):
    env, params, ids = room
    whole = generate("q_learning", env, params, jax.random.key(2), 3, ids)
    monkeypatch.setattr(registry, "TASK_BLOCK", 4)  # 6 tasks: a block and a rest
    blocked = generate("q_learning", env, params, jax.random.key(2), 3, ids)
    for x, y in zip(jax.tree.leaves(whole), jax.tree.leaves(blocked), strict=True):
        np.testing.assert_array_equal(x, y)


def test_a_source_that_makes_its_own_histories(room, monkeypatch):
    env, params, ids = room
    calls = []

    def histories(env, params, key, num_episodes, task_id, scale):
        calls.append(scale)
        history = generate("random", env, params, key, num_episodes, task_id)
        return history.replace(reward=history.reward * scale)

    registry.register_source(
        "scaled",
        description="random, rewards scaled",
        defaults={"scale": 2.0},
        histories=histories,
    )
    try:
        h = generate("scaled", env, params, jax.random.key(1), 2, ids, scale=3.0)
        plain = generate("random", env, params, jax.random.key(1), 2, ids)
        assert calls == [3.0]
        np.testing.assert_array_equal(h.reward, 3.0 * plain.reward)
        with pytest.raises(ValueError, match="is not an Agent"):
            registry.make_agent("scaled", env, 2)
        assert registry.SOURCES.module_of("scaled") == __name__
    finally:
        registry.SOURCES.unregister("scaled")


def test_register_source_checks_and_refuses_a_taken_name():
    with pytest.raises(ValueError, match="needs `build` or `histories`"):
        registry.register_source("nothing", description="no way to run")
    assert "nothing" not in registry.SOURCES
    # this module is not the one that registered "ucb": an error naming both
    with pytest.raises(ValueError, match="'ucb' is already registered to "):
        registry.register_source("ucb", description="mine", build=lambda e, n: None)
    assert registry.SOURCES["ucb"].description.startswith("UCB1")


def test_thompson_posterior_follows_the_reward_distribution():
    bernoulli = envs.make("bernoulli_bandit")
    gaussian = envs.make("gaussian_bandit")
    assert bernoulli.reward_distribution == "bernoulli"
    assert gaussian.reward_distribution == "gaussian"
    assert isinstance(
        registry.make_agent("thompson", bernoulli, 1), bandits.BernoulliThompson
    )
    agent = registry.make_agent("thompson", gaussian, 1)
    assert isinstance(agent, bandits.GaussianThompson)
    assert agent.noise_variance == pytest.approx(0.3)


def test_baseline_flags():
    import agentrl.train.learned  # noqa: F401  (registers learned_learner)

    flagged = {n for n, s in registry.SOURCES.items() if s.baseline}
    assert flagged == {
        "ucb",
        "ucb_dpt",
        "thompson",
        "epsilon_greedy",
        "q_learning",
        "noisy_oracle",
        "learned_learner",
    }
    # every baseline is an agent
    assert all(registry.SOURCES[n].build is not None for n in flagged)


def test_source_histories_checks_settings_before_compiling(room, monkeypatch):
    env, params, ids = room
    monkeypatch.setattr(registry, "_run", None)  # calling it would crash
    with pytest.raises(ValueError, match="`learning_rate` must be a number"):
        source_histories("q_learning", env, learning_rate=2.0)
    with pytest.raises(ValueError, match="does not apply to DarkRoom"):
        source_histories("ucb", env)
    q = source_histories("q_learning", env, discount=0.5)
    assert q.source["name"] == "q_learning"
    assert q.source["settings"]["discount"] == 0.5
    assert q.source["settings"]["learning_rate"] == 0.8  # defaults filled in
