"""The passive T-Maze (agentrl.envs.tmaze): the cue, the reward, the episode's
end, and the two reference policies a memory probe is read against."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs
from agentrl.envs.tmaze import DOWN, LEFT, RIGHT, UP, TMaze
from agentrl.prng import key_scan

UP_GOAL, DOWN_GOAL = 1, -1


def _play(env, goal, actions):
    """Step ``actions`` from a reset on side ``goal``: the step outputs."""
    params = env.params_for_goal(goal)
    obs, state = env.reset(jax.random.key(0), params)
    out = {"obs": [np.asarray(obs)], "reward": [], "term": [], "trunc": []}
    step = jax.jit(env.step)
    for a in actions:
        obs, state, reward, term, trunc, _ = step(
            jax.random.key(1), state, jnp.int32(a), params
        )
        out["obs"].append(np.asarray(obs))
        out["reward"].append(float(reward))
        out["term"].append(bool(term))
        out["trunc"].append(bool(trunc))
    return out, state


def _obs_policy_episodes(env, policy, params, key, episodes):
    """Episode returns of an observation-only policy with a memory:
    ``policy(key, obs, memory, first) -> (action, memory)``; ``first`` is
    true on an episode's first step. ``params [task]`` -> ``[task, episodes]``."""

    def one(p, k):
        k_reset, k_steps = jax.random.split(k)
        obs, state = env.reset(k_reset, p)

        def body(carry, kk):
            obs, state, memory, first = carry
            k_act, k_env = jax.random.split(kk)
            action, memory = policy(k_act, obs, memory, first)
            obs, state, reward, term, trunc, _ = env.step(k_env, state, action, p)
            return (obs, state, memory, term | trunc), reward

        carry = (obs, state, jnp.float32(0), jnp.bool_(True))
        steps = episodes * env.horizon
        _, reward = key_scan(body, carry, jax.random.split(k_steps, steps))
        return reward.reshape(episodes, env.horizon).sum(-1)

    tasks = jax.tree.leaves(params)[0].shape[0]
    return np.asarray(jax.jit(jax.vmap(one))(params, jax.random.split(key, tasks)))


def _walk_then_turn(turn):
    """Right until the junction flag, then ``turn(key, memory)``; the memory
    is the cue of the episode's first observation."""

    def policy(key, obs, memory, first):
        memory = jnp.where(first, obs[1], memory)
        at_junction = obs[0] > 0.5
        action = jnp.where(at_junction, turn(key, memory), RIGHT)
        return action.astype(jnp.int32), memory

    return policy


def remembers(key, memory):
    return jnp.where(memory > 0, UP, DOWN)


def memoryless(key, memory):
    return jnp.where(jax.random.bernoulli(key), UP, DOWN)


def _both_sides(env, repeat):
    goals = jnp.tile(jnp.array([UP_GOAL, DOWN_GOAL], jnp.int32), repeat)
    return jax.vmap(env.params_for_goal)(goals)


@pytest.mark.parametrize("length", [1, 4, 30])
def test_the_cue_is_visible_only_at_step_0(length):
    env = TMaze(corridor_length=length)
    for goal in (UP_GOAL, DOWN_GOAL):
        out, _ = _play(env, goal, [RIGHT] * length)
        obs = np.stack(out["obs"])
        np.testing.assert_array_equal(obs[0], [0.0, goal])
        np.testing.assert_array_equal(obs[1:-1], 0.0)  # the corridor
        np.testing.assert_array_equal(obs[-1], [1.0, 0.0])  # the junction
        if length > 3:
            # stay at the start (up, down, left are blocked there): the
            # start cell shows the cue only in the reset observation
            out, state = _play(env, goal, [UP, LEFT, DOWN] + [RIGHT] * (length - 3))
            assert int(state.x) == length - 3
            np.testing.assert_array_equal(np.stack(out["obs"])[1:], 0.0)


@pytest.mark.parametrize("length", [1, 10])
def test_the_right_turn_pays_the_goal_reward_and_the_wrong_one_does_not(length):
    env = TMaze(corridor_length=length)
    for goal in (UP_GOAL, DOWN_GOAL):
        right_turn = UP if goal == UP_GOAL else DOWN
        wrong_turn = DOWN if goal == UP_GOAL else UP
        good, state = _play(env, goal, [RIGHT] * length + [right_turn])
        assert good["reward"] == [0.0] * length + [1.0]
        bad, _ = _play(env, goal, [RIGHT] * length + [wrong_turn])
        assert bad["reward"] == [0.0] * length + [0.0]
        # the last observation before the auto-reset is the goal cell's
        _, before = _play(env, goal, [RIGHT] * length)
        params = env.params_for_goal(goal)
        obs, *_ = env.step_env(None, before, jnp.int32(right_turn), params)
        np.testing.assert_array_equal(np.asarray(obs), [1.0, goal])


def test_penalty_on_every_non_right_action_before_the_last_step():
    env = TMaze(corridor_length=10)
    out, state = _play(env, UP_GOAL, [LEFT, UP, RIGHT, DOWN, RIGHT])
    assert out["reward"] == pytest.approx([-0.1, -0.1, 0.0, -0.1, 0.0])
    assert int(state.x) == 2 and int(state.y) == 0  # blocked moves stay put
    assert TMaze(corridor_length=4, penalty=0.0).penalty == 0.0
    # walking past the junction is blocked; turning late misses the goal
    late, _ = _play(env, UP_GOAL, [LEFT] + [RIGHT] * 10)
    assert late["reward"][-1] == 0.0 and sum(late["reward"]) == pytest.approx(-0.1)


@pytest.mark.parametrize("length", [1, 10, 100])
def test_the_episode_ends_after_corridor_length_plus_one_steps(length):
    env = TMaze(corridor_length=length)
    assert env.horizon == length + 1
    out, state = _play(env, DOWN_GOAL, [RIGHT] * length + [DOWN, RIGHT])
    done = [t or u for t, u in zip(out["term"], out["trunc"], strict=True)]
    assert done == [False] * length + [True, False]
    assert out["term"][length] and out["trunc"][length]  # as the references
    # auto-reset: the step after the end shows the cue again, at the start
    np.testing.assert_array_equal(out["obs"][length + 1], [0.0, DOWN_GOAL])
    assert int(state.time) == 1 and int(state.x) == 1


@pytest.mark.parametrize("length", [1, 10, 100])
def test_an_oracle_that_remembers_the_cue_succeeds_on_every_task(length):
    env = TMaze(corridor_length=length)
    params = _both_sides(env, 4)
    got = _obs_policy_episodes(
        env, _walk_then_turn(remembers), params, jax.random.key(0), 3
    )
    np.testing.assert_array_equal(got, 1.0)
    assert TMaze.success(got).all()
    # the state oracle agrees with it and with optimal_return
    tr = jax.jit(
        jax.vmap(
            lambda p, k: envs.rollout(env, envs.oracle_policy(env), p, k, env.horizon)
        )
    )(params, jax.random.split(jax.random.key(1), 8))
    np.testing.assert_array_equal(tr.reward.sum(-1), 1.0)
    np.testing.assert_array_equal(jax.vmap(env.optimal_return)(params), 1.0)


@pytest.mark.parametrize("length", [1, 25])
def test_a_memoryless_policy_succeeds_half_the_time(length):
    env = TMaze(corridor_length=length)
    params = _both_sides(env, 500)  # 1,000 tasks x 2 episodes
    got = _obs_policy_episodes(
        env, _walk_then_turn(memoryless), params, jax.random.key(2), 2
    )
    rate = TMaze.success(got).mean()
    assert abs(rate - 0.5) < 0.05, rate  # 2,000 episodes: sd 0.011
    assert set(np.unique(got)) == {0.0, 1.0}
    # a deterministic memoryless turn: right on one side, wrong on the other
    always_up = _walk_then_turn(lambda key, memory: jnp.int32(UP))
    sides = _both_sides(env, 1)
    got = _obs_policy_episodes(env, always_up, sides, jax.random.key(3), 1)
    np.testing.assert_array_equal(got[:, 0], [1.0, 0.0])


def test_sides_are_tasks_and_a_trial_keeps_its_side():
    env = envs.make("tmaze", corridor_length=3)
    assert env.num_tasks is None and not env.stochastic_reset
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 64))
    goals = np.asarray(params.goal)
    assert set(goals) == {-1, 1} and 16 < (goals == 1).sum() < 48
    trial = envs.MultiEpisodeTrial(env, num_episodes=3)
    p = env.params_for_goal(DOWN_GOAL)
    tr = envs.rollout(trial, envs.random_policy(trial), p, jax.random.key(1), 12)
    firsts = np.asarray(tr.obs["obs"])[:: env.horizon]
    np.testing.assert_array_equal(firsts, [[0.0, -1.0]] * 3)


@pytest.mark.parametrize(
    "kw,field",
    [
        ({"corridor_length": 0}, "corridor_length"),
        ({"corridor_length": 2.5}, "corridor_length"),
        ({"penalty": 0.5}, "penalty"),
        ({"penalty": True}, "penalty"),
    ],
)
def test_bad_arguments_name_the_field(kw, field):
    with pytest.raises(ValueError, match=f"`{field}`"):
        envs.make("tmaze", **kw)


def test_success_is_the_tmazes_and_other_families_refuse_it_by_name():
    assert TMaze().success(np.array([1.0, 0.0, -0.1])).tolist() == [True, False, False]
    with pytest.raises(NotImplementedError, match="DarkRoom defines no success"):
        envs.make("darkroom").success(np.zeros(3))
