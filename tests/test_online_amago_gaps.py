"""AMAGO's trainer (agentrl.online.amago): mutants the tests before let through.

Pass 9 of the hand-made mutation passes. The numbers come from AMAGO's
definitions (UT-Austin-RPL/amago, ``amago/agent.py``): the EMA target
``target (1 - tau) + online tau`` after every gradient step, the epsilon
schedule written out, the program's discounts with the acting one last.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_algos_amago import _policy, make_trainer, tiny_config

from agentrl.envs.registry import make as make_env
from agentrl.envs.tmaze import TMaze
from agentrl.models.transformer import DecisionModel
from agentrl.online.amago import (
    amago_hparams,
    amago_program,
    critic_values,
    ensemble_target,
    replay_add,
    replay_init,
    replay_sample,
    td_targets,
)


def test_td_targets_drop_the_bootstrap_where_done_says():
    # done in the middle of the sequence, where V' is not zero:
    # y = (1 - g) s r + g (1 - done) V'
    reward = jnp.array([[1.0, 2.0, 3.0]])
    done = jnp.array([[0.0, 1.0, 0.0]])
    next_value = jnp.array([[[4.0], [5.0], [6.0]]])
    y = td_targets(reward, done, next_value, (0.5,), 2.0)
    np.testing.assert_allclose(y[0, :, 0], [1.0 + 2.0, 2.0, 3.0 + 3.0])


def test_replay_samples_only_the_slots_written_so_far():
    # capacity 6, two trials written (rewards 1 and 2): the empty slots'
    # zero trials are never drawn
    replay = replay_init(6, 3, jnp.zeros(1))
    trials = {
        "obs": jnp.zeros((2, 3, 1)),
        "action": jnp.zeros((2, 3), jnp.int32),
        "reward": jnp.array([[1.0] * 3, [2.0] * 3]),
    }
    batch = replay_sample(replay_add(replay, trials), jax.random.key(0), 200)
    drawn = np.asarray(batch["reward"][:, 0])
    assert set(drawn.tolist()) == {1.0, 2.0}


def test_the_critics_are_drawn_apart_for_every_discount():
    # AMAGO's random subset is drawn per (batch, step, discount) entry: with
    # critic c worth c at discount 0 and 3 - c at discount 1, one critic
    # drawn (k = 1) for both discounts would always sum to 3
    c = jnp.arange(4.0)
    values = jnp.broadcast_to(jnp.stack([c, 3.0 - c], -1), (50, 4, 2))  # [n, C, G]
    got = np.asarray(ensemble_target(values, jax.random.key(2), 1, 1.0))  # [n, G]
    assert set(got[:, 0].tolist()) == {0.0, 1.0, 2.0, 3.0}
    assert (got.sum(-1) != 3.0).any()


def test_epsilon_anneals_linearly_over_explore_steps_env_steps_then_holds():
    # trials of 4 steps, explore_steps 40: update u has run 4 u steps per
    # env, so eps(u) = 1 + (0.05 - 1) * min(4 u / 40, 1)
    trainer = make_trainer(explore_steps=40)
    hp = amago_hparams(eps_start=1.0, eps_end=0.05)
    for u, want in [(0, 1.0), (5, 1.0 - 0.95 * 0.5), (10, 0.05), (25, 0.05)]:
        got = float(trainer.epsilon(hp, jnp.int32(u)))
        assert got == pytest.approx(want, abs=1e-6), u


def test_the_program_keeps_the_configs_settings_and_acts_with_the_last_gamma():
    config = tiny_config()
    algo = dataclasses.replace(
        config.algo,
        gammas=(0.5, 0.9),
        gamma=0.99,
        num_critics=4,
        critics_in_target=2,
        explore_window=(0, 1),
    )
    config = dataclasses.replace(config, algo=algo)
    env = make_env(config.data.env, **dict(config.data.env_args))
    shape = amago_program(config, env).trainer.shape
    assert shape.gammas == (0.5, 0.9, 0.99)  # the acting discount last
    assert (shape.num_critics, shape.critics_in_target) == (4, 2)
    assert shape.explore_window == (0, 1)
    assert shape.trial_steps == 2 * 3  # trial_episodes x the horizon


@pytest.fixture(scope="module")
def one_update():
    """One update (tau 0.25, one gradient step) from init, and the pieces of
    it redone with the update's own key splits (AmagoTrainer.update)."""
    trainer = make_trainer(num_updates=1, grad_steps=1)
    hp = amago_hparams(tau=0.25, lr=1e-2)
    state = jax.jit(trainer.init)(jax.random.key(0), hp)
    again = jax.random.clone(state.key)
    new, metrics = jax.jit(trainer.update)(state, hp)
    _, k_task, k_eps, k_act, k_grad = jax.random.split(again, 5)
    tasks = jax.vmap(trainer.sample_task)(jax.random.split(k_task, 4))
    eps = jax.random.uniform(k_eps, (4,)) * trainer.epsilon(hp, state.update)
    trials = jax.jit(trainer.collect)(state.params["model"], tasks, eps, k_act)
    (k_step,) = jax.random.split(k_grad, 1)
    k_batch, k_loss = jax.random.split(k_step)
    return trainer, hp, state, new, metrics, eps, trials, k_batch, k_loss


def test_an_update_stores_its_trials_and_logs_its_per_trial_epsilon(one_update):
    trainer, _, state, new, metrics, eps, trials, _, _ = one_update
    assert int(new.replay.count) == 4
    for name in ("obs", "action", "reward"):
        np.testing.assert_array_equal(getattr(new.replay, name)[:4], trials[name])
    # each trial's epsilon is u * eps(update) with its own u ~ U[0, 1)
    assert float(np.std(np.asarray(eps))) > 0.01
    assert float(metrics["epsilon"]) == pytest.approx(float(np.mean(eps)), rel=1e-6)


def test_the_gradient_step_learns_from_the_replay_with_its_new_trials(one_update):
    # the step's metrics are the loss on a batch drawn from the replay the
    # update's own trials were written into, against the initial targets
    trainer, hp, state, new, metrics, _, _, k_batch, k_loss = one_update
    batch = replay_sample(new.replay, k_batch, trainer.shape.batch_size)
    assert np.asarray(batch["reward"]).any()  # not the empty replay's zeros
    _, want = jax.jit(trainer.loss)(state.params, state.target, batch, k_loss, hp)
    for name in ("critic_loss", "actor_loss", "filter_frac"):
        assert float(metrics[name]) == pytest.approx(float(want[name]), rel=1e-5)


def test_the_targets_take_a_tau_step_towards_the_stepped_heads(one_update):
    # from targets equal to the heads p0: 0.75 p0 + 0.25 p1 (AMAGO's
    # _ema_copy), p1 the heads after the step
    trainer, _, state, new, _, _, _, _, _ = one_update
    p0, p1 = trainer.heads(state.params), trainer.heads(new.params)
    moved = [
        np.abs(b - a).max()
        for a, b in zip(*map(jax.tree.leaves, (p0, p1)), strict=True)
    ]
    assert max(moved) > 1e-3
    for t, a, b in zip(*map(jax.tree.leaves, (new.target, p0, p1)), strict=True):
        np.testing.assert_allclose(t, 0.75 * a + 0.25 * b, rtol=1e-5, atol=1e-6)


def test_filtered_bc_filters_on_the_critics_mean_advantage_and_the_loss_sums_up():
    # two critics: AMAGO's advantage is the ensemble mean,
    #   A(s_t, a_t, g) = mean_c Q_c(s_t, a_t, g) - mean_c sum_a pi Q_c(s_t, a, g)
    # and with offline_coeff 1 alone the actor loss is
    #   mean -[A > 0] log pi(a_t | s_t, g)
    trainer = make_trainer(num_critics=2, critics_in_target=2)
    hp = amago_hparams(online_coeff=0.0, offline_coeff=1.0, critic_coeff=3.0)
    k_init, k_tasks, k_collect = jax.random.split(jax.random.key(4), 3)
    state = jax.jit(trainer.init)(k_init, hp)
    params = state.params
    critics = params["critics"]  # the critics apart, so that mean and min differ
    critics = {**critics, "l3": {**critics["l3"], "w": critics["l3"]["w"] * 30.0}}
    params = {**params, "critics": critics}
    tasks = jax.vmap(trainer.sample_task)(jax.random.split(k_tasks, 4))
    batch = jax.jit(trainer.collect)(params["model"], tasks, jnp.ones(4), k_collect)
    _, m = jax.jit(trainer.loss)(params, state.target, batch, jax.random.key(1), hp)

    model = trainer.model(params["model"])
    h = model.features(batch["obs"], batch["action"], batch["reward"])
    logits = trainer.actor_logits(params["model"]["head"], params["actor"], h)
    pi = _policy(logits, None)
    # the acting discount (the last) is the model's own head, the policy
    # evaluation acts with
    acting = model(batch["obs"], batch["action"], batch["reward"]).action
    np.testing.assert_allclose(pi[..., -1, :], _policy(acting, None), rtol=1e-5)
    q = np.asarray(critic_values(params["critics"], h, 2))  # [B, L, C, G, A]
    a = np.asarray(batch["action"])[..., None, None, None]
    q_taken = np.take_along_axis(q, np.broadcast_to(a, q.shape[:-1] + (1,)), -1)[
        ..., 0
    ]  # [B, L, C, G]
    v = (pi[..., None, :, :] * q).sum(-1)  # [B, L, C, G]
    advantage = q_taken.mean(2) - v.mean(2)
    by_min = q_taken.min(2) - v.min(2)
    assert ((advantage > 0) != (by_min > 0)).any()  # the two filters differ
    pa = np.asarray(batch["action"])[..., None, None]
    pi_taken = np.take_along_axis(pi, np.broadcast_to(pa, pi.shape[:-1] + (1,)), -1)
    want = -np.mean((advantage > 0) * np.log(pi_taken[..., 0]))
    np.testing.assert_allclose(float(m["actor_loss"]), want, rtol=1e-4)
    np.testing.assert_allclose(float(m["filter_frac"]), (advantage > 0).mean())
    # the critic loss: against (1 - g) 10 r + g V_targ(s'), V_targ over two
    # target critics drawn with the loss's key (REDQ; the same critic may be
    # drawn twice), their mean since online_coeff is 0 (AMAGO's
    # _critic_ensemble_to_td_target), no bootstrap after the trial's last step
    target = state.target
    pi_t = _policy(trainer.actor_logits(target["head"], target["actor"], h), None)
    q_t = np.asarray(critic_values(target["critics"], h, 2))
    v_all = jnp.asarray((pi_t[..., None, :, :] * q_t).sum(-1))  # [B, L, C, G]
    v_t = np.asarray(ensemble_target(v_all, jax.random.key(1), 2, 0.0))
    drawn_min = np.asarray(ensemble_target(v_all, jax.random.key(1), 2, 1.0))
    assert not np.allclose(v_t, drawn_min)  # the mean, not the min
    assert not np.allclose(v_t, np.asarray(v_all).mean(2))  # drawn, not all
    g = np.array([0.9, 0.99])
    y = (1 - g) * 10.0 * np.asarray(batch["reward"])[..., None]  # [B, L, G]
    y[:, :-1] += g * v_t[:, 1:]
    critic_loss = np.mean((q_taken - y[:, :, None, :]) ** 2)
    np.testing.assert_allclose(float(m["critic_loss"]), critic_loss, rtol=1e-4)
    # the total: actor loss + critic_coeff x critic loss; the logged Q and
    # entropy are the acting discount's (the last)
    want = float(m["actor_loss"]) + 3.0 * float(m["critic_loss"])
    np.testing.assert_allclose(float(m["loss"]), want, rtol=1e-5)
    np.testing.assert_allclose(float(m["q_acting"]), q_taken[..., -1].mean(), rtol=1e-4)
    entropy = -(pi[..., -1, :] * np.log(pi[..., -1, :])).sum(-1).mean()
    np.testing.assert_allclose(float(m["entropy"]), entropy, rtol=1e-4)


@pytest.mark.long
def test_each_update_steps_at_its_own_scheduled_rate():
    # lr_shape 0 at update 0 and 1 after: the first update leaves the
    # weights where they are (no decay either), the second moves them
    trainer = make_trainer(
        num_updates=2, grad_steps=1, lr_shape=lambda u: jnp.where(u == 0, 0.0, 1.0)
    )
    hp = amago_hparams(lr=1e-2)
    update = jax.jit(trainer.update)
    s0 = jax.jit(trainer.init)(jax.random.key(5), hp)
    s1, _ = update(s0, hp)
    s2, _ = update(s1, hp)
    leaves = [jax.tree.leaves(s.params) for s in (s0, s1, s2)]
    for a, b in zip(leaves[0], leaves[1], strict=True):
        np.testing.assert_array_equal(a, b)
    assert max(np.abs(b - a).max() for a, b in zip(*leaves[1:], strict=True)) > 1e-3


@pytest.mark.long
def test_each_gradient_step_bootstraps_from_the_targets_the_last_one_left():
    # lr 0 (the heads p stay), targets t0 = -3 p apart from them, tau 0.5:
    # step 1 learns against t0, step 2 against t1 = 0.5 t0 + 0.5 p; the
    # logged losses are the mean over the two steps
    trainer = make_trainer(num_updates=1, grad_steps=2)
    hp = amago_hparams(tau=0.5, lr=0.0)
    state = jax.jit(trainer.init)(jax.random.key(6), hp)
    t0 = jax.tree.map(lambda x: -3.0 * x, state.target)
    state = state._replace(target=t0)
    again = jax.random.clone(state.key)
    new, metrics = jax.jit(trainer.update)(state, hp)
    t1 = jax.tree.map(lambda t, p: 0.5 * t + 0.5 * p, t0, trainer.heads(state.params))
    *_, k_grad = jax.random.split(again, 5)
    want = []
    for k, target in zip(jax.random.split(k_grad, 2), (t0, t1), strict=True):
        k_batch, k_loss = jax.random.split(k)
        batch = replay_sample(new.replay, k_batch, trainer.shape.batch_size)
        want.append(jax.jit(trainer.loss)(state.params, target, batch, k_loss, hp)[1])
    for name in ("critic_loss", "actor_loss", "loss"):
        mean = np.mean([float(w[name]) for w in want])
        assert float(metrics[name]) == pytest.approx(mean, rel=1e-5), name
    assert float(want[0]["critic_loss"]) != pytest.approx(float(want[1]["critic_loss"]))


@pytest.mark.long
def test_collection_explores_by_each_steps_place_in_its_episode():
    # T-Maze (horizon 10), explore_window (0, 4): the schedule's epsilon (1
    # here) at step 0 and steps 6-9 of each episode, 0.5 / 10 at steps 1-5.
    # The policy plays action 0 (a head biased to it), so a step's other
    # actions are its exploration's
    env = TMaze(corridor_length=9)
    n = 64
    trainer = make_trainer(
        trial=10, env=env, num_envs=n, capacity=n, explore_window=(0, 4)
    )
    k_init, k_tasks, k_collect = jax.random.split(jax.random.key(10), 3)
    params = jax.jit(trainer.init)(k_init, amago_hparams()).params["model"]
    head = params["head"]["proj"]
    head["kernel"][...] = jnp.zeros_like(head["kernel"][...])
    head["bias"][...] = jnp.array([20.0] + [-20.0] * (head["bias"].shape[0] - 1))
    tasks = jax.vmap(env.sample_params)(jax.random.split(k_tasks, n))
    trials = jax.jit(trainer.collect)(params, tasks, jnp.ones(n), k_collect)
    other = (np.asarray(trials["action"]) != 0).mean(0)  # [10] per step
    loud = other[[0, 6, 7, 8, 9]]
    assert (loud > 0.5).all(), other  # uniform draws: 3 in 4 are not 0
    assert (other[1:6] < 0.15).all(), other


@pytest.mark.long
def test_collection_feeds_each_step_the_previous_action_and_reward(monkeypatch):
    """Step t reads step t - 1's recorded action and reward (the tokens
    training replays); a trial's first step passes zeros, as ``decode``
    asks (it ignores them there, so that part pins the contract only)."""
    seen = []
    decode = DecisionModel.decode

    def recording(self, cache, obs, prev_action, prev_reward, *rest, **kw):
        seen.append((np.asarray(prev_action), np.asarray(prev_reward)))
        return decode(self, cache, obs, prev_action, prev_reward, *rest, **kw)

    monkeypatch.setattr(DecisionModel, "decode", recording)
    trainer = make_trainer(num_envs=8, trial=6)
    k_init, k_tasks, k_collect = jax.random.split(jax.random.key(7), 3)
    state = trainer.init(k_init, amago_hparams())
    tasks = jax.vmap(trainer.sample_task)(jax.random.split(k_tasks, 8))
    with jax.disable_jit():  # concrete values reach the recording decode
        batch = trainer.collect(state.params["model"], tasks, jnp.ones(8), k_collect)
    action, reward = np.asarray(batch["action"]), np.asarray(batch["reward"])
    assert reward.any() and (reward != 1).any()  # both kinds of step occur
    assert len(seen) == 6
    np.testing.assert_array_equal(seen[0][0], 0)
    np.testing.assert_array_equal(seen[0][1], 0.0)
    for t in range(1, 6):
        np.testing.assert_array_equal(seen[t][0], action[:, t - 1])
        np.testing.assert_array_equal(seen[t][1], reward[:, t - 1])
