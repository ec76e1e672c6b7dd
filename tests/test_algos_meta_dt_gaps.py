"""Meta-DT's training wiring (pass 10 of the mutation passes).

``meta_dt_loss`` is run on a stand-in world model (it predicts 0 for every
reward and state, so a step's error is its reward) and a stand-in policy
(its logits copy the action of the token it reads), so the prompt, the
tokens, the loss and its terms follow by hand from the batch.
"""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs
from agentrl.algos.meta_dt import MetaDT, meta_dt_loss, split_episodes
from agentrl.models.heads import ModelOutput

NUM_OBS, NUM_ACTIONS, Z = 6, 3, 2
# two episodes of 5 steps: the prompt's source, then the imitated one
SOURCE_R = [0.0, 1.0, 0.0, 2.0, 3.0]
TARGET_R = [1.0, 1.0, 0.0, 0.0, 0.0]
SOURCE_A = [2, 0, 1, 2, 0]
TARGET_A = [0, 1, 2, 0, 1]
SOURCE_OBS = [0, 1, 2, 3, 4]
TARGET_OBS = [5, 4, 3, 2, 1]


class _World:
    """z = 0; every predicted reward and next state is 0."""

    def contexts(self, obs, act, rew, valid):
        return jnp.zeros(obs.shape[:2] + (Z,))

    def predict(self, obs, act, next_obs, z):
        return jnp.zeros(obs.shape[:2]), jnp.zeros_like(obs)


class _Policy:
    """Logits 20 x one-hot of each token's own action; keeps its inputs."""

    def __call__(self, obs, action, reward, deterministic=False):
        self.seen = (obs, action, reward)
        return ModelOutput(20.0 * jax.nn.one_hot(action, NUM_ACTIONS), None, {})


def _model():
    return types.SimpleNamespace(
        world=_World(),
        policy=_Policy(),
        config=types.SimpleNamespace(head="categorical"),
    )


def _batch(rows=2):
    row = lambda a, b: np.tile(np.asarray(a + b), (rows, 1))  # noqa: E731
    done = np.zeros((rows, 10), bool)
    done[:, [4, 9]] = True
    return {
        "obs": jnp.asarray(row(SOURCE_OBS, TARGET_OBS), jnp.int32),
        "action": jnp.asarray(row(SOURCE_A, TARGET_A), jnp.int32),
        "reward": jnp.asarray(row(SOURCE_R, TARGET_R), jnp.float32),
        "done": jnp.asarray(done),
        "mask": jnp.ones((rows, 10), bool),
    }


def _loss(no_prompt_fraction=0.0, world_loss_weight=0.4, rows=2, batch=None):
    algo = MetaDT(
        prompt_length=2,
        context_horizon=1,
        context_dim=Z,
        no_prompt_fraction=no_prompt_fraction,
    )
    hp = {
        "state_loss_weight": jnp.float32(0.0),
        "world_loss_weight": jnp.float32(world_loss_weight),
    }

    @jax.jit
    def run(batch):
        model = _model()
        loss, metrics, _ = meta_dt_loss(
            algo,
            model,
            batch,
            hp,
            num_obs=NUM_OBS,
            num_actions=NUM_ACTIONS,
            scale=2.0,
        )
        return loss, metrics, model.policy.seen

    return run(_batch(rows) if batch is None else batch)


def test_the_prompt_is_cut_from_the_source_episode_by_its_own_errors():
    # errors = the source's rewards where a successor exists: [0, 1, 0, 2, 0];
    # starts 1..3 (h = 1 skipped, k = 2): sums 1, 2, 2 -> the first best, 2.
    # (the imitated episode's errors [1, 1, 0, 0, 0] would pick start 1)
    _, _, (obs, action, reward) = _loss()
    np.testing.assert_array_equal(np.argmax(obs[0, :2, :NUM_OBS], -1), [2, 3])
    np.testing.assert_array_equal(action[0, :2], [SOURCE_A[2], SOURCE_A[3]])
    np.testing.assert_array_equal(reward[0, :2], [SOURCE_R[2], SOURCE_R[3]])
    # its return-to-go is the source's from each step: 5, 5 (scale 2)
    np.testing.assert_allclose(obs[0, :2, NUM_OBS], [5 / 2, 5 / 2])


def test_the_episode_tokens_carry_the_imitated_episodes_return_to_go():
    _, _, (obs, action, _) = _loss()
    rtg = np.cumsum(TARGET_R[::-1])[::-1]  # [2, 1, 0, 0, 0]
    np.testing.assert_allclose(obs[0, 2:, NUM_OBS], rtg / 2)
    np.testing.assert_array_equal(np.argmax(obs[0, 2:, :NUM_OBS], -1), TARGET_OBS)
    np.testing.assert_array_equal(action[0, 2:], TARGET_A)


def test_the_policy_loss_reads_the_episode_positions_after_the_prompt():
    # the stand-in policy predicts each token's own action: aligned with the
    # imitated episode every step is right (a shift by one gets 0 of 5 right)
    _, metrics, _ = _loss()
    np.testing.assert_allclose(metrics["accuracy"], 1.0)
    assert float(metrics["policy_loss"]) < 1e-6


def test_padding_after_a_short_episode_is_not_in_the_policy_loss():
    # the imitated episode ends after 3 steps; the 2 padding steps hold
    # actions (2) that its zeroed tokens do not: counted, 2 of 5 are wrong
    batch = _batch()
    batch["done"] = batch["done"].at[:, 9].set(False).at[:, 7].set(True)
    batch["mask"] = batch["mask"].at[:, 8:].set(False)
    batch["action"] = batch["action"].at[:, 8:].set(2)
    _, metrics, (_, action, _) = _loss(batch=batch)
    np.testing.assert_array_equal(action[0, 2:], TARGET_A[:3] + [0, 0])
    np.testing.assert_allclose(metrics["accuracy"], 1.0)


def test_the_world_loss_averages_both_episodes_and_is_weighted():
    # squared reward errors on steps with a successor (the first 4):
    # source (0 + 1 + 0 + 4) / 4 = 1.25, target (1 + 1 + 0 + 0) / 4 = 0.5
    loss, metrics, _ = _loss(world_loss_weight=0.4)
    np.testing.assert_allclose(metrics["world_loss"], 0.5 * (1.25 + 0.5), rtol=1e-6)
    np.testing.assert_allclose(metrics["reward_mse"], 0.5, rtol=1e-6)
    np.testing.assert_allclose(
        loss, metrics["policy_loss"] + 0.4 * 0.875, rtol=1e-6, atol=1e-7
    )


def test_the_first_rows_of_a_batch_get_the_empty_prompt():
    # no_prompt_fraction 0.5 of 2 rows: row 0 empty ([0, 0, 0, 1], action and
    # reward 0), row 1 prompted
    _, _, (obs, action, reward) = _loss(no_prompt_fraction=0.5)
    np.testing.assert_array_equal(obs[0, :2, :-1], 0.0)
    np.testing.assert_array_equal(obs[0, :2, -1], 1.0)
    np.testing.assert_array_equal(action[0, :2], 0)
    np.testing.assert_array_equal(reward[0, :2], 0.0)
    np.testing.assert_array_equal(action[1, :2], [SOURCE_A[2], SOURCE_A[3]])


def test_split_episodes_cuts_at_the_first_done_and_masks_padding():
    # first episode 3 steps (done at 2), second 4 (done at 6), then padding
    done = np.zeros((1, 10), bool)
    done[0, [2, 6]] = True
    mask = np.arange(10)[None] < 7
    batch = {
        "obs": jnp.arange(10)[None],
        "action": jnp.arange(10)[None] % 3,
        "reward": jnp.ones((1, 10)),
        "done": jnp.asarray(done),
        "mask": jnp.asarray(mask),
    }
    first, second = split_episodes(batch)
    np.testing.assert_array_equal(first["valid"][0], [1, 1, 1, 0, 0])
    np.testing.assert_array_equal(second["obs"][0, :4], [3, 4, 5, 6])
    np.testing.assert_array_equal(second["valid"][0], [1, 1, 1, 1, 0])


@pytest.fixture(scope="module")
def darkroom():
    return envs.make("darkroom", size=5, horizon=6)


def test_grid_coordinates_off_gives_no_grid_size(darkroom):
    assert MetaDT().grid_size(darkroom) == 5
    assert MetaDT(grid_coordinates=False).grid_size(darkroom) is None


def test_the_policys_sequence_is_the_prompt_and_one_episode(darkroom):
    assert MetaDT(prompt_length=3).context_steps(darkroom) == 3 + 6


def test_the_agent_gets_the_learners_settings(darkroom):
    algo = MetaDT(
        prompt_length=3,
        context_horizon=2,
        state_loss_weight=0.25,
        target_return=4.0,
        rtg_scale=8.0,
    )
    config = types.SimpleNamespace(
        eval=types.SimpleNamespace(acting="greedy", temperature=1.0)
    )
    agent = algo.make_agent(object(), darkroom, 12, config)
    assert agent.prompt_length == 3 and agent.context_horizon == 2
    assert agent.state_weight == 0.25
    assert agent.target == 4.0 and agent.scale == 8.0
    assert agent.grid_size == 5


def test_defaults_are_the_references():
    # docs/references.md "Meta-DT": h = 4, k = 5, z of 16, GRU hidden 128;
    # the reward-only world-model loss of Point-Robot and Dark Room
    algo = MetaDT()
    assert (algo.context_horizon, algo.prompt_length) == (4, 5)
    assert (algo.context_dim, algo.world_hidden) == (16, 128)
    assert algo.state_loss_weight == 0.0 and algo.world_loss_weight == 1.0


def test_a_weight_that_is_not_finite_is_refused():
    with pytest.raises(ValueError, match="algo.state_loss_weight must be a finite"):
        MetaDT(state_loss_weight=float("inf"))
