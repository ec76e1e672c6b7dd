"""AMAGO (agentrl.online.amago, algo ``amago``): its pieces and a smoke run.

- the multi-gamma TD targets against a hand computation, and the bootstrap
  (a shifted, ensemble-reduced value);
- the replay's ring buffer: wrap-around overwrites the oldest trials, and
  sampling returns whole stored trials, only from filled slots;
- the actor loss's pieces: the binary filter of the filtered BC term, the
  policy-improvement term's min over critics, and that neither trains the
  critics (the critic loss does);
- a tiny trainer runs jitted and vmapped over seeds; through ``fit``,
  resume and evaluation; it solves the flip bandit.

The trainer tests (``long``) compile KV-cache acting and the whole-trial
loss nested in scans: 1-4 min each on the 2-core CPU when it is shared
(measured at a load average of ~13); the pieces' tests take seconds.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_online_rl2 import FlipBandit

from agentrl import envs
from agentrl.algos import Amago
from agentrl.envs import grid
from agentrl.models import ModelConfig
from agentrl.models.config import complete_model_config
from agentrl.online.amago import (
    AmagoShape,
    AmagoTrainer,
    amago_hparams,
    amago_program,
    critic_values,
    ensemble_target,
    filtered_bc,
    next_values,
    policy_improvement,
    policy_log_probs,
    policy_values,
    replay_add,
    replay_init,
    replay_sample,
    td_targets,
)
from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig, TrainConfig
from agentrl.train.experiments import load_experiment


# ----------------------------------------------------------------- targets
def test_multi_gamma_td_targets_match_a_hand_computation():
    gammas = (0.5, 0.9)
    reward = jnp.array([[1.0, 0.0, 2.0]])
    done = jnp.array([[0.0, 0.0, 1.0]])  # the trial ends at its last step
    values = jnp.array([[[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]]])  # V(s_t, g)
    y = td_targets(reward, done, next_values(values), gammas, 2.0)
    # y[t, g] = (1 - g) * 2 * r_t + g * (1 - done_t) * V(s_{t+1}, g)
    hand = [
        [0.5 * 2 * 1 + 0.5 * 30, 0.1 * 2 * 1 + 0.9 * 40],
        [0.5 * 0 + 0.5 * 50, 0.1 * 0 + 0.9 * 60],
        [0.5 * 2 * 2, 0.1 * 2 * 2],  # no bootstrap past the trial's end
    ]
    np.testing.assert_allclose(y[0], hand, rtol=1e-6)


def test_bootstrap_is_the_policy_value_min_over_drawn_critics():
    # two critics x one discount x two actions
    q = jnp.array([[[1.0, 3.0]], [[2.0, 0.0]]])  # [C, G, A]
    probs = jnp.array([[0.25, 0.75]])  # [G, A]
    v = policy_values(q, probs)  # [C, G]
    np.testing.assert_allclose(v[:, 0], [0.25 + 2.25, 0.5])
    draws = jax.vmap(lambda k: ensemble_target(v, k, 1, 1.0))(
        jax.random.split(jax.random.key(0), 64)
    )
    # one critic drawn: each critic's value appears, nothing else
    assert set(np.round(np.asarray(draws[:, 0]), 6)) == {2.5, 0.5}
    wide = jnp.broadcast_to(v, (256, 2, 1))
    many = ensemble_target(wide, jax.random.key(1), 8, 1.0)
    np.testing.assert_allclose(many[:, 0].min(), 0.5)
    assert np.mean(np.asarray(many[:, 0]) == 0.5) > 0.95  # 8 draws: min w.p. 1-2^-8


def test_without_policy_improvement_the_bootstrap_is_the_drawn_critics_mean():
    """AMAGO's ``_critic_ensemble_to_td_target``: the mean of the drawn
    critics when ``online_coeff`` is 0 (the min underestimates without the
    policy-improvement term). Two critics valued 2.5 and 0.5, 8 drawn with
    replacement: 0.5 + 2 j / 8 for j draws of the first, j ~ Binomial(8, 1/2),
    mean 1.5 (sd 0.35 an entry: over 256 entries 0.022)."""
    v = jnp.broadcast_to(jnp.array([[2.5], [0.5]]), (256, 2, 1))
    mean = np.asarray(ensemble_target(v, jax.random.key(1), 8, 0.0))[:, 0]
    assert set(np.round((mean - 0.5) * 4, 6)) <= set(range(9))
    assert abs(mean.mean() - 1.5) < 0.1
    same_key_min = np.asarray(ensemble_target(v, jax.random.key(1), 8, 0.5))[:, 0]
    assert (same_key_min <= mean).all() and (same_key_min < mean).any()


# ------------------------------------------------------------------ replay
def _trials(ids, length=4):
    ids = jnp.asarray(ids, jnp.int32)
    return {
        "obs": jnp.broadcast_to(ids[:, None, None], (ids.shape[0], length, 2)),
        "action": jnp.broadcast_to(ids[:, None], (ids.shape[0], length)) + 100,
        "reward": jnp.broadcast_to(ids[:, None], (ids.shape[0], length)) * 0.5,
    }


def test_replay_wraps_around_and_samples_whole_trials():
    replay = replay_init(3, 4, jnp.zeros((2,), jnp.int32))
    replay = replay_add(replay, _trials([0, 1]))
    # only the two filled slots are sampled
    early = replay_sample(replay, jax.random.key(0), 200)
    assert set(np.unique(early["obs"][:, 0, 0]).tolist()) == {0, 1}
    replay = replay_add(replay, _trials([2, 3]))  # trial 3 overwrites trial 0
    assert int(replay.count) == 4
    np.testing.assert_array_equal(replay.action[:, 0], [103, 101, 102])
    batch = replay_sample(replay, jax.random.key(1), 300)
    ids = np.asarray(batch["obs"][:, 0, 0])
    assert set(np.unique(ids).tolist()) == {1, 2, 3}
    # every sampled row is one whole stored trial (its fields agree at every step)
    np.testing.assert_array_equal(
        batch["obs"], np.broadcast_to(ids[:, None, None], (300, 4, 2))
    )
    np.testing.assert_array_equal(
        batch["action"], np.broadcast_to(ids[:, None] + 100, (300, 4))
    )
    np.testing.assert_allclose(
        batch["reward"], np.broadcast_to(ids[:, None] * 0.5, (300, 4))
    )


# ------------------------------------------------------------- actor loss
def test_filtered_bc_keeps_positive_advantages_only():
    logp = jnp.array([-0.5, -1.0, -2.0])
    adv = jnp.array([-1.0, 0.0, 2.0])
    np.testing.assert_allclose(filtered_bc(logp, adv), [0.0, 0.0, 2.0])
    g_adv = jax.grad(lambda a: filtered_bc(logp, a).sum())(adv)
    np.testing.assert_array_equal(g_adv, 0.0)  # the filter is not trained
    g_logp = jax.grad(lambda lp: filtered_bc(lp, adv).sum())(logp)
    np.testing.assert_array_equal(g_logp, [0.0, 0.0, -1.0])


def test_policy_improvement_is_minus_the_min_critic_and_trains_only_the_policy():
    q = jnp.array([[[1.0, 3.0]], [[2.0, 0.0]]])  # [C, G, A]
    probs = jnp.array([[0.5, 0.5]])
    # critic values 2.0 and 1.0: the term is -min = -1.0
    np.testing.assert_allclose(policy_improvement(probs, q), [-1.0])
    np.testing.assert_array_equal(
        jax.grad(lambda x: policy_improvement(probs, x).sum())(q), 0.0
    )
    g = jax.grad(lambda p: policy_improvement(p, q).sum())(probs)
    np.testing.assert_allclose(g, [[-2.0, 0.0]])  # -Q of the min critic


# ----------------------------------------------------------------- trainer
def make_trainer(num_updates=2, trial=4, env=None, **changes):
    env = env or FlipBandit(num_arms=2, horizon=trial // 2)
    cfg = ModelConfig(
        num_layers=1, num_heads=2, d_model=16, d_ff=32, dropout=0.0, max_steps=trial
    )
    cfg = complete_model_config(cfg, env, Amago())
    base = dict(
        num_envs=4,
        trial_steps=trial,
        capacity=6,
        batch_size=4,
        grad_steps=2,
        num_updates=num_updates,
        gammas=(0.9, 0.99),
        num_critics=2,
        critics_in_target=2,
        critic_hidden=16,
        explore_steps=40,
        grad_clip=1.0,
    )
    shape = AmagoShape(**{**base, **changes})
    return AmagoTrainer(env, shape, cfg, env.sample_params)


@pytest.fixture(scope="module")
def tiny():
    """A tiny trainer, its initial state and one collected batch of trials."""
    trainer = make_trainer()
    k_init, k_tasks, k_collect = jax.random.split(jax.random.key(0), 3)
    state = jax.jit(trainer.init)(k_init, amago_hparams())
    tasks = jax.vmap(trainer.sample_task)(jax.random.split(k_tasks, 4))
    batch = jax.jit(trainer.collect)(
        state.params["model"], tasks, jnp.zeros(4), k_collect
    )
    return trainer, state, batch


def _zero(tree) -> bool:
    return all(np.all(np.asarray(x) == 0) for x in jax.tree.leaves(tree))


@pytest.mark.long
def test_only_the_critic_loss_trains_the_critics(tiny):
    trainer, state, batch = tiny

    @jax.jit
    def grads(hp):
        def loss(p):
            return trainer.loss(p, state.target, batch, jax.random.key(1), hp)[0]

        return jax.grad(loss)(state.params)

    actor_only = grads(amago_hparams(critic_coeff=0.0))
    assert _zero(actor_only["critics"]) and not _zero(actor_only["actor"])
    assert not _zero(actor_only["model"])  # the policy's gradient reaches the trunk
    critic_only = grads(amago_hparams(online_coeff=0.0, offline_coeff=0.0))
    assert not _zero(critic_only["critics"]) and _zero(critic_only["actor"])
    assert not _zero(critic_only["model"])  # so does the critics'


@pytest.mark.long
def test_the_acting_policy_is_the_last_discount_of_the_actor(tiny):
    trainer, state, batch = tiny
    model = trainer.weights(state)
    acting = model(batch["obs"], batch["action"], batch["reward"]).action
    h = model.features(batch["obs"], batch["action"], batch["reward"])
    logits = trainer.actor_logits(
        state.params["model"]["head"], state.params["actor"], h
    )
    assert logits.shape == (4, 4, 2, 2)  # [B, L, G (the acting one last), A]
    np.testing.assert_allclose(logits[..., -1, :], acting, rtol=1e-5, atol=1e-6)


@pytest.mark.long
def test_tiny_run_is_jitted_and_vmapped_over_seeds():
    trainer = make_trainer(num_updates=3)
    run = jax.jit(jax.vmap(trainer, in_axes=(0, None)))
    state, metrics = run(jax.random.split(jax.random.key(0), 2), amago_hparams())
    assert metrics["loss"].shape == (2, 3)
    assert np.isfinite(np.asarray(metrics["loss"])).all()
    assert np.asarray(state.replay.count).tolist() == [12, 12]  # 3 updates x 4 envs
    # the seeds differ
    assert not np.allclose(metrics["critic_loss"][0], metrics["critic_loss"][1])
    # the target heads moved towards the online ones, not onto them
    tgt = np.asarray(state.target["critics"]["l3"]["w"])
    cur = np.asarray(state.params["critics"]["l3"]["w"])
    assert not np.allclose(tgt, cur)


# ------------------------------------------------------------------ config
def test_bad_fields_are_named():
    with pytest.raises(ValueError, match="algo.capacity=2 must be >= algo.num_envs=4"):
        Amago(capacity=2, num_envs=4)
    with pytest.raises(ValueError, match=r"algo.gammas\[1\] must be in"):
        Amago(gammas=(0.9, 1.0))
    with pytest.raises(ValueError, match="algo.gamma must be in"):
        Amago(gamma=1.5)
    with pytest.raises(ValueError, match="algo.grad_steps"):
        Amago(grad_steps=0)
    with pytest.raises(ValueError, match="algo.tau must be in"):
        Amago(tau=2.0)


def test_explore_window_quiets_the_middle_of_an_episode():
    """AMAGO's T-Maze exploration: the schedule's epsilon at the first step
    and the last ``end`` steps, ``0.5 / horizon`` between (not randomised)."""
    from agentrl.envs.tmaze import TMaze

    env = TMaze(corridor_length=9)  # horizon 10: steps 0 .. 9
    cfg = ModelConfig(
        num_layers=1, num_heads=2, d_model=16, d_ff=32, dropout=0.0, max_steps=10
    )
    cfg = complete_model_config(cfg, env, Amago())
    shape = dict(
        num_envs=2,
        trial_steps=10,
        capacity=2,
        batch_size=1,
        grad_steps=1,
        num_updates=1,
        gammas=(0.999,),
        num_critics=1,
        critics_in_target=1,
        critic_hidden=8,
        explore_steps=10,
        grad_clip=1.0,
    )
    eps = jnp.array([0.8, 0.3])
    t = jnp.arange(10)
    plain = AmagoTrainer(env, AmagoShape(**shape), cfg, env.sample_params)
    got = jax.vmap(lambda s: plain.step_epsilon(eps, jnp.full((2,), s)))(t)
    np.testing.assert_allclose(got, jnp.broadcast_to(eps, (10, 2)))
    window = AmagoShape(**shape, explore_window=(0, 4))
    tmaze = AmagoTrainer(env, window, cfg, env.sample_params)
    got = np.asarray(jax.vmap(lambda s: tmaze.step_epsilon(eps, jnp.full((2,), s)))(t))
    loud = [0, 6, 7, 8, 9]  # t = 0 and t >= horizon - 4
    np.testing.assert_allclose(got[loud], np.broadcast_to(eps, (5, 2)))
    np.testing.assert_allclose(got[1:6], 0.05)  # 0.5 / horizon, every env
    with pytest.raises(ValueError, match="algo.explore_window"):
        Amago(explore_window=(1,))
    with pytest.raises(ValueError, match="algo.explore_window"):
        Amago(explore_window=(0, -1))
    assert Amago(explore_window=(0, 4)).explore_window == (0, 4)


def tiny_config() -> ExperimentConfig:
    return ExperimentConfig(
        name="amago_tiny",
        algo=Amago(
            trial_episodes=2,
            num_envs=4,
            capacity=8,
            batch_size=4,
            grad_steps=2,
            gammas=(0.9,),
            num_critics=2,
            critic_hidden=16,
            explore_steps=20,
        ),
        data=DataConfig(
            env="bernoulli_bandit",
            env_args=(("num_arms", 2), ("horizon", 3)),
            source="random",
        ),
        model=ModelConfig(num_layers=1, num_heads=2, d_model=16, d_ff=32, dropout=0.0),
        train=TrainConfig(
            steps=4,
            lr=1e-3,
            weight_decay=1e-3,
            warmup_steps=0,
            schedule="constant",
            log_every=2,
            checkpoint_every=2,
        ),
        eval=EvalConfig(num_tasks=3, num_episodes=2),
    )


@pytest.mark.long
def test_fit_resume_exact_and_evaluation(tmp_path):
    from flax import nnx

    from agentrl.evaluate.run import run_results
    from agentrl.train import fit
    from agentrl.train.rundir import load_run

    config = tiny_config()
    fit(config, tmp_path / "a", progress=False)
    fit(config, tmp_path / "b", progress=False, stop_at_step=2)
    fit(config, tmp_path / "b", progress=False)
    a, b = load_run(tmp_path / "a"), load_run(tmp_path / "b")
    assert a.step == b.step == 4
    assert a.config.model.max_steps == 6  # the trial: 2 episodes of 3 steps
    for x, y in zip(
        jax.tree.leaves(nnx.state(a.model, nnx.Param)),
        jax.tree.leaves(nnx.state(b.model, nnx.Param)),
        strict=True,
    ):
        np.testing.assert_array_equal(x, y)
    results, _ = run_results(tmp_path / "a", baselines=["random"])
    assert results["amago"].returns.shape == (3, 2)


@pytest.mark.long
def test_amago_solves_the_flip_bandit():
    trainer = make_trainer(
        num_updates=60, trial=10, capacity=64, grad_steps=4, batch_size=8
    )
    hp = amago_hparams(lr=1e-3, reward_scale=1.0, eps_end=0.0)
    _, metrics = jax.jit(trainer)(jax.random.key(0), hp)
    # chance: 5 of 10; the acting policy (with exploration decayed) finds the arm
    assert np.asarray(metrics["trial_return"])[-5:].mean() > 8.5


def test_config_round_trips_with_its_gammas():
    algo = dataclasses.replace(Amago(), gammas=(0.5, 0.9))
    back = Amago.from_config_dict(algo.to_config_dict() | {"gammas": [0.5, 0.9]})
    assert back == algo


def test_the_probability_clip_is_amagos_in_full_and_reaches_the_trainer():
    for name in ("amago_bandit", "amago_darkroom", "amago_key_to_door", "amago_tmaze"):
        # the cpu records were made unclipped; the full presets are AMAGO's
        assert load_experiment(name, "cpu").algo.prob_clip is None
        assert load_experiment(name, "full").algo.prob_clip == (0.001, 0.99)
    config = load_experiment("amago_bandit", "smoke", {"algo.prob_clip": "0.2,0.6"})
    env = envs.make(config.data.env, **dict(config.data.env_args))
    assert amago_program(config, env).trainer.shape.prob_clip == (0.2, 0.6)
    with pytest.raises(ValueError, match="algo.prob_clip must be None or"):
        Amago(prob_clip=(0.5, 0.1))
    # a run saved before the field existed reads back with the policy it had
    saved = {k: v for k, v in Amago().to_config_dict().items() if k != "prob_clip"}
    assert Amago.from_config_dict(saved).prob_clip is None


def test_trial_metrics_read_episodes_where_they_end():
    from agentrl.online.ppo import trial_metrics

    rewards = jnp.asarray(
        [
            [1.0, 0.0, 2.0, 0.0, 4.0, 0.0, 8.0, 16.0],  # ends at 2, 5 (7 cut off)
            [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0],  # a fixed horizon of 4
            [3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],  # no end: one cut episode
        ]
    )
    ends = jnp.zeros((3, 8), bool)
    ends = (
        ends.at[0, jnp.asarray([2, 5])].set(True).at[1, jnp.asarray([3, 7])].set(True)
    )
    m = trial_metrics(rewards, ends)
    first = np.array([3.0, 4.0, 4.0])  # to the first end (or the whole trial)
    last = np.array([4.0, 8.0, 4.0])  # between the last two ends
    assert float(m["episode_return_first"]) == pytest.approx(first.mean())
    assert float(m["episode_return_last"]) == pytest.approx(last.mean())
    assert float(m["trial_return"]) == pytest.approx(float(rewards.sum(1).mean()))


@pytest.mark.long
def test_amago_logs_episodes_where_they_end_on_key_to_door():
    """Dark Key-to-Door's episodes end at the door, so a trial of 4 x 12
    steps can hold 5: the logged first and last episodes are read from the
    collected episode ends, not sliced by the horizon (which mixed two
    episodes). The trials are collected again with the update's own keys."""
    from agentrl.envs import make as make_env
    from agentrl.online.ppo import trial_metrics

    env = make_env("dark_key_to_door", size=3, horizon=12)
    trainer = make_trainer(
        num_updates=1, trial=48, env=env, num_envs=32, capacity=40, grad_steps=1
    )
    hp = amago_hparams()
    state = jax.jit(trainer.init)(jax.random.key(0), hp)
    again = jax.random.clone(state.key)  # to collect the update's trials again
    _, metrics = jax.jit(trainer.update)(state, hp)
    # the update's collection, again (its key splits, as AmagoTrainer.update)
    _, k_task, k_eps, k_act, _ = jax.random.split(again, 5)
    tasks = jax.vmap(trainer.sample_task)(jax.random.split(k_task, 32))
    eps = jax.random.uniform(k_eps, (32,)) * trainer.epsilon(hp, state.update)
    trials = jax.jit(trainer.collect)(state.params["model"], tasks, eps, k_act)
    ends = np.asarray(trials["episode_end"])
    assert (ends.sum(1) > 4).any()  # a door reached early: a fifth episode
    expected = trial_metrics(trials["reward"], trials["episode_end"])
    sliced = float(trials["reward"][:, -12:].sum(1).mean())
    for name in ("trial_return", "episode_return_first", "episode_return_last"):
        assert float(metrics[name]) == pytest.approx(float(expected[name]))
    assert sliced != pytest.approx(float(expected["episode_return_last"]))


# Mutants the tests above let through (session 56's mutation pass).


def _policy(logits, clip) -> np.ndarray:
    """pi by hand: the softmax, or clipped to ``clip`` and renormalised."""
    pi = np.asarray(jax.nn.softmax(logits), np.float64)
    if clip is None:
        return pi
    pi = np.clip(pi, *clip)
    return pi / pi.sum(-1, keepdims=True)


def test_policy_log_probs_clip_renormalise_and_hold_the_sum_fixed():
    logits = jnp.log(jnp.array([0.995, 0.004, 0.001]))
    clipped = np.array([0.99, 0.004, 0.001]) / 0.995  # AMAGO's Discrete
    log_pi = policy_log_probs(logits, (0.001, 0.99))
    np.testing.assert_allclose(np.exp(log_pi), clipped, rtol=1e-5)
    np.testing.assert_allclose(
        policy_log_probs(logits, None), jax.nn.log_softmax(logits), rtol=1e-6
    )
    # the sum held fixed: an unclipped entry's gradient is the softmax's,
    # one clipped at a bound has none
    p = np.asarray(jax.nn.softmax(logits))
    grad = jax.grad(lambda z: policy_log_probs(z, (0.001, 0.99))[1])(logits)
    np.testing.assert_allclose(grad, np.eye(3)[1] - p, atol=1e-6)
    grad = jax.grad(lambda z: policy_log_probs(z, (0.001, 0.99))[0])(logits)
    np.testing.assert_array_equal(grad, 0.0)


@pytest.mark.long
def test_collection_samples_from_the_clipped_policy():
    # a head that puts all but 1e-7 on action 0: the softmax never plays
    # action 1; clipped to [0.4, 0.5] the policy is (0.56, 0.44)
    played = {}
    for clip in (None, (0.4, 0.5)):
        trainer = make_trainer(trial=8, prob_clip=clip)
        k_init, k_tasks, k_collect = jax.random.split(jax.random.key(3), 3)
        params = jax.jit(trainer.init)(k_init, amago_hparams()).params["model"]
        head = params["head"]["proj"]
        head["kernel"][...] = jnp.zeros_like(head["kernel"][...])
        head["bias"][...] = jnp.array([8.0, -8.0])
        tasks = jax.vmap(trainer.sample_task)(jax.random.split(k_tasks, 4))
        batch = jax.jit(trainer.collect)(params, tasks, jnp.zeros(4), k_collect)
        played[clip] = np.asarray(batch["action"])
    assert (played[None] == 0).all()
    assert 0.25 < (played[(0.4, 0.5)] == 1).mean() < 0.65


@pytest.mark.parametrize("clip", [None, (0.1, 0.5)])  # 2 actions: it binds
@pytest.mark.long
def test_critic_and_actor_losses_by_their_definitions(clip):
    # One critic (the REDQ min is that critic). Target heads apart from the
    # online ones (x -3), reward scale 2, gammas (0.9, 0.99), trial of L = 4:
    #   V_targ(s_t, g) = sum_a pi_targ(a | s_t, g) Q_targ(s_t, a, g)
    #   y_t = (1 - g) 2 r_t + g V_targ(s_(t+1), g) for t < L - 1,
    #   y_(L-1) = (1 - g) 2 r_(L-1) (the trial's end: no bootstrap)
    #   critic loss = mean (Q(s_t, a_t, g) - y_t)^2
    # and with online_coeff 1, offline_coeff 0 the actor loss is
    #   mean -sum_a pi(a | s_t, g) Q(s_t, a, g)
    # (pi: the softmax, or with AMAGO's clip the clipped, renormalised one)
    trainer = make_trainer(num_critics=1, critics_in_target=1, prob_clip=clip)
    hp = amago_hparams(reward_scale=2.0, online_coeff=1.0, offline_coeff=0.0)
    k_init, k_tasks, k_collect = jax.random.split(jax.random.key(0), 3)
    state = jax.jit(trainer.init)(k_init, hp)
    tasks = jax.vmap(trainer.sample_task)(jax.random.split(k_tasks, 4))
    batch = jax.jit(trainer.collect)(
        state.params["model"], tasks, jnp.ones(4), k_collect
    )
    assert np.asarray(batch["reward"]).any()
    target = jax.tree.map(lambda x: -3.0 * x, state.target)
    _, m = jax.jit(trainer.loss)(state.params, target, batch, jax.random.key(1), hp)

    h = trainer.model(state.params["model"]).features(
        batch["obs"], batch["action"], batch["reward"]
    )
    pi_t = _policy(trainer.actor_logits(target["head"], target["actor"], h), clip)
    q_t = critic_values(target["critics"], h, 2)[..., 0, :, :]  # [B, L, G, A]
    v_t = np.asarray((pi_t * q_t).sum(-1))
    g = np.array([0.9, 0.99])
    y = (1 - g) * 2.0 * np.asarray(batch["reward"])[..., None]
    y[:, :-1] += g * v_t[:, 1:]
    q = np.asarray(critic_values(state.params["critics"], h, 2)[..., 0, :, :])
    a = np.asarray(batch["action"])[..., None, None]
    q_taken = np.take_along_axis(q, np.broadcast_to(a, q.shape[:-1] + (1,)), -1)[..., 0]
    np.testing.assert_allclose(
        float(m["critic_loss"]), np.mean((q_taken - y) ** 2), rtol=1e-4
    )
    pi = _policy(
        trainer.actor_logits(state.params["model"]["head"], state.params["actor"], h),
        clip,
    )
    want = -np.mean(np.asarray((pi * q).sum(-1)))
    np.testing.assert_allclose(float(m["actor_loss"]), want, rtol=1e-4)
    # with offline_coeff 1 alone, filtered BC: the advantage is
    #   A(s_t, a_t, g) = Q(s_t, a_t, g) - sum_a pi(a | s_t, g) Q(s_t, a, g)
    # and the loss mean -[A > 0] log pi(a_t | s_t, g)
    hp = amago_hparams(reward_scale=2.0, online_coeff=0.0, offline_coeff=1.0)
    _, m = jax.jit(trainer.loss)(state.params, target, batch, jax.random.key(1), hp)
    advantage = q_taken - np.asarray((pi * q).sum(-1))
    assert 0 < (advantage > 0).mean() < 1  # both kinds of step are in the batch
    pi_taken = np.take_along_axis(pi, np.broadcast_to(a, q_taken.shape + (1,)), -1)
    want = -np.mean((advantage > 0) * np.log(pi_taken[..., 0]))
    np.testing.assert_allclose(float(m["actor_loss"]), want, rtol=1e-4)
    np.testing.assert_allclose(float(m["filter_frac"]), (advantage > 0).mean())


@pytest.mark.long
def test_target_heads_take_a_tau_step_towards_the_online_heads():
    # one gradient step at tau 0.25 from targets equal to the heads p0:
    # target = 0.75 p0 + 0.25 p1, p1 the heads after the step
    trainer = make_trainer(num_updates=1, grad_steps=1)
    hp = amago_hparams(tau=0.25, lr=1e-2)
    state = jax.jit(trainer.init)(jax.random.key(0), hp)
    new, _ = jax.jit(trainer.update)(state, hp)
    p0, p1 = trainer.heads(state.params), trainer.heads(new.params)
    moved = [
        np.abs(np.asarray(b) - np.asarray(a)).max()
        for a, b in zip(jax.tree.leaves(p0), jax.tree.leaves(p1), strict=True)
    ]
    assert max(moved) > 1e-3  # the step moved the heads
    for t1, a, b in zip(
        jax.tree.leaves(new.target),
        jax.tree.leaves(p0),
        jax.tree.leaves(p1),
        strict=True,
    ):
        np.testing.assert_allclose(
            t1, 0.75 * np.asarray(a) + 0.25 * np.asarray(b), rtol=1e-5, atol=1e-6
        )


@pytest.mark.long
def test_collected_trials_pair_each_action_with_the_state_it_was_taken_in():
    # Dark Room (no termination, horizon 5): inside an episode the next
    # stored observation is the cell the stored action moves to
    env = envs.make("darkroom", size=5, horizon=5)
    trainer = make_trainer(trial=10, env=env)
    k_init, k_tasks, k_collect = jax.random.split(jax.random.key(0), 3)
    state = jax.jit(trainer.init)(k_init, amago_hparams())
    tasks = jax.vmap(env.sample_params)(jax.random.split(k_tasks, 4))
    trials = jax.jit(trainer.collect)(
        state.params["model"], tasks, jnp.ones(4), k_collect
    )
    obs, act = np.asarray(trials["obs"]), np.asarray(trials["action"])
    end = np.asarray(trials["episode_end"])
    assert end[:, 4].all() and not end[:, :4].any()
    for b in range(4):
        for t in range(9):
            if not end[b, t]:
                nxt = grid.move(grid.cell_pos(obs[b, t], 5), act[b, t], 5)
                assert obs[b, t + 1] == int(grid.cell_id(nxt, 5)), (b, t)
