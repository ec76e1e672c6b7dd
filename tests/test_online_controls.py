"""In-context-learning controls on the online learners (RL², transformer PPO).

The controls wrap the agent an algorithm's ``make_agent`` builds, so they
must change what *that* agent reads: RL²'s input (the previous reward fed
to its GRU each step), transformer PPO's KV cache (the reward in each
token). Each online agent runs under a control on a two-armed bandit whose
arms pay 1 or 0 (deterministic), with perturbed random weights, and is
checked against a replay of the plain agent:

- ``zero_rewards``: the controlled agent ends in exactly the state the
  plain agent reaches when shown the same actions with every reward zeroed
  (and not the state the true, non-zero rewards give);
- ``shuffle_rewards``: on a bandit paying 0 or 1 at random, the rewards the
  agent is shown (recorded by a pass-through wrapper) are not the paid
  sequence, and its state is the replay of the shown ones;
- ``empty_context``: the agent's state is never advanced (the fresh state
  every step) and every action is the one a fresh agent started on that
  step's observation takes.

No compilation of a trainer: the weights are initialised, never trained.
"""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_online_rl2 import FlipBandit, small_shape
from test_online_transformer import make_trainer

from agentrl.agents.agent import Step, run_batched_agent
from agentrl.algos import RL2, TransformerPPO
from agentrl.envs.bandits import BernoulliBandit
from agentrl.evaluate.controls import ControlledAgent, controls_for
from agentrl.online.agent import RL2Agent
from agentrl.online.ppo import TrialPPO

TASKS, STEPS = 3, 8


def rl2_agent():
    env = FlipBandit(num_arms=2, horizon=4)
    trainer = TrialPPO(env, small_shape(trial_episodes=2), env.sample_params)
    weights = trainer.core.init(jax.random.key(1))
    weights = jax.tree.map(
        lambda w: w + 0.5 * jax.random.normal(jax.random.key(5), w.shape), weights
    )
    return env, RL2Agent(weights, trainer.core, env, greedy=True)


def transformer_agent():
    trainer = make_trainer(update_every=8, trial=STEPS)
    env = trainer.env
    model = trainer.model(trainer._init_params(jax.random.key(4)))
    config = types.SimpleNamespace(
        model=types.SimpleNamespace(max_steps=STEPS),
        eval=types.SimpleNamespace(acting="greedy", temperature=1.0),
    )
    # the algorithm's own acting agent (AD's rolling KV cache)
    return env, TransformerPPO().make_agent(model, env, STEPS, config)


AGENTS = {"rl2": rl2_agent, "transformer_ppo": transformer_agent}


class Online:
    """An online agent, its tasks and its replay (compiled once per agent)."""

    def __init__(self, name):
        self.env, self.agent = AGENTS[name]()
        keys = jax.random.split(jax.random.key(0), TASKS)
        self.params = jax.vmap(self.env.sample_params)(keys)
        self.replay = jax.jit(self._replay)

    def fresh(self):
        return self.agent.init(jax.random.split(jax.random.key(1), TASKS), self.params)

    def run(self, control):
        agent = ControlledAgent(self.agent, control, STEPS)
        return run_batched_agent(self.env, agent, self.params, jax.random.key(1), STEPS)

    def _replay(self, obs, action, rewards, terminated, truncated):
        """The plain agent's state after these steps, shown ``rewards``."""
        agent = self.agent

        def update(state, xs):
            a, r, te, tr = xs
            return agent.update(state, Step(obs, a, r, obs, te, tr, obs)), None

        xs = jax.tree.map(
            lambda x: jnp.swapaxes(x, 0, 1), (action, rewards, terminated, truncated)
        )
        return jax.lax.scan(update, agent.start(self.fresh(), obs), xs)[0]

    def replayed(self, hist, rewards):
        # a bandit's observation never changes: it is every step's next one
        obs = hist.obs[:, 0]
        return self.replay(obs, hist.action, rewards, hist.terminated, hist.truncated)


@pytest.fixture(scope="module", params=list(AGENTS))
def online(request):
    return Online(request.param)


def same(a, b):
    return all(
        np.allclose(x, y, rtol=1e-5, atol=1e-6)
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


@pytest.mark.long
def test_zero_rewards_reach_the_online_agents_inputs(online):
    hist, state = online.run("zero_rewards")
    assert np.asarray(hist.reward).sum() > 0  # the env still pays
    zeroed = online.replayed(hist, jnp.zeros_like(hist.reward))
    assert same(state.inner, zeroed)
    # and the true rewards would have left the agent somewhere else
    assert not same(state.inner, online.replayed(hist, hist.reward))


class Recording:
    """Passes everything to ``agent`` and records the rewards it is shown."""

    batched = True

    def __init__(self, agent):
        self.agent = agent

    def init(self, key, params):
        shown = jnp.zeros((key.shape[0], STEPS), jnp.float32)
        return self.agent.init(key, params), shown, jnp.int32(0)

    def start(self, state, obs):
        return self.agent.start(state[0], obs), *state[1:]

    def act(self, key, state, obs, env_state, params):
        return self.agent.act(key, state[0], obs, env_state, params)

    def update(self, state, step):
        inner, shown, t = state
        shown = shown.at[:, t].set(step.reward)
        return self.agent.update(inner, step), shown, t + 1


@pytest.mark.long
def test_shuffled_rewards_reach_the_online_agents_inputs(online):
    """On a bandit paying 0 or 1 at random, the agent is shown rewards in
    another order than paid, and its state is the one they give."""
    env = BernoulliBandit(num_arms=2, horizon=4)  # the agents' spaces
    keys = jax.random.split(jax.random.key(2), TASKS)
    params = jax.vmap(env.sample_params)(keys)
    agent = ControlledAgent(Recording(online.agent), "shuffle_rewards", STEPS)
    hist, state = run_batched_agent(env, agent, params, jax.random.key(3), STEPS)
    inner, shown, _ = state.inner
    assert not np.array_equal(shown, hist.reward)  # the order is broken
    assert same(inner, online.replayed(hist, shown))
    assert not same(inner, online.replayed(hist, hist.reward))


def test_empty_context_acts_from_a_fresh_state_every_step(online):
    agent = online.agent
    hist, state = online.run("empty_context")
    fresh = online.fresh()
    assert same(state.inner, fresh)  # never advanced: no hidden state, no cache
    obs = hist.obs[:, 0]
    started = jax.jit(agent.start)(fresh, obs)
    first = np.asarray(agent.act(None, started, obs, None, online.params))
    np.testing.assert_array_equal(hist.action, np.repeat(first[:, None], STEPS, 1))
    # with its context the agent's scores move off the fresh ones
    read = online.replayed(hist, hist.reward)
    assert not np.allclose(
        agent.scores(read, obs, None, None),
        agent.scores(started, obs, None, None),
        atol=1e-4,
    )


def test_expert_distillation_needs_learning_histories():
    from agentrl.algos import AD, DPT
    from agentrl.train.config import DataConfig

    def config(algo, source):  # controls_for reads only .algo and .data
        return types.SimpleNamespace(algo=algo, data=DataConfig(source=source))

    online = controls_for(config(RL2(), "q_learning"))
    assert online == controls_for(config(TransformerPPO(), "q_learning"))
    assert "expert_distillation" not in online
    assert "expert_distillation" in controls_for(config(AD(), "q_learning"))
    assert "expert_distillation" in controls_for(config(AD(), "noisy_oracle"))
    # roll-ins do not learn: their last episodes are no expert
    assert controls_for(config(DPT(), "dpt_rollin")) == online
    assert controls_for(config(AD(), "random")) == online


def test_a_dataset_read_from_disk_decides_by_the_source_it_records(
    tmp_path, darkroom_dataset
):
    """With ``data.path`` the run distills an existing dataset: its recorded
    source, not ``data.source`` (then only a default), decides whether the
    histories learn; a source outside the registry (a published dataset)
    counts as learning histories."""
    from agentrl import envs
    from agentrl.algos import AD
    from agentrl.data import write_dataset
    from agentrl.sources import source_histories
    from agentrl.train.config import DataConfig

    env = envs.make("darkroom")
    rollin = write_dataset(
        tmp_path / "random", env, source_histories("random", env),
        num_tasks=2, num_episodes=2, env_name="darkroom",
    )  # fmt: skip
    published = write_dataset(
        tmp_path / "published", env, source_histories("q_learning", env),
        num_tasks=2, num_episodes=2, env_name="darkroom",
        source={"name": "someones-ppo-histories", "settings": {}},
    )  # fmt: skip

    def config(path, source="q_learning"):
        data = DataConfig(source=source, path=str(path))
        return types.SimpleNamespace(algo=AD(), data=data)

    assert "expert_distillation" not in controls_for(config(rollin))
    assert "expert_distillation" in controls_for(config(darkroom_dataset, "random"))
    assert "expert_distillation" in controls_for(config(published, "random"))
    # a path that is gone: the config's own name
    assert "expert_distillation" not in controls_for(
        config(tmp_path / "gone", "random")
    )


@pytest.mark.long
def test_a_control_goes_inside_the_acting_rule():
    """Under ``sample_then_greedy`` the rule must still see the paid rewards
    (and turn greedy after the first), while the model reads the controlled
    ones: the control changes the context only, not the acting rule."""
    from agentrl.agents.acting import RuleState, SampleThenGreedy
    from agentrl.evaluate.controls import controlled_agent

    online = Online("transformer_ppo")
    rule = SampleThenGreedy(online.agent)
    agent = controlled_agent(rule, "zero_rewards", STEPS)
    assert isinstance(agent, SampleThenGreedy)
    hist, state = run_batched_agent(
        online.env, agent, online.params, jax.random.key(1), STEPS
    )
    assert isinstance(state, RuleState)
    paid = np.asarray(hist.reward).sum(axis=1) > 0
    assert paid.any()
    np.testing.assert_array_equal(np.asarray(state.rewarded), paid)
    zeroed = online.replayed(hist, jnp.zeros_like(hist.reward))
    assert same(state.inner.inner, zeroed)
