"""The PPO source's pieces by hand: GAE targets, the rollout record, the loss."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from agentrl.envs import grid, make
from agentrl.prng import key_scan
from agentrl.rl.ppo import optimizer
from agentrl.sources.ppo import Acting, TaskRun, generate_ppo, make_config

ROOM = make("darkroom", size=3, horizon=4)  # 9 cells, start at the centre (4)


def _ppo_run(**settings) -> TaskRun:
    config = make_config(ROOM, 2, hidden=8, **settings)
    return TaskRun(ROOM, config, ROOM.params_for_task(jnp.int32(0)))


def _weights(run, seed):
    return run.policy.init(jax.random.key(seed), 8, 0.0)


def test_batch_advantages_are_per_episode_gae_with_lambda_and_gamma():
    """``A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}`` with
    ``delta_t = r_t + gamma * (1 - terminated_t) * V(s'_t) - V(s_t)``, V(s')
    the critic's at the true successor (the cut episode's final state), and
    value targets ``A + V(s)``."""
    gamma, lam = 0.9, 0.5
    run = _ppo_run(gamma=gamma, gae_lambda=lam)
    weights = _weights(run, 0)
    k = jax.random.split(jax.random.key(1), 3)
    succ = jax.random.randint(k[0], (6,), 0, 9)
    learn = {
        "x": jax.nn.one_hot(jnp.arange(6), 9),
        "raw": jnp.zeros(6, jnp.int32),
        "logp": jnp.zeros(6),
        "value": jax.random.normal(k[1], (6,)),
        "next_x": jax.nn.one_hot(succ, 9),
    }
    terminated = np.array([0, 0, 0, 0, 1, 0], bool)
    truncated = np.array([0, 0, 1, 0, 0, 0], bool)
    record = {
        "reward": jax.random.normal(k[2], (6,)),
        "terminated": jnp.asarray(terminated),
        "truncated": jnp.asarray(truncated),
    }
    batch = run.batch(weights, record, learn)
    value = np.asarray(learn["value"], np.float64)
    next_value = np.asarray(run.policy.value(weights, learn["next_x"]), np.float64)
    reward = np.asarray(record["reward"], np.float64)
    adv, acc = np.zeros(6), 0.0
    for t in reversed(range(6)):
        delta = reward[t] + gamma * (1 - terminated[t]) * next_value[t] - value[t]
        acc = delta + gamma * lam * (1 - (terminated[t] | truncated[t])) * acc
        adv[t] = acc
    np.testing.assert_allclose(batch["adv"], adv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(batch["target"], adv + value, rtol=1e-5, atol=1e-6)


def test_rollout_records_each_state_and_learns_its_true_successor():
    """Two episodes of 4 steps: ``obs`` is the state the action was taken
    in (the centre first), and the critic bootstraps from the cell the
    action led to, also at an episode's cut (not the reset centre)."""
    run = _ppo_run()
    start = ROOM.reset(jax.random.key(2), run.params)
    carry = Acting(_weights(run, 3), *start)
    keys = jax.random.split(jax.random.key(4), 8)
    _, (record, learn) = key_scan(run.env_step, carry, keys)
    obs, action = np.asarray(record["obs"]), np.asarray(record["action"])
    assert obs[0] == obs[4] == 4  # each episode starts at the centre
    moved = [
        int(grid.cell_id(grid.move(grid.cell_pos(o, 3), a, 3), 3))
        for o, a in zip(obs, action, strict=True)
    ]
    np.testing.assert_array_equal(obs[1:4], moved[:3])
    np.testing.assert_array_equal(learn["next_x"], jax.nn.one_hot(moved, 9))
    np.testing.assert_array_equal(learn["x"], jax.nn.one_hot(obs, 9))
    assert np.asarray(record["truncated"]).tolist() == [0, 0, 0, 1] * 2


def test_each_epoch_is_a_fresh_permutation_of_the_rollout():
    run = _ppo_run(num_epochs=6, num_minibatches=2)
    rows = np.asarray(run.minibatch_indices(jax.random.key(5)))
    steps = run.config.steps_per_update
    assert rows.shape == (12, steps // 2)
    epochs = rows.reshape(6, steps)
    for epoch in epochs:
        assert sorted(epoch) == list(range(steps))
    assert len({tuple(e) for e in epochs}) == 6


def test_loss_is_the_clipped_surrogate_against_the_acting_log_probs():
    """Old log-probabilities 0.3 below the current ones (ratio e^0.3, past
    1 + clip): the clipped surrogate, ``vf_coef`` times half the squared
    error, minus ``ent_coef`` (0.01 for discrete actions) times the entropy."""
    run = _ppo_run()
    weights = _weights(run, 6)
    k = jax.random.split(jax.random.key(7), 4)
    x = jax.nn.one_hot(jax.random.randint(k[0], (8,), 0, 9), 9)
    raw = jax.random.randint(k[1], (8,), 0, 5)
    logp, entropy, value = run.policy.evaluate(weights, x, raw)
    adv = jax.random.normal(k[2], (8,))
    target = jax.random.normal(k[3], (8,))
    batch = {"x": x, "raw": raw, "logp": logp - 0.3, "adv": adv, "target": target}
    loss, _ = run.loss(weights, batch)
    a = np.asarray(adv, np.float64)
    a = (a - a.mean()) / (a.std() + 1e-8)
    r = np.exp(0.3)
    pg = -np.minimum(r * a, min(r, 1.2) * a).mean()
    vf = 0.5 * np.mean((np.asarray(value) - np.asarray(target)) ** 2)
    want = pg + 0.5 * vf - 0.01 * np.mean(entropy)
    np.testing.assert_allclose(loss, want, rtol=1e-5)


def test_optimizer_clips_the_global_gradient_norm():
    """``max_grad_norm`` (0.5): two Adam steps on gradients of norm 10 and
    1 are the steps on the gradients rescaled to norm 0.5."""
    run = _ppo_run(lr=0.1)
    params = {"w": jnp.array([1.0, -2.0, 0.5])}
    grads = [{"w": jnp.array([6.0, 8.0, 0.0])}, {"w": jnp.array([0.0, 0.6, 0.8])}]
    ref = optax.adam(0.1)
    state, ref_state = run.tx.init(params), ref.init(params)
    for g in grads:
        clipped = {"w": g["w"] * 0.5 / jnp.linalg.norm(g["w"])}
        got, state = run.tx.update(g, state, params)
        want, ref_state = ref.update(clipped, ref_state, params)
        np.testing.assert_allclose(got["w"], want["w"], rtol=1e-5, atol=1e-7)


def test_optimizer_passes_adams_second_moment_decay():
    """``optimizer(..., b2=0.9)`` (RL²'s and the trainers' ``adam_b2``) is
    Adam with that decay: the second step differs from b2 = 0.999's."""
    params = {"w": jnp.array([1.0, -2.0])}
    grads = [{"w": jnp.array([3.0, 0.1])}, {"w": jnp.array([0.2, 5.0])}]
    tx, ref = optimizer(0.1, None, b2=0.9), optax.adam(0.1, b2=0.9)
    state, ref_state = tx.init(params), ref.init(params)
    for g in grads:
        got, state = tx.update(g, state, params)
        want, ref_state = ref.update(g, ref_state, params)
        np.testing.assert_allclose(got["w"], want["w"], rtol=1e-5)


def test_history_episodes_end_at_terminations_too():
    """Dark Room Hard ends an episode on the goal (its only reward): the
    history's episode index steps after every terminated or cut step."""
    env = make("darkroom_hard", size=3, horizon=4)
    ids = jnp.array([1, 2, 3])
    params = jax.vmap(env.params_for_task)(ids)
    h = generate_ppo(
        env,
        params,
        jax.random.key(8),
        4,
        ids,
        hidden=8,
        num_epochs=1,
        num_minibatches=1,
    )
    terminated, truncated = np.asarray(h.terminated), np.asarray(h.truncated)
    assert terminated.any()
    np.testing.assert_array_equal(h.reward, terminated)
    done = (terminated | truncated).astype(int)
    np.testing.assert_array_equal(h.episode, np.cumsum(done, 1) - done)
