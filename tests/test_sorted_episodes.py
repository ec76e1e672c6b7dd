"""T2MIR-AD's acting context: the best past episodes by ascending return.

The agent (one batched state, a KV cache prefilled at each episode's end)
is held to a plain reference of T2MIR's ``evaluate_latest`` buffer written
here apart from it:
after each episode append it, drop the first when over the limit, sort by
return (Python's stable sort: ties keep the order kept, the newest last);
at every step one forward pass over exactly ``kept episodes ++ the current
episode so far``, no padding. The agent acts greedily, so each step's
action must be the reference's argmax.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from model_factory import make_model
from test_models_transformer import forward, small

from agentrl import envs
from agentrl.agents.agent import Step
from agentrl.agents.sorted_episodes import SortedEpisodesAgent
from agentrl.algos import AD

H, KEEP, EPISODES, TASKS = 4, 2, 7, 3


def _reference_scores(model, obs, action, reward):
    """``[step, B, A]`` scores of each step under T2MIR's buffer rule (one
    pass over exactly the context), and whether the sort ever put the kept
    episodes out of the order played."""
    kept, reordered, out = [], False, []
    for e in range(EPISODES):
        for t in range(H):
            ctx = [s for k in kept for s in range(k * H, k * H + H)]
            ctx += list(range(e * H, e * H + t + 1))
            out.append(
                forward(model, obs[:, ctx], action[:, ctx], reward[:, ctx]).action[
                    :, -1
                ]
            )
        kept.append(e)
        if len(kept) > KEEP:
            kept.pop(0)
        # one order for every row: the test's rewards are the same in each
        kept.sort(key=lambda k: float(reward[0, k * H : k * H + H].sum()))
        reordered |= kept != sorted(kept)
    return np.stack(out), reordered


@pytest.mark.long
def test_the_agent_acts_on_its_best_past_episodes_sorted_by_return():
    env = envs.make("darkroom", size=3, horizon=H)
    cfg = small(obs_size=9, action_size=5, max_steps=(KEEP + 1) * H)
    model = make_model(dataclasses.replace(cfg, attention="reference"), 3)
    rng = np.random.default_rng(0)
    n = EPISODES * H
    obs = jnp.asarray(rng.integers(0, 9, (TASKS, n + 1)), jnp.int32)
    action = jnp.asarray(rng.integers(0, 5, (TASKS, n)), jnp.int32)
    # 0/1 rewards, the same for every task: returns 0..4 with ties
    reward = jnp.asarray(np.tile(rng.integers(0, 2, n), (TASKS, 1)), jnp.float32)
    want, reordered = _reference_scores(model, obs[:, :n], action, reward)
    assert reordered  # the sort is exercised, not only the order played
    agent = SortedEpisodesAgent(model, env, KEEP + 1)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(1), TASKS))
    state = agent.start(
        agent.init(jax.random.split(jax.random.key(2), TASKS), params), obs[:, 0]
    )
    update = jax.jit(agent.update)
    for s in range(n):
        np.testing.assert_allclose(
            state.scores, want[s], atol=1e-5, err_msg=f"step {s}"
        )
        end = jnp.full((TASKS,), s % H == H - 1)
        step = Step(
            obs[:, s],
            action[:, s],
            reward[:, s],
            obs[:, s + 1],
            end & False,
            end,
            obs[:, s + 1],
        )
        state = update(state, step)


def test_ad_names_the_eval_context_it_does_not_know():
    with pytest.raises(ValueError, match="algo.eval_context must be one of"):
        AD(eval_context="best")
    with pytest.raises(ValueError, match="algo.episode_window='subset'.*window_start"):
        AD(episode_window="subset")  # AD's default window starts anywhere


def test_the_sorted_context_needs_the_step_layout_before_anything_compiles():
    from agentrl.train.experiments import load_experiment

    config = load_experiment("ad_darkroom", "smoke")
    sorted_ad = dataclasses.replace(
        config.algo, window_start="episode", eval_context="sorted_episodes"
    )
    dataclasses.replace(config, algo=sorted_ad)  # the step layout: accepted
    sar = dataclasses.replace(config.model, token_layout="sar")
    with pytest.raises(ValueError, match="eval_context='sorted_episodes' needs model"):
        dataclasses.replace(config, algo=sorted_ad, model=sar)
