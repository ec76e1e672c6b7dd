"""RL² (agentrl.online + algo rl2): probes with known answers, resume, vmap.

- a 2-armed bandit whose best arm flips between trials: no fixed policy
  earns more than chance (5 of 10 pulls); RL² must find the arm in context;
- GAE across episode boundaries: an episode's end inside a trial does not
  stop bootstrapping, a trial's end does (numbers worked by hand);
- the evaluation agent replays training's forward pass exactly;
- vmapped seeds equal single runs; fit stopped and resumed equals an
  uninterrupted fit (bit-identical weights); continuous actions run.
"""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl.agents.agent import run_batched_agent
from agentrl.algos import RL2
from agentrl.envs.bandits import BernoulliBandit
from agentrl.online.agent import RL2Agent
from agentrl.online.ppo import PPOShape, TrialPPO, trial_hparams
from agentrl.prng import key_scan
from agentrl.rl.ppo import gae_across_episodes
from agentrl.train import fit
from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig
from agentrl.train.experiments import online_train_config
from agentrl.train.rundir import load_run


def hp(**changes):
    return trial_hparams(**{"lr": 3e-3, **changes})


class FlipBandit(BernoulliBandit):
    """Two arms paying 1 and 0 (deterministic); which one pays flips per task."""

    def sample_params(self, key):
        flip = jax.random.bernoulli(key)
        means = jnp.where(flip, jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0]))
        return self._params(means)


def small_shape(**changes) -> PPOShape:
    base = dict(
        num_envs=32,
        trial_episodes=1,
        rollout_steps=20,
        num_epochs=4,
        num_minibatches=4,
        num_updates=40,
        hidden=32,
        embed=32,
        grad_clip=0.5,
    )
    return PPOShape(**{**base, **changes})


def test_gae_runs_across_episodes_and_stops_at_trial_end():
    # gamma = lam = 1: the advantage is the sum of later rewards (until the
    # trial ends) plus the bootstrap, minus V(s_t).
    value = jnp.array([[1.0], [2.0], [3.0], [4.0]])
    reward = jnp.array([[1.0], [0.0], [5.0], [1.0]])
    trial_end = jnp.array([[False], [True], [False], [False]])
    next_value = jnp.array([10.0])
    adv = gae_across_episodes(value, next_value, reward, trial_end, 1.0, 1.0)
    # steps 0-1 are one trial (ends at 1: no bootstrap past it);
    # steps 2-3 continue into the next rollout (bootstrap 10).
    np.testing.assert_allclose(adv[:, 0], [1.0 - 1.0, 0.0 - 2.0, 16.0 - 3.0, 11 - 4])


def test_episode_end_inside_a_trial_is_not_terminal():
    """Two episodes per trial: the first's last step bootstraps from the second."""
    env = FlipBandit(num_arms=2, horizon=2)
    trainer = TrialPPO(env, small_shape(trial_episodes=2, rollout_steps=4), None)
    assert trainer.trial.horizon == 4
    value = jnp.zeros((4, 1))
    reward = jnp.array([[0.0], [0.0], [0.0], [1.0]])
    trial_end = jnp.array([[False], [False], [False], [True]])
    adv = gae_across_episodes(value, jnp.zeros(1), reward, trial_end, 0.5, 1.0)
    # the reward of episode 2 reaches episode 1's steps, discounted
    np.testing.assert_allclose(adv[:, 0], [0.125, 0.25, 0.5, 1.0])


@pytest.mark.long
def test_rl2_solves_the_flip_bandit_in_context():
    env = FlipBandit(num_arms=2, horizon=10)
    trainer = TrialPPO(env, small_shape(), env.sample_params)
    state, metrics = jax.jit(trainer)(jax.random.key(0), hp())
    trial_return = np.asarray(metrics["trial_return"])
    # chance (and any fixed policy): 5 of 10; in context: 9.5 (one probe)
    assert trial_return[0] < 6.5
    assert trial_return[-5:].mean() > 8.5
    # the trained weights act the same way in the evaluation harness
    agent = RL2Agent(state.weights, trainer.core, env, greedy=True)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(7), 64))
    hist, _ = run_batched_agent(env, agent, params, jax.random.key(8), 10)
    per_task = np.asarray(hist.reward).sum(1)
    assert per_task.mean() > 8.5
    # both arms are best on some held-out tasks: the learner adapts
    best = np.asarray(params.means).argmax(1)
    assert 0 < best.sum() < 64
    assert per_task[best == 0].mean() > 8.5 and per_task[best == 1].mean() > 8.5


@pytest.mark.long
def test_agent_replays_the_training_forward_pass():
    """The evaluation agent acts on what the training unroll computes.

    A greedy agent runs two 3-step episodes (one trial); rebuilding its
    inputs (previous action and reward, new-episode flag) and unrolling the
    core as the PPO update does gives logits whose argmax are its actions.
    """
    env = FlipBandit(num_arms=2, horizon=3)
    trainer = TrialPPO(env, small_shape(trial_episodes=2), env.sample_params)
    weights = trainer.core.init(jax.random.key(1))
    # perturb the weights so the greedy actions vary over the history
    weights = jax.tree.map(
        lambda w: w + 0.5 * jax.random.normal(jax.random.key(5), w.shape), weights
    )
    agent = RL2Agent(weights, trainer.core, env, greedy=True)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(2), 3))
    hist, _ = run_batched_agent(env, agent, params, jax.random.key(3), 6)
    a, r = np.asarray(hist.action), np.asarray(hist.reward)
    done = np.asarray(hist.truncated)
    prev_a = np.concatenate([np.zeros((3, 1), a.dtype), a[:, :-1]], 1)
    prev_r = np.concatenate([np.zeros((3, 1), r.dtype), r[:, :-1]], 1)
    first = np.concatenate([np.ones((3, 1), bool), done[:, :-1]], 1)
    assert first[:, 3].all() and not first[:, 1:3].any()  # episode 2 starts
    obs = {
        "obs": jnp.zeros((6, 3, 1)),
        "prev_action": jnp.asarray(prev_a.T),
        "prev_reward": jnp.asarray(prev_r.T),
    }
    xs = jax.vmap(jax.vmap(trainer.features))(obs, jnp.asarray(first.T))
    out, _ = trainer.core.unroll(
        weights, trainer.core.init_hidden((3,)), xs, jnp.zeros((6, 3), bool)
    )
    np.testing.assert_array_equal(np.asarray(out).argmax(-1).T, a)


@pytest.mark.long
def test_hidden_state_resets_at_trial_start():
    env = FlipBandit(num_arms=2, horizon=3)
    core = TrialPPO(env, small_shape(), env.sample_params).core
    weights = core.init(jax.random.key(0))
    xs = jax.random.normal(jax.random.key(1), (5, 2, core.dim))
    resets = jnp.array([[True, True]] + [[False, False]] * 2 + [[True, False]] * 2)
    resets = resets.at[4].set(jnp.array([False, False]))
    h0 = jax.random.normal(jax.random.key(2), (2, core.hidden))
    out, _ = core.unroll(weights, h0, xs, resets)
    # env 0's steps 3-4 start a new trial: they equal a fresh unroll of them
    fresh, _ = core.unroll(
        weights, jnp.zeros((1, core.hidden)), xs[3:, :1], resets[3:, :1]
    )
    np.testing.assert_allclose(out[3:, :1], fresh, rtol=1e-6, atol=1e-6)
    # env 1 never resets after step 0: its steps 3-4 depend on steps 0-2
    other, _ = core.unroll(
        weights, jnp.zeros((1, core.hidden)), xs[3:, 1:], resets[3:, 1:]
    )
    assert not np.allclose(out[3:, 1:], other, atol=1e-4)


@pytest.mark.long
def test_gru_scan_gradients_equal_autodiff_of_the_plain_recurrence():
    """The hand-written backward pass of the replay is the exact gradient."""
    from agentrl.rl.cores import GRUCore

    core = GRUCore(6, 3, 8, 5, True)
    weights = core.init(jax.random.key(0))
    xs = jax.random.normal(jax.random.key(1), (7, 3, 6))
    resets = jnp.array([[True, False, False]] * 2 + [[False, True, False]] * 5)
    h0 = jax.random.normal(jax.random.key(2), (3, 8))

    def plain(w, h0):  # the textbook GRU, autodiff through a lax.scan
        g = w["gru"]
        xi = jax.nn.relu(xs @ w["embed"]["w"] + w["embed"]["b"]) @ g["wi"] + g["bi"]

        def body(h, inp):
            xi_t, reset = inp
            h = jnp.where(reset[:, None], 0.0, h)
            xr, xz, xn = jnp.split(xi_t, 3, -1)
            hr, hz, hn = jnp.split(h @ g["wh"] + g["bh"], 3, -1)
            r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
            h = (1.0 - z) * jnp.tanh(xn + r * hn) + z * h
            return h, h

        return core.heads(w, jax.lax.scan(body, h0, (xi, resets))[1])

    ct = jax.random.normal(jax.random.key(3), (7, 3, 3))

    def loss(unroll):
        def f(w, h0):
            out, value = unroll(w, h0)
            return (out * ct).sum() + (value * value).sum()

        return jax.grad(f, argnums=(0, 1))

    ours = loss(lambda w, h: core.unroll(w, h, xs, resets))(weights, h0)
    ref = loss(plain)(weights, h0)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(ref), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    # h0 of an env reset at step 0 gets no gradient; the others do
    assert np.all(np.asarray(ours[1][0]) == 0) and np.abs(ours[1][1:]).max() > 0


@pytest.mark.long
def test_vmapped_seeds_equal_single_runs():
    env = FlipBandit(num_arms=2, horizon=5)
    trainer = TrialPPO(env, small_shape(num_updates=3, num_envs=8), env.sample_params)
    keys = jax.random.split(jax.random.key(0), 2)
    lrs = jnp.array([1e-3, 3e-3], jnp.float32)
    params = dict(hp())
    vmapped = jax.jit(jax.vmap(lambda k, lr: trainer(k, {**params, "lr": lr})))
    states, metrics = vmapped(jax.random.clone(keys), lrs)  # keys reused below
    single = jax.jit(trainer)
    for i in range(2):
        state, m = single(keys[i], {**params, "lr": lrs[i]})
        for x, y in zip(
            jax.tree.leaves(state.weights), jax.tree.leaves(states.weights), strict=True
        ):
            np.testing.assert_allclose(x, y[i], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(m["loss"], metrics["loss"][i], rtol=1e-4, atol=1e-6)


def tiny_config(env="bernoulli_bandit", env_args=(("num_arms", 2), ("horizon", 6))):
    return ExperimentConfig(
        name="rl2-tiny",
        algo=RL2(num_envs=8, rollout_steps=6, hidden=8, embed=8, trial_episodes=2),
        data=DataConfig(env=env, env_args=env_args, source="random"),
        train=online_train_config(
            steps=6,
            lr=1e-3,
            schedule="constant",
            log_every=2,
            checkpoint_every=2,
        ),
        eval=EvalConfig(num_tasks=4, num_episodes=2),
    )


@pytest.mark.long
def test_fit_resume_is_exact(tmp_path):
    config = tiny_config()
    fit(config, tmp_path / "a", progress=False)
    fit(config, tmp_path / "b", progress=False, stop_at_step=4)
    assert load_run(tmp_path / "b").step == 4
    fit(config, tmp_path / "b", progress=False)
    a, b = load_run(tmp_path / "a"), load_run(tmp_path / "b")
    assert a.step == b.step == 6
    for x, y in zip(jax.tree.leaves(a.model), jax.tree.leaves(b.model), strict=True):
        np.testing.assert_array_equal(x, y)
    # a changed hyperparameter is another run: resuming with it is refused
    other = dataclasses.replace(
        config, algo=dataclasses.replace(config.algo, gamma=0.9)
    )
    with pytest.raises(ValueError, match="algo.gamma"):
        fit(other, tmp_path / "a", progress=False)
    lines = (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [2, 4, 6]
    run_json = json.loads((tmp_path / "a" / "run.json").read_text())
    assert run_json["trained_online"] is True


@pytest.mark.long
def test_a_run_stopped_between_log_steps_logs_what_an_unstopped_one_does(tmp_path):
    """The log line after a resume from a checkpoint between log steps
    averages every update since the last line, as the unstopped run's (the
    stopped run also logged its stop step, 3)."""
    config = tiny_config()
    fit(config, tmp_path / "a", progress=False)
    fit(config, tmp_path / "b", progress=False, stop_at_step=3)
    fit(config, tmp_path / "b", progress=False)
    a = (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()
    b = (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    drop = ("time", "wall", "steps_per_s")  # timings differ between runs
    clean = lambda lines: [  # noqa: E731
        {k: v for k, v in json.loads(x).items() if not k.startswith(drop)}
        for x in lines
    ]
    logged = [x for x in clean(b) if x["step"] != 3]
    assert [x["step"] for x in clean(b)] == [2, 3, 4, 6]
    assert clean(a) == logged


@pytest.mark.long
def test_fit_equals_the_one_jit_program(tmp_path):
    """fit's update-by-update loop computes what program(key, hparams) does."""
    from agentrl.configtools import default_hparams
    from agentrl.envs import make as make_env
    from agentrl.train.config import complete_config

    config = tiny_config()
    fit(config, tmp_path / "a", progress=False)
    env = make_env("bernoulli_bandit", num_arms=2, horizon=6)
    full = complete_config(config, env)
    program = full.algo.make_online_train(full, env)
    state, _ = jax.jit(program)(jax.random.key(0), default_hparams(full))
    for x, y in zip(
        jax.tree.leaves(load_run(tmp_path / "a").model),
        jax.tree.leaves(program.weights(state)),
        strict=True,
    ):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


@pytest.mark.long
def test_train_members_equal_fit_runs(tmp_path):
    """Seeds x a traced setting in one program = fit with that seed/setting."""
    from agentrl.envs import make as make_env
    from agentrl.sweep.online import train_members

    config = tiny_config()
    env = make_env("bernoulli_bandit", num_arms=2, horizon=6)
    state, metrics = train_members(config, env, [0, 1], [{}, {"algo.ent_coef": 0.1}])
    assert metrics["loss"].shape == (2, 2, 6)
    member = 3  # seed 1, ent_coef 0.1
    other = dataclasses.replace(
        config,
        algo=dataclasses.replace(config.algo, ent_coef=0.1),
        train=dataclasses.replace(config.train, seed=1),
    )
    fit(other, tmp_path / "m", progress=False)
    single = load_run(tmp_path / "m").model
    vmapped = jax.tree.map(lambda x: x[member], state.weights)
    for x, y in zip(jax.tree.leaves(single), jax.tree.leaves(vmapped), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="not traced fields"):
        train_members(config, env, [0], [{"algo.hidden": 4}])


@pytest.mark.long
def test_held_out_goals_are_never_trained_on_and_evaluation_runs(tmp_path):
    from agentrl.evaluate.run import run_results

    config = dataclasses.replace(
        tiny_config("darkroom", (("size", 5), ("horizon", 4))),
        train=dataclasses.replace(tiny_config().train, steps=2),
    )
    fit(config, tmp_path / "r", progress=False)
    run = load_run(tmp_path / "r")
    train_ids = set(run.env.task_split(0.8, 0).train.tolist())
    validation, test = set(run.split["validation"]), set(run.split["test"])
    # three-way, as a dataset's: protocol choices on validation goals
    assert validation and test and not validation & test
    assert not train_ids & (validation | test)
    assert len(train_ids | validation | test) == run.env.num_tasks
    held_out, ids = run.held_out(which="validation")
    assert set(ids) <= validation
    results, _ = run_results(tmp_path / "r", baselines=["random"])
    assert set(results) == {"rl2", "random"}
    # the test goals only (up to eval.num_tasks), each for its episodes
    assert results["rl2"].returns.shape == (min(config.eval.num_tasks, len(test)), 2)


@pytest.mark.long
def test_continuous_actions():
    from agentrl.envs import make as make_env

    env = make_env("point_robot")
    trainer = TrialPPO(
        env, small_shape(num_envs=4, rollout_steps=8, num_updates=2), env.sample_params
    )
    state, metrics = jax.jit(trainer)(jax.random.key(0), hp())
    assert np.isfinite(np.asarray(metrics["loss"])).all()
    assert "log_std" in state.weights
    agent = RL2Agent(state.weights, trainer.core, env)
    params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(1), 2))
    hist, _ = run_batched_agent(env, agent, params, jax.random.key(2), 5)
    space = env.action_space(None)
    a = np.asarray(hist.action)
    assert a.shape == (2, 5, *space.shape)
    assert (a >= np.asarray(space.low) - 1e-6).all() and (
        a <= np.asarray(space.high) + 1e-6
    ).all()


def test_bad_fields_are_named():
    with pytest.raises(ValueError, match="algo.num_minibatches"):
        RL2(num_envs=6, num_minibatches=4)
    with pytest.raises(ValueError, match="algo.gamma"):
        RL2(gamma=1.5)
    with pytest.raises(ValueError, match="algo.hidden"):
        RL2(hidden=0)


def test_rollout_keys_are_the_per_step_splits():
    """The keys drawn before the rollout loop are the ones each step used to
    split for itself (act; env step and new trial per env; task and reset)."""
    env = FlipBandit(num_arms=2, horizon=3)
    trainer = TrialPPO(env, small_shape(num_envs=4, rollout_steps=5), None)
    key = jax.random.key(3)
    keys = trainer.rollout_keys(jax.random.clone(key))  # re-derived below
    data = {k: jax.random.key_data(v) for k, v in keys.items()}
    assert {k: v.shape[:2] for k, v in data.items()} == {
        "act": (5, 2),
        "step": (5, 4),
        "task": (5, 4),
        "reset": (5, 4),
    }
    for t, k in enumerate(jax.random.split(key, 5)):
        k_act, k_step, k_new = jax.random.split(k, 3)
        new = jax.vmap(jax.random.split)(jax.random.split(k_new, 4))
        expected = {
            "act": k_act,
            "step": jax.random.split(k_step, 4),
            "task": new[:, 0],
            "reset": new[:, 1],
        }
        for name, want in expected.items():
            np.testing.assert_array_equal(data[name][t], jax.random.key_data(want))


# Mutants the tests above let through (session 56's mutation pass).


def _rollout_of_update(trainer, state):
    """The records ``update(state)`` acts on (its key splits, as TrialPPO.update)."""
    # the update's own key again, cloned: an equality check (jax_debug_key_reuse)
    _, k_roll, _ = jax.random.split(jax.random.clone(state.key), 3)
    _, rec = key_scan(
        lambda c, k: trainer._env_step(state.weights, c, k),
        state.streams(),
        trainer.rollout_keys(k_roll),
    )
    return jax.tree.map(np.asarray, rec)


def _numpy_gae(value, reward, trial_end, bootstrap, gamma, lam):
    """``[T, N]`` GAE one step at a time; ``bootstrap [N]`` V after the rollout."""
    adv, acc = np.zeros_like(value, dtype=np.float64), np.zeros(value.shape[1])
    for t in reversed(range(len(value))):
        following = bootstrap if t + 1 == len(value) else value[t + 1]
        keep = 1.0 - trial_end[t]
        acc = reward[t] + gamma * keep * following - value[t] + gamma * lam * keep * acc
        adv[t] = acc
    return adv


@pytest.mark.long
def test_lr0_update_replays_its_rollout_and_regresses_on_gae_targets():
    # FlipBandit episodes of 3 steps, trials of 2 episodes (6 steps),
    # rollouts of 9 steps: update 1 holds a trial end (step 5) and ends at
    # an episode end inside a trial; update 2 starts mid-trial (its replay
    # starts from the carried hidden state), crosses a trial end at its
    # step 2 and ends at one (step 8).
    env = FlipBandit(num_arms=2, horizon=3)
    shape = small_shape(
        num_envs=8, trial_episodes=2, rollout_steps=9,
        num_epochs=1, num_minibatches=1, num_updates=2,
    )  # fmt: skip
    trainer = TrialPPO(env, shape, env.sample_params)
    h = hp(lr=0.0, reward_scale=0.5, gamma=0.9, gae_lambda=0.8)
    update = jax.jit(trainer.update)
    s0 = trainer.init(jax.random.key(0), h)
    s1, m1 = update(s0, h)
    _, m2 = update(s1, h)
    r1, r2 = _rollout_of_update(trainer, s0), _rollout_of_update(trainer, s1)
    assert r1["trial_end"][5].all() and not r1["trial_end"][8].any()
    assert r2["trial_end"][2].all() and r2["trial_end"][8].all()
    for m in (m1, m2):  # the replay reproduces the acting pass
        assert abs(float(m["approx_kl"])) < 1e-6
    bootstraps = (
        r2["value"][0],
        np.zeros(8),
    )  # V of the next step; unused at a trial end
    for m, rec, boot in zip((m1, m2), (r1, r2), bootstraps, strict=True):
        adv = _numpy_gae(
            rec["value"], 0.5 * rec["reward"], rec["trial_end"], boot, 0.9, 0.8
        )
        np.testing.assert_allclose(
            float(m["vf_loss"]), 0.5 * np.mean(adv**2), rtol=1e-4, atol=1e-7
        )
