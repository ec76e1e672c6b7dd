"""AD's training windows are the contexts its evaluation decode path sees.

At evaluation the model decodes its own history one step at a time with a
rolling window of ``context_episodes * horizon`` steps, which starts at any
step, mid-episode as often as not. Training must show it those windows:
the window starts of the AD sampler cover every phase of an episode, and on
recorded histories the evaluation path (``ADModelAgent`` fed the recorded
steps) gives per-step action likelihoods equal to the training loss's on
the same windows.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from model_factory import make_model

from agentrl import envs
from agentrl.agents.agent import Step
from agentrl.agents.rolling import ADModelAgent
from agentrl.algos import AD
from agentrl.algos.ad import ad_loss
from agentrl.data import open_dataset, write_dataset
from agentrl.models import ModelConfig
from agentrl.sources import source_histories
from agentrl.train.config import TrainConfig

ENV = envs.make("darkroom", size=5, horizon=5)
EPISODES = 2  # context_episodes: windows of 10 steps


@pytest.fixture(scope="module")
def room(tmp_path_factory):
    out = tmp_path_factory.mktemp("w") / "room"
    write_dataset(out, ENV, source_histories("q_learning", ENV), 6, 8, 0)
    return open_dataset(out)


def _sampler(room, window_start):
    algo = AD(context_episodes=EPISODES, window_start=window_start)
    return algo.make_sampler(room, TrainConfig(batch_size=8, seed=1))


def _phases(sampler, steps=60):
    starts = np.concatenate([sampler.window_index(s)[1][:, 0] for s in range(steps)])
    return set((starts % ENV.horizon).tolist())


def test_training_windows_start_where_evaluation_windows_do(room):
    horizon, length = ENV.horizon, EPISODES * ENV.horizon
    # the evaluation window at step t >= length - 1 starts at t - length + 1
    eval_phases = {(t - length + 1) % horizon for t in range(length - 1, 40)}
    assert eval_phases == set(range(horizon))
    assert _phases(_sampler(room, "any")) >= eval_phases
    # episode-aligned windows miss 4 of the 5 phases the model acts in
    assert _phases(_sampler(room, "episode")) == {0}


@pytest.mark.long
def test_decode_path_likelihood_equals_the_training_loss(room):
    sampler = _sampler(room, "any")
    length = sampler.length
    batch = sampler.batch(3)
    rows, idx, _ = sampler.window_index(3)
    assert batch["mask"].all()
    history = room.load_history("train")
    np.testing.assert_array_equal(batch["action"], history.action[rows[:, None], idx])
    cfg = ModelConfig(
        obs_kind="discrete",
        obs_size=25,
        action_size=5,
        num_layers=2,
        num_heads=2,
        d_model=16,
        d_ff=32,
        max_steps=length,
    )
    model = make_model(cfg, seed=2)
    graphdef, weights = nnx.split(model)
    # training: the loss and per-position likelihood of the sampled windows
    train = jax.jit(lambda w, b: ad_loss(nnx.merge(graphdef, w), b)[::2])
    loss, out = train(weights, jax.tree.map(jnp.asarray, batch))
    train_ll = jax.nn.log_softmax(out.action)
    train_ll = np.take_along_axis(np.asarray(train_ll), batch["action"][..., None], -1)
    # evaluation: the agent decodes the same steps, fed the recorded actions
    agent = ADModelAgent(model, ENV, length, greedy=True)
    keys = jax.random.split(jax.random.key(0), len(rows))
    state = agent.start(agent.init(keys, None), jnp.asarray(batch["obs"][:, 0]))
    logits = [state.scores]
    update = jax.jit(agent.update)
    nxt = np.minimum(idx + 1, history.num_steps - 1)
    for j in range(length - 1):
        done = jnp.asarray(batch["done"][:, j])
        step = Step(
            obs=jnp.asarray(batch["obs"][:, j]),
            action=jnp.asarray(batch["action"][:, j]),
            reward=jnp.asarray(batch["reward"][:, j]),
            next_obs=jnp.asarray(history.obs[rows, nxt[:, j]]),
            terminated=done & False,
            truncated=done,
            reset_obs=jnp.asarray(history.obs[rows, nxt[:, j]]),
        )
        state = update(state, step)
        logits.append(state.scores)
    eval_ll = jax.nn.log_softmax(jnp.stack(logits, 1))
    eval_ll = np.take_along_axis(np.asarray(eval_ll), batch["action"][..., None], -1)
    np.testing.assert_allclose(eval_ll, train_ll, atol=2e-5)
    assert float(loss) == pytest.approx(-eval_ll.mean(), abs=2e-5)


def test_strided_windows_start_anywhere_and_step_k_episodes(room):
    s = AD(context_episodes=2, episode_stride=2).make_sampler(
        room, TrainConfig(batch_size=8, seed=0)
    )
    horizon, phases = ENV.horizon, set()
    for step in range(30):
        _, idx, mask = s.window_index(step)
        assert mask.all()  # fixed-length episodes: never padded
        episode = idx // horizon
        for row in range(idx.shape[0]):
            e = episode[row]
            # runs through episodes e0, e0 + 2, e0 + 4, consecutive inside each
            assert set(np.diff(e).tolist()) <= {0, 2}
            inside = np.diff(idx[row])[np.diff(e) == 0]
            assert (inside == 1).all()
        phases |= set((idx[:, 0] % horizon).tolist())
    assert phases == set(range(horizon))


def test_pairs_are_two_histories_of_one_task():
    from agentrl.data.samplers import pair_rows

    task_ids = np.array([3, 1, 3, 2, 1, 3, 5], np.int32)  # task 2 and 5: one each
    rng = np.random.default_rng(0)
    rows = pair_rows(rng, task_ids, 4000).reshape(-1, 2)
    np.testing.assert_array_equal(task_ids[rows[:, 0]], task_ids[rows[:, 1]])
    single = np.isin(task_ids[rows[:, 0]], [2, 5])
    assert (rows[single, 0] == rows[single, 1]).all()
    assert (rows[~single, 0] != rows[~single, 1]).all()
    # the partner is uniform over the task's other records
    partners = rows[task_ids[rows[:, 0]] == 3]
    counts = np.bincount(partners[:, 1], minlength=7)[[0, 2, 5]]
    assert counts.min() > 0.8 * counts.mean()


@pytest.mark.parametrize("stride", [1, 2])
def test_any_start_windows_read_from_disk_equal_the_cached_ones(room, stride):
    from agentrl.data import ADSampler

    kw = dict(num_episodes=2, episode_stride=stride, window_start="any", seed=4)
    cached, disk = ADSampler(room, 6, **kw), ADSampler(room, 6, cache_bytes=0, **kw)
    assert cached._cache is not None and disk._cache is None
    for step in (0, 7):
        a, b = cached.batch(step), disk.batch(step)
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])


# Mutants the tests above let through (session 56's mutation pass).


def _ad_model_and_batch(dropout=0.0, b=3, t=6):
    cfg = ModelConfig(
        obs_kind="discrete", obs_size=25, action_size=5, num_layers=1,
        num_heads=2, d_model=16, d_ff=32, max_steps=t, dropout=dropout,
    )  # fmt: skip
    rng = np.random.default_rng(0)
    batch = {
        "obs": jnp.asarray(rng.integers(0, 25, (b, t)), jnp.int32),
        "action": jnp.asarray(rng.integers(0, 5, (b, t)), jnp.int32),
        "reward": jnp.asarray(rng.integers(0, 2, (b, t)), jnp.float32),
    }
    return make_model(cfg, seed=4), batch


def test_ad_loss_scores_only_the_unpadded_steps():
    # padding after a short episode (mask False on the last two steps) is not
    # scored: the loss is the mean of -log p(a_t) over the 4 x 3 counted steps
    model, batch = _ad_model_and_batch()
    batch["mask"] = jnp.broadcast_to(jnp.arange(6) < 4, (3, 6))
    loss, _, out = ad_loss(model, batch, deterministic=True)
    nll = -np.take_along_axis(
        np.asarray(jax.nn.log_softmax(out.action)),
        np.asarray(batch["action"])[..., None],
        -1,
    )[..., 0]
    np.testing.assert_allclose(float(loss), nll[:, :4].mean(), rtol=1e-5)
    assert abs(nll[:, :4].mean() - nll.mean()) > 1e-4  # the padding would count


def test_ad_loss_trains_with_dropout_on():
    # AD's training pass (deterministic=False, the default) applies dropout:
    # with dropout 0.5 its output differs from the deterministic pass
    model, batch = _ad_model_and_batch(dropout=0.5)
    _, _, train = ad_loss(model, batch)
    _, _, plain = ad_loss(model, batch, deterministic=True)
    assert np.abs(np.asarray(train.action) - np.asarray(plain.action)).max() > 1e-3
