"""SAC's pieces by hand: the squashed density, one update, the replay buffer."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy import stats

from agentrl.envs import make
from agentrl.prng import key_scan
from agentrl.sources.sac import Learner, TaskRun, make_config

ENV = make("point_robot", horizon=3)  # obs [2], actions in [-0.1, 0.1]^2
LOG_2PI = np.log(2 * np.pi)


def _sac_run(num_episodes=4, **settings) -> TaskRun:
    config = make_config(ENV, num_episodes, hidden=8, **settings)
    return TaskRun(ENV, config, ENV.default_params)


def _constant_actor(run, key, mean, log_std):
    """The run's actor with a zero last layer: it outputs ``mean`` and
    ``log_std`` ``[2]`` whatever the observation."""
    actor = run.nets.init(key)["actor"]
    last = actor[-1]
    bias = jnp.asarray([*mean, *log_std], jnp.float32)
    actor[-1] = {"w": jnp.zeros_like(last["w"]), "b": bias}
    return actor


def test_sample_log_prob_is_the_tanh_gaussian_density():
    """``log pi(a) = log N(u; mean, std) - log(1 - tanh(u)^2)`` with
    ``a = tanh(u)``, std ``exp(log_std)`` clipped to ``[e^-20, e^2]``."""
    run = _sac_run()
    actor = _constant_actor(run, jax.random.key(0), [0.2, -0.3], [-0.5, 0.1])
    keys = jax.random.split(jax.random.key(1), 2000)
    draw = jax.jit(jax.vmap(lambda k: run.nets.sample(actor, jnp.zeros(2), k)))
    a, logp = draw(keys)
    a = np.asarray(a, np.float64)
    u = np.arctanh(a)
    want = stats.norm.logpdf(u, [0.2, -0.3], np.exp([-0.5, 0.1]))
    want = (want - np.log(1 - a**2 + 1e-6)).sum(-1)
    np.testing.assert_allclose(logp, want, rtol=1e-4, atol=1e-3)
    # log_std -25 acts as -20: a point mass at tanh(mean) (u rounds to mean)
    actor = _constant_actor(run, jax.random.key(2), [0.5, 0.5], [-25.0, -25.0])
    a, logp = run.nets.sample(actor, jnp.zeros(2), jax.random.key(3))
    np.testing.assert_allclose(a, np.tanh([0.5, 0.5]), rtol=1e-6)
    want = 2 * (20.0 - 0.5 * LOG_2PI - np.log(1 - np.tanh(0.5) ** 2 + 1e-6))
    np.testing.assert_allclose(logp, want, rtol=1e-5)


def test_final_policy_label_is_the_squashed_mean_in_env_units():
    run = _sac_run()
    actor = _constant_actor(run, jax.random.key(4), [3.0, -0.2], [0.0, 0.0])
    label = run.nets.greedy(actor, jnp.zeros((5, 2)))
    want = np.tile(0.1 * np.tanh([3.0, -0.2]), (5, 1))
    np.testing.assert_allclose(label, want, rtol=1e-6)


def _mlp(layers, x):
    for layer in layers[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    return x @ layers[-1]["w"] + layers[-1]["b"]


def _q(critic, x, a):
    """``[2]`` the twin critics at one ``(x, a)``."""
    return jnp.stack([_mlp(c, jnp.concatenate([x, a]))[0] for c in critic])


@pytest.mark.parametrize("done", [0.0, 1.0])
@pytest.mark.long
def test_one_update_is_the_soft_actor_critic_step(done):
    """One update on a buffer of one transition (so any batch is it), with
    plain SGD in place of Adam so the step is ``-lr * grad``: the critics
    regress on ``r + gamma * (1 - done) * (min_i Qtarget_i(s', a') - alpha
    log pi(a'|s'))``, then the actor minimises ``alpha log pi(a|s) -
    min_i Q_i(s, a)`` under the updated critics, then the targets move
    ``tau`` of the way to the critics. The actor's std is e^-19, so its
    draws are its squashed mean and ``log pi`` is known exactly."""
    lr, gamma, alpha, tau = 0.05, 0.8, 0.3, 0.1
    run = _sac_run(
        batch_size=4, buffer_size=4, lr=lr, gamma=gamma, alpha=alpha, tau=tau
    )
    run.tx = optax.sgd(lr)
    k = jax.random.split(jax.random.key(5), 4)
    log_std = jnp.array([-19.0, -19.0])
    actor = _constant_actor(run, k[0], [1.2, -1.5], log_std)
    critic = run.nets.init(k[1])["critic"]
    target = run.nets.init(k[2])["critic"]  # not the critics' copy
    learner = Learner(actor, critic, target, run.tx.init(actor), run.tx.init(critic))
    x, a, next_x = (
        jnp.array([0.3, -0.2]),
        jnp.array([0.5, -0.7]),
        jnp.array([0.35, -0.1]),
    )
    reward = -0.4
    row = {"x": x, "a": a, "reward": reward, "next_x": next_x, "done": done}
    buffer = {
        name: jnp.stack([jnp.asarray(v, jnp.float32)] * 4) for name, v in row.items()
    }
    new = jax.jit(run._update)(learner, buffer, jnp.int32(4), k[3])

    def policy(weights, obs):
        """(tanh(mean), log pi) of the point-mass policy at ``obs``."""
        mean, ls = jnp.split(_mlp(weights, obs), 2)
        squashed = jnp.tanh(mean)
        logp = jnp.sum(-ls - 0.5 * LOG_2PI - jnp.log(1 - squashed**2 + 1e-6))
        return squashed, logp

    a_next, logp_next = policy(actor, next_x)
    soft = _q(target, next_x, a_next).min() - alpha * logp_next
    y = reward + gamma * (1 - done) * soft
    critic_grad = jax.grad(lambda c: jnp.sum((_q(c, x, a) - y) ** 2))(critic)
    want_critic = jax.tree.map(lambda p, g: p - lr * g, critic, critic_grad)

    def actor_loss(weights):
        pi, logp = policy(weights, x)
        return alpha * logp - _q(want_critic, x, pi).min()

    want_actor = jax.tree.map(
        lambda p, g: p - lr * g, actor, jax.grad(actor_loss)(actor)
    )
    want_target = jax.tree.map(
        lambda c, t: tau * c + (1 - tau) * t, want_critic, target
    )
    for got, want in [
        (new.critic, want_critic),
        (new.actor, want_actor),
        (new.target, want_target),
    ]:
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def _learner(run, key):
    w = run.nets.init(key)
    return Learner(
        w["actor"],
        w["critic"],
        w["critic"],
        run.tx.init(w["actor"]),
        run.tx.init(w["critic"]),
    )


def test_updates_start_at_a_full_batch_and_sample_the_newest_transition():
    """No update until the buffer holds ``batch_size`` transitions. Then
    every held transition can be drawn: with gamma = alpha = 0 and twin
    critics equal to their targets, the older transition's reward is the
    critics' own value (zero error), so only the newest one moves them. A
    batch of 2 misses it w.p. 1/4, so 8 updates (keys) all missing it would
    be a 1-in-65,000 event."""
    run = _sac_run(batch_size=2, buffer_size=4, gamma=0.0, alpha=0.0)
    k = jax.random.split(jax.random.key(6), 5)
    learner = _learner(run, k[0])
    one = learner.critic[0]
    learner = learner._replace(critic=(one, one), target=(one, one))
    x = jax.random.normal(k[1], (4, 2))
    a = jax.random.uniform(k[2], (4, 2), minval=-1, maxval=1)
    q = jax.vmap(lambda xi, ai: _q((one, one), xi, ai)[0])(x, a)
    reward = q.at[1].add(1.0)  # slot 1, the newest, has a TD error of 1
    buffer = {"x": x, "a": a, "reward": reward, "next_x": x, "done": jnp.zeros(4)}
    update = jax.jit(run._update)
    same = update(learner, buffer, jnp.int32(1), k[3])  # 1 < batch_size
    for g, w in zip(jax.tree.leaves(same), jax.tree.leaves(learner), strict=True):
        np.testing.assert_array_equal(g, w)
    keys = jax.random.split(k[4], 8)
    moved = [update(learner, buffer, jnp.int32(2), key).critic for key in keys]
    change = [
        max(
            float(jnp.abs(n - o).max())
            for n, o in zip(*map(jax.tree.leaves, (m, learner.critic)), strict=True)
        )
        for m in moved
    ]
    assert max(change) > 1e-4  # some update drew it


def _steps(run, learner, n, seed):
    """``n`` steps of the run from a fresh state with ``learner``."""
    state = run.init(jax.random.key(seed))._replace(learner=learner)
    keys = jax.random.split(jax.random.key(seed + 1), n)
    return key_scan(run.step, state, (jnp.arange(n), keys))


@pytest.mark.long
def test_buffer_holds_each_step_in_box_units_with_its_true_successor():
    """A ring of 4 after 7 steps (episodes of 3): slots 0-3 hold steps 4, 5,
    6, 3; ``a`` in [-1, 1] (the env's action over its half-width 0.1);
    ``next_x`` the position the action reached, also where an episode was
    cut (steps 2 and 5); a cut is no terminal (``done`` 0)."""
    run = _sac_run(batch_size=64, buffer_size=4, start_steps=7)
    state, record = _steps(run, _learner(run, jax.random.key(7)), 7, 30)
    obs, action = np.asarray(record["obs"]), np.asarray(record["action"])
    held = [4, 5, 6, 3]
    assert int(state.size) == 4
    np.testing.assert_allclose(state.buffer["x"], obs[held], atol=1e-6)
    np.testing.assert_allclose(state.buffer["a"], action[held] / 0.1, atol=1e-5)
    np.testing.assert_allclose(
        state.buffer["reward"], np.asarray(record["reward"])[held]
    )
    np.testing.assert_allclose(state.buffer["next_x"], (obs + action)[held], atol=1e-6)
    np.testing.assert_array_equal(state.buffer["done"], 0.0)
    np.testing.assert_array_equal(np.asarray(record["truncated"])[[2, 5]], True)


def test_random_actions_until_start_steps_then_the_policy():
    """The first ``start_steps`` actions do not depend on the actor's
    weights; the next one does (step 2 of 3: away from the origin, where a
    fresh bias-free network outputs 0 whatever its weights)."""
    run = _sac_run(batch_size=64, start_steps=2)
    actions = [
        np.asarray(_steps(run, _learner(run, jax.random.key(s)), 3, 42)[1]["action"])
        for s in (40, 41)
    ]
    np.testing.assert_array_equal(actions[0][:2], actions[1][:2])
    assert np.abs(actions[0][2] - actions[1][2]).min() > 1e-6


def test_target_critics_start_as_copies_of_the_critics():
    learner = _sac_run().init(jax.random.key(50)).learner
    leaves = zip(
        jax.tree.leaves(learner.target), jax.tree.leaves(learner.critic), strict=True
    )
    for target, critic in leaves:
        np.testing.assert_array_equal(target, critic)
