"""RL²'s trainer (agentrl.online.ppo): mutants the tests before let through.

Pass 9 of the hand-made mutation passes. Each test works its numbers out
apart from the trainer: the hidden state replayed step by step from the
rule "zero at a trial's first step", trial returns summed from the rewards
by the trial's known layout (a bandit's episodes are a fixed number of
steps), the loss by the PPO formulas in NumPy, Adam written out.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_online_rl2 import FlipBandit, _rollout_of_update, hp, small_shape

from agentrl.envs.bandits import BernoulliBandit
from agentrl.online.ppo import TrialPPO, rollout_metrics, trial_optimizer

# FlipBandit episodes of 3 steps, trials of 2 episodes (6 steps), rollouts
# of 9 steps: two updates cover global steps 0-17, three whole trials.
EPISODE, TRIAL, ROLLOUT = 3, 6, 9


def _trainer(env=None, **changes):
    env = env or FlipBandit(num_arms=2, horizon=EPISODE)
    base = dict(
        num_envs=4, trial_episodes=2, rollout_steps=ROLLOUT,
        num_epochs=1, num_minibatches=1, num_updates=2,
    )  # fmt: skip
    return TrialPPO(env, small_shape(**{**base, **changes}), env.sample_params)


@pytest.fixture(scope="module")
def two_rollouts():
    """Two lr-0 updates from init: their states, metrics and rollouts."""
    trainer = _trainer()
    h = hp(lr=0.0, reward_scale=0.5, vf_coef=0.7, ent_coef=0.05)
    update = jax.jit(trainer.update)
    s0 = trainer.init(jax.random.key(0), h)
    s1, m1 = update(s0, h)
    s2, m2 = update(s1, h)
    recs = [_rollout_of_update(trainer, s) for s in (s0, s1)]
    rec = {k: np.concatenate([r[k] for r in recs]) for k in recs[0]}  # [18, N]
    return trainer, (s0, s1, s2), (m1, m2), rec


def test_the_core_carries_its_state_inside_a_trial_and_zeroes_it_at_trial_starts(
    two_rollouts,
):
    # the core stepped over the recorded inputs from a zero state that is
    # zeroed again at every trial's first step (t % 6 == 0), never at an
    # episode's (t % 6 == 3), and carried over the rollout boundary (t = 9)
    trainer, (s0, _, _), _, rec = two_rollouts
    weights = s0.weights
    n = rec["x"].shape[1]
    h = np.zeros((n, trainer.shape.hidden), np.float32)
    for t in range(2 * ROLLOUT):
        if t % TRIAL == 0:
            h = np.zeros_like(h)
        h, out, value = trainer.core.step(weights, jnp.asarray(h), rec["x"][t])
        logp, _ = trainer.head.logp_entropy(out, None, rec["raw"][t])
        np.testing.assert_allclose(rec["value"][t], value, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rec["logp"][t], logp, rtol=1e-5, atol=1e-6)
    t = np.arange(2 * ROLLOUT)[:, None]
    np.testing.assert_array_equal(
        rec["reset"], np.broadcast_to(t % TRIAL == 0, (18, n))
    )
    np.testing.assert_array_equal(
        rec["trial_end"], np.broadcast_to(t % TRIAL == TRIAL - 1, (18, n))
    )


def test_the_core_reads_the_new_episode_flag_and_the_previous_step(two_rollouts):
    # step_features: [obs one-hot, prev action one-hot (2), prev reward, first]
    _, _, _, rec = two_rollouts
    x, n = rec["x"], rec["x"].shape[1]
    t = np.arange(2 * ROLLOUT)[:, None]
    np.testing.assert_array_equal(
        x[..., -1], np.broadcast_to(t % EPISODE == 0, (18, n))
    )
    # previous action and reward: the last step's, zeros at a trial's start
    # (carried over the episode boundary inside a trial)
    prev_r = np.concatenate([np.zeros((1, n)), rec["reward"][:-1]])
    prev_a = np.concatenate([np.zeros((1, n), int), rec["raw"][:-1]])
    prev_r[t[:, 0] % TRIAL == 0] = 0.0
    prev_a[t[:, 0] % TRIAL == 0] = 0  # the trial's zero action: action 0
    np.testing.assert_array_equal(x[..., -2], prev_r)
    np.testing.assert_array_equal(x[..., -4:-2], np.eye(2)[prev_a])


def test_logged_returns_are_each_ended_trials_own_unscaled_returns(two_rollouts):
    # trials [0, 6), [6, 12), [12, 18): update 1 sees the first end; update
    # 2 the second (begun in update 1's rollout) and the third. Episode 1 is
    # a trial's first 3 steps, episode 2 its last 3; rewards unscaled
    # (reward_scale 0.5 is for the learner)
    _, _, (m1, m2), rec = two_rollouts
    r = rec["reward"]
    trials = [r[i : i + TRIAL] for i in (0, 6, 12)]  # [6, N] each
    assert 0 < np.mean(r) < 1
    for m, ended in ((m1, trials[:1]), (m2, trials[1:])):
        stacked = np.stack(ended)  # [k, 6, N]
        np.testing.assert_allclose(m["trial_return"], stacked.sum(1).mean(), rtol=1e-6)
        np.testing.assert_allclose(
            m["episode_return_first"], stacked[:, :EPISODE].sum(1).mean(), rtol=1e-6
        )
        np.testing.assert_allclose(
            m["episode_return_last"], stacked[:, EPISODE:].sum(1).mean(), rtol=1e-6
        )
    np.testing.assert_allclose(m1["reward"], r[:ROLLOUT].mean(), rtol=1e-6)
    np.testing.assert_allclose(m2["reward"], r[ROLLOUT:].mean(), rtol=1e-6)
    for m in (m1, m2):  # the logged loss weighs its terms by hp's coefficients
        want = m["pg_loss"] + 0.7 * m["vf_loss"] - 0.05 * m["entropy"]
        np.testing.assert_allclose(m["loss"], want, rtol=1e-5, atol=1e-7)


def test_rollout_metrics_average_over_the_trials_that_ended():
    # two envs, three steps; trials end at (t=1, env 0) and (t=2, env 1)
    rec = {
        "reward": jnp.array([[1.0, 0.0], [2.0, 4.0], [0.0, 1.0]]),
        "trial_end": jnp.array([[False, False], [True, False], [False, True]]),
        "trial_return": jnp.array([[1.0, 0.0], [3.0, 4.0], [0.0, 6.0]]),
        "first_return": jnp.array([[9.0, 9.0], [1.0, 9.0], [9.0, 2.0]]),
        "last_return": jnp.array([[9.0, 9.0], [2.0, 9.0], [9.0, 5.0]]),
    }
    m = rollout_metrics(rec)
    assert float(m["reward"]) == pytest.approx(8.0 / 6.0)
    assert float(m["trial_return"]) == pytest.approx((3.0 + 6.0) / 2)
    assert float(m["episode_return_first"]) == pytest.approx((1.0 + 2.0) / 2)
    assert float(m["episode_return_last"]) == pytest.approx((2.0 + 5.0) / 2)
    none = rollout_metrics({**rec, "trial_end": jnp.zeros((3, 2), bool)})
    assert np.isnan(float(none["trial_return"]))


def test_a_finished_trial_draws_its_next_task_with_its_steps_task_key():
    # continuous arm means: each trial's task is its own draw. After a
    # rollout of 9 steps whose trials ended at step 5, every env plays
    # sample_params(rollout_keys(...)["task"][5, env])
    env = BernoulliBandit(num_arms=2, horizon=EPISODE)
    trainer = _trainer(env)
    h = hp(lr=0.0)
    s0 = trainer.init(jax.random.key(1), h)
    _, k_roll, _ = jax.random.split(jax.random.clone(s0.key), 3)
    keys = trainer.rollout_keys(k_roll)
    s1, _ = jax.jit(trainer.update)(s0, h)
    want = jax.vmap(env.sample_params)(keys["task"][TRIAL - 1])
    np.testing.assert_array_equal(s1.task.means, want.means)
    assert not np.allclose(s1.task.means, s0.task.means)


def test_the_loss_clips_at_hp_clip_eps_and_weights_its_terms_by_hp(two_rollouts):
    # the replayed policy against acting log-probs 0.3 lower (ratio e^0.3,
    # past 1 + clip_eps = 1.1): PPO's loss in NumPy, with vf_coef 0.7 and
    # ent_coef 0.05
    trainer, (s0, _, _), _, rec = two_rollouts
    weights = s0.weights
    x, raw, reset = rec["x"][:ROLLOUT], rec["raw"][:ROLLOUT], rec["reset"][:ROLLOUT]
    n = x.shape[1]
    rng = np.random.default_rng(0)
    adv = rng.normal(size=(ROLLOUT, n)).astype(np.float32)
    target = rng.normal(size=(ROLLOUT, n)).astype(np.float32)
    old = rec["logp"][:ROLLOUT] - 0.3
    batch = {"x": x, "raw": raw, "logp": old, "reset": reset, "adv": adv}
    batch["target"] = target
    h = hp(clip_eps=0.1, vf_coef=0.7, ent_coef=0.05)
    loss, m = jax.jit(trainer._loss)(weights, batch, s0.hidden, h)
    logp, ent, value = [], [], []
    state = np.zeros((n, trainer.shape.hidden), np.float32)
    for t in range(ROLLOUT):
        state = np.where(reset[t][:, None], 0.0, state)
        state, out, v = trainer.core.step(weights, jnp.asarray(state), x[t])
        lp, e = trainer.head.logp_entropy(out, None, raw[t])
        logp.append(lp), ent.append(e), value.append(v)
    logp, ent, value = (np.asarray(a, np.float64) for a in (logp, ent, value))
    ratio = np.exp(logp - old)
    assert (ratio > 1.25).all()
    a = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg = -np.mean(np.minimum(ratio * a, np.clip(ratio, 0.9, 1.1) * a))
    vf = 0.5 * np.mean((value - target) ** 2)
    np.testing.assert_allclose(m["pg_loss"], pg, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(m["vf_loss"], vf, rtol=1e-4)
    np.testing.assert_allclose(m["entropy"], ent.mean(), rtol=1e-4)
    np.testing.assert_allclose(loss, pg + 0.7 * vf - 0.05 * ent.mean(), rtol=1e-4)


@pytest.mark.long
def test_each_minibatch_replays_from_its_own_envs_carried_state():
    # update 2 starts mid-trial (a carried, non-zero hidden state) and cuts
    # the 8 envs into 4 minibatches: at lr 0 the replay is the acting pass
    trainer = _trainer(num_envs=8, num_minibatches=4)
    h = hp(lr=0.0)
    update = jax.jit(trainer.update)
    s1, _ = update(trainer.init(jax.random.key(2), h), h)
    assert np.abs(np.asarray(s1.hidden)).max() > 1e-3
    _, m2 = update(s1, h)
    assert abs(float(m2["approx_kl"])) < 1e-6


@pytest.mark.long
def test_each_update_steps_at_its_own_scheduled_rate():
    # lr_shape 1 at update 0 and 0 after: the first update moves the
    # weights, the second leaves them where they are
    trainer = _trainer(lr_shape=lambda u: jnp.where(u == 0, 1.0, 0.0))
    h = hp(lr=1e-2)
    update = jax.jit(trainer.update)
    s0 = trainer.init(jax.random.key(3), h)
    s1, _ = update(s0, h)
    s2, _ = update(s1, h)
    moved = jax.tree.map(lambda a, b: np.abs(a - b).max(), s0.weights, s1.weights)
    assert max(jax.tree.leaves(moved)) > 1e-3
    for a, b in zip(
        jax.tree.leaves(s1.weights), jax.tree.leaves(s2.weights), strict=True
    ):
        np.testing.assert_array_equal(a, b)


def test_trial_optimizer_is_adam_at_eps_1e5_with_decay_and_the_scheduled_rate():
    # two steps of Adam written out (b1 0.9, b2 from the shape, eps 1e-5),
    # decoupled weight decay, lr x lr_shape(update); gradients of 1e-6 so
    # that eps matters, two different ones so that b2 does
    shape = small_shape(grad_clip=None, adam_b2=0.95, lr_shape=lambda u: 1.0 / (1 + u))
    h = {"lr": jnp.float32(0.1), "weight_decay": jnp.float32(0.5)}
    p0 = np.array([1.0, -2.0])
    g = [np.array([1e-6, -3e-6]), np.array([4e-6, 1e-6])]
    tx = trial_optimizer(shape, h, jnp.int32(3))
    params, state = {"w": jnp.asarray(p0, jnp.float32)}, None
    state = tx.init(params)
    m, v, p = np.zeros(2), np.zeros(2), p0.copy()
    lr = 0.1 / (1 + 3)
    for i, grad in enumerate(g, 1):
        updates, state = tx.update({"w": jnp.asarray(grad, jnp.float32)}, state, params)
        params = {"w": params["w"] + updates["w"]}
        m = 0.9 * m + 0.1 * grad
        v = 0.95 * v + 0.05 * grad**2
        step = (m / (1 - 0.9**i)) / (np.sqrt(v / (1 - 0.95**i)) + 1e-5)
        want = -lr * (step + 0.5 * p)
        np.testing.assert_allclose(updates["w"], want, rtol=1e-4)
        p = p + want
