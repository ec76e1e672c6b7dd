"""Meta-DT: the world model's windows and loss, the complementary prompt, the
policy's loss, and acting in context on exactly the inputs it trains on."""

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from agentrl import envs
from agentrl.algos.meta_dt import MetaDT, split_episodes
from agentrl.evaluate import run_batched_agent
from agentrl.models.world_model import (
    WorldPass,
    episode_tokens,
    features,
    history_windows,
    join,
    prediction_errors,
    prompt_tokens,
    select_prompt_start,
    world_model_loss,
    world_pass,
)
from agentrl.train.config import complete_config
from agentrl.train.experiments import load_experiment

TARGET = 4.0
SMALL_ENV = "(('size', 5), ('horizon', 6))"


def test_prompt_is_the_segment_of_largest_error():
    errors = jnp.array(
        [
            [0, 0, 9, 9, 9, 0, 0, 1, 1, 1],  # the middle segment
            [9, 9, 9, 0, 0, 0, 1, 2, 1, 0],  # the first h steps are skipped
            [0, 0, 0, 0, 1, 3, 0, 0, 0, 0],  # 6 steps: the last start is 3
            [5, 0, 0, 0, 0, 0, 0, 0, 0, 0],  # shorter than k: from 0
        ],
        jnp.float32,
    )
    length = jnp.array([10, 10, 6, 2])
    np.testing.assert_array_equal(
        select_prompt_start(errors, length, prompt_length=3, context_horizon=0)[:1],
        [2],
    )
    start = select_prompt_start(errors, length, prompt_length=3, context_horizon=3)
    np.testing.assert_array_equal(start, [3, 6, 3, 0])


def _pass(obs_f, reward) -> WorldPass:
    b, h, _ = obs_f.shape
    zeros = jnp.zeros((b, h))
    return WorldPass(
        obs_f, obs_f, reward, obs_f, zeros > 0, jnp.zeros((b, h, 2)), zeros, obs_f
    )


def test_prompt_tokens_carry_the_chosen_steps_and_their_return_to_go():
    obs = jnp.arange(8)[None]  # one episode of 8 cells, one-hot
    obs_f = features(obs, 8, 2)
    reward = jnp.array([[0, 0, 1, 1, 0, 1, 1, 0]], jnp.float32)
    action = jnp.array([[0, 1, 2, 3, 4, 0, 1, 2]])
    errors = jnp.array([[0, 0, 0, 0, 0, 2, 2, 0]], jnp.float32)
    prompt = prompt_tokens(
        _pass(obs_f, reward),
        action,
        jnp.array([8]),
        jnp.array([True]),
        errors,
        prompt_length=3,
        context_horizon=1,
        scale=2.0,
    )
    # the best start is 4 (steps 4, 5, 6 hold the error); tokens are
    # [one-hot obs, rtg / 2, z = 0, flag 1] with rtg from the step to the end
    np.testing.assert_array_equal(np.argmax(prompt.obs[0, :, :8], -1), [4, 5, 6])
    np.testing.assert_allclose(prompt.obs[0, :, 8], [2 / 2, 2 / 2, 1 / 2])
    np.testing.assert_array_equal(prompt.obs[0, :, 9:11], 0.0)
    np.testing.assert_array_equal(prompt.obs[0, :, 11], 1.0)
    np.testing.assert_array_equal(prompt.action[0], [4, 0, 1])
    np.testing.assert_array_equal(prompt.reward[0], [0, 1, 1])
    empty = prompt_tokens(
        _pass(obs_f, reward),
        action,
        jnp.array([8]),
        jnp.array([False]),
        errors,
        prompt_length=3,
        context_horizon=1,
        scale=2.0,
    )
    np.testing.assert_array_equal(empty.obs[0, :, :11], 0.0)
    np.testing.assert_array_equal(empty.obs[0, :, 11], 1.0)
    np.testing.assert_array_equal(empty.action, 0)


def test_grid_cells_get_their_coordinates():
    f = features(jnp.array([[0, 7, 24 + 25]]), 50, 2, 5)  # 7 = (2, 1)
    np.testing.assert_array_equal(np.argmax(f[0, :, :50], -1), [0, 7, 49])
    np.testing.assert_allclose(f[0, :, 50:], [[0, 0], [0.4, 0.2], [0.8, 0.8]])


def test_history_windows_hold_the_steps_before_t_in_the_episode():
    x = jnp.arange(1, 6, dtype=jnp.float32)[None]  # steps 0..4 hold 1..5
    valid = jnp.array([[True, True, True, True, False]])
    win = history_windows(x, valid, 3)
    np.testing.assert_array_equal(
        win[0],
        [[0, 0, 0], [0, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4]],
    )
    # step 4 is padding: it is never part of a window (nor is step t itself)
    assert not (win == 5).any()


def test_world_model_loss_matches_a_hand_computation():
    pred_r = jnp.array([[0.5, 2.0, 1.0]])
    reward = jnp.array([[1.0, 1.0, 7.0]])
    pred_s = jnp.array([[[1.0, 0.0], [0.0, 0.0], [5.0, 5.0]]])
    next_s = jnp.array([[[0.0, 0.0], [0.0, 2.0], [0.0, 0.0]]])
    mask = jnp.array([[True, True, False]])  # the last step has no successor
    loss, metrics = world_model_loss(pred_r, reward, pred_s, next_s, mask, 0.5)
    reward_mse = (0.5**2 + 1.0**2) / 2
    state_mse = ((1.0 + 0.0) / 2 + (0.0 + 4.0) / 2) / 2
    np.testing.assert_allclose(metrics["reward_mse"], reward_mse)
    np.testing.assert_allclose(metrics["state_mse"], state_mse)
    np.testing.assert_allclose(loss, reward_mse + 0.5 * state_mse)
    # the per-step error that picks the prompt: |r̂ - r| + w mean|ŝ' - s'|
    wp = WorldPass(next_s, None, reward, next_s, mask, None, pred_r, pred_s)
    np.testing.assert_allclose(
        prediction_errors(wp, 0.5)[0], [0.5 + 0.5 * 0.5, 1.0 + 0.5 * 1.0, 0.0]
    )


def _config(**changes):
    config = load_experiment(
        "meta_dt_darkroom",
        "smoke",
        {
            "data.env_args": SMALL_ENV,
            "model.num_layers": 1,
            "model.d_model": 16,
            "model.d_ff": 32,
            "context_dim": 4,
            "world_hidden": 16,
            "prompt_length": 3,
            "context_horizon": 2,
            **changes,
        },
    )
    env = envs.make("darkroom", size=5, horizon=6)
    config = complete_config(config, env)
    algo = dataclasses.replace(config.algo, target_return=TARGET)
    return env, dataclasses.replace(config, algo=algo)


def _batch(key, rows: int, horizon: int):
    """Two-episode windows of random cells; the action is the cell mod 5 and
    the reward 1 on cells below 8 (both learnable from the inputs)."""
    steps = 2 * horizon
    done = jnp.zeros((rows, steps), bool).at[:, [horizon - 1, steps - 1]].set(True)
    obs = jax.random.randint(key, (rows, steps), 0, 25)
    return {
        "obs": obs,
        "action": obs % 5,
        "reward": (obs < 8).astype(jnp.float32),
        "done": done,
        "mask": jnp.ones((rows, steps), bool),
    }


@pytest.mark.long
def test_world_pass_masks_padding_and_episode_ends():
    env, config = _config()
    model = config.algo.build_model(config.model, nnx.Rngs(0))
    batch = _batch(jax.random.key(1), 2, env.horizon)
    # the second row's first episode ends after 4 steps (then 6 + 2 padding)
    batch["done"] = batch["done"].at[1].set(False).at[1, [3, 9]].set(True)
    batch["mask"] = batch["mask"].at[1, 10:].set(False)
    first, second = split_episodes(batch)
    np.testing.assert_array_equal(first["valid"].sum(1), [6, 4])
    np.testing.assert_array_equal(second["valid"].sum(1), [6, 6])
    np.testing.assert_array_equal(second["obs"][1], batch["obs"][1, 4:10])
    obs_f = features(first["obs"], 25, 2, 5)  # one-hot cells and (x, y) / 5
    act_f = features(first["action"], 5, 2)
    wp = world_pass(model.world, obs_f, act_f, first["reward"], first["valid"])
    np.testing.assert_array_equal(wp.mask.sum(1), [5, 3])
    # z at step 0 sees no history: the same for every row and episode
    np.testing.assert_allclose(wp.z[0, 0], wp.z[1, 0], rtol=1e-6)


@pytest.fixture(scope="module")
def trainer():
    """``(fresh state, jitted update step, hparams, env)``: compiled once."""
    from agentrl.configtools import default_hparams
    from agentrl.train.step import init_train_state, make_train_step

    env, config = _config(**{"train.lr": 3e-3, "train.warmup_steps": 1})
    model = config.algo.build_model(config.model, nnx.Rngs(0))
    graphdef, state = init_train_state(model, config)
    step = jax.jit(make_train_step(graphdef, config, env))
    return state, step, default_hparams(config), env


@pytest.mark.long
def test_loss_is_finite_and_falls_on_tiny_data(trainer):
    state, step, hp, env = trainer
    batch = _batch(jax.random.key(2), 8, env.horizon)
    losses, world = [], []
    for _ in range(30):
        state, metrics = step(state, batch, hp)
        losses.append(float(metrics["policy_loss"]))
        world.append(float(metrics["world_loss"]))
    assert all(math.isfinite(x) for x in losses + world)
    assert np.mean(losses[-5:]) < 0.7 * losses[0], losses
    assert np.mean(world[-5:]) < 0.7 * world[0], world


@pytest.mark.long
def test_world_model_learns_only_from_its_own_loss(trainer):
    """The policy reads z without gradient: with the world-model loss (and
    weight decay) off, updates leave the world model exactly as it was and
    move the policy."""
    state, step, hp, env = trainer
    hp = {
        **hp,
        "train": {**hp["train"], "weight_decay": jnp.float32(0)},
        "algo": {**hp["algo"], "world_loss_weight": jnp.float32(0)},
    }
    batch = _batch(jax.random.key(3), 8, env.horizon)
    new = state
    for _ in range(2):  # the warm-up's first step has learning rate 0
        new, _ = step(new, batch, hp)

    def moved(part):
        pairs = zip(
            jax.tree.leaves(state["params"][part]),
            jax.tree.leaves(new["params"][part]),
            strict=True,
        )
        return max(float(jnp.abs(a - b).max()) for a, b in pairs)

    assert moved("world") == 0.0
    assert moved("policy") > 0.0


def _training_logits(model, algo, source, has_prompt, episode, rtg):
    """The policy's logits ``[B, H, A]`` on an episode's training tokens, after
    the prompt cut from ``source`` (each a tuple of cells, actions, rewards)."""
    valid = jnp.ones(episode[0].shape, bool)

    def passed(cells, actions, rewards):
        obs_f = features(cells, 25, 2, 5)
        return world_pass(model.world, obs_f, features(actions, 5, 2), rewards, valid)

    src = passed(*source)
    prompt = prompt_tokens(
        src,
        source[1],
        valid.sum(-1),
        has_prompt,
        prediction_errors(src, algo.state_loss_weight),
        prompt_length=algo.prompt_length,
        context_horizon=algo.context_horizon,
        scale=algo.rtg_scale,
    )
    tokens = episode_tokens(passed(*episode), episode[1], rtg, valid, algo.rtg_scale)
    out = model.policy(*join(prompt, tokens), deterministic=True)
    return out.action[:, algo.prompt_length :]


@pytest.mark.long
def test_agent_acts_on_the_tokens_it_trains_on():
    """Greedy acting over 2 episodes: re-building each episode's prompt (the
    best earlier episode's segment of largest error) and tokens with the
    training functions, the policy's argmax is the action the agent took."""
    env, config = _config(**{"eval.acting": "greedy"})
    algo = config.algo
    model = algo.build_model(config.model, nnx.Rngs(5))
    h, episodes = env.horizon, 2
    params = jax.vmap(env.params_for_task)(jnp.array([3, 12, 20, 24]))
    agent = algo.make_agent(model, env, episodes * h, config)
    history, _ = run_batched_agent(env, agent, params, jax.random.key(0), episodes * h)
    obs, action, reward = (
        jnp.asarray(x).reshape(4, episodes, h)
        for x in (history.obs, history.action, history.reward)
    )
    logits = nnx.jit(_training_logits, static_argnums=1)
    rows = np.arange(4)
    for e in range(episodes):
        # the prompt's source: the first episode of the best return so far
        best = np.asarray(reward[:, :e].sum(-1)).argmax(-1) if e else np.zeros(4, int)
        source = (obs[rows, best], action[rows, best], reward[rows, best])
        before = jnp.cumsum(reward[:, e], -1) - reward[:, e]
        episode = (obs[:, e], action[:, e], reward[:, e])
        out = logits(
            model, algo, source, jnp.full((4,), e > 0), episode, TARGET - before
        )
        np.testing.assert_array_equal(np.argmax(out, -1), action[:, e])


@pytest.mark.long
def test_smoke_preset_trains_and_evaluates(tmp_path):
    from agentrl.evaluate.run import evaluate_run
    from agentrl.train.loop import fit

    config = load_experiment("meta_dt_darkroom", "smoke")
    run_dir = fit(config, tmp_path / "run", progress=False)
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    losses = [json.loads(x)["loss"] for x in lines if '"loss"' in x]
    assert losses and all(math.isfinite(x) for x in losses)
    assert np.mean(losses[-5:]) < losses[0]
    paths = evaluate_run(run_dir, num_episodes=3, out_dir=tmp_path / "eval")
    results = json.loads(paths["json"].read_text())
    returns = np.asarray(results["runs"]["meta_dt"][0]["returns"], float)
    assert returns.shape[1] == 3 and np.isfinite(returns).all()


def test_bad_settings_name_the_field():
    with pytest.raises(ValueError, match="algo.prompt_length must be >= 1"):
        MetaDT(prompt_length=0)
    with pytest.raises(
        ValueError, match=r"algo.no_prompt_fraction must be in \[0, 1\]"
    ):
        MetaDT(no_prompt_fraction=1.5)
    with pytest.raises(ValueError, match="algo.world_loss_weight must be"):
        MetaDT(world_loss_weight=-1.0)
    with pytest.raises(ValueError, match="model.obs_encoding must be 'table'"):
        load_experiment("meta_dt_darkroom", "smoke", {"model.obs_encoding": "grid"})
    with pytest.raises(ValueError, match="data.num_episodes must be >= 2"):
        load_experiment("meta_dt_darkroom", "smoke", {"data.num_episodes": 1})
