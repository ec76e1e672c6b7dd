"""Meta-DT's world model and tokens (pass 10 of the mutation passes).

The encoder and decoders are checked against the reference's formulas
(NJU-RL/Meta-DT ``context/model.py``: ``RNNContextEncoder``,
``RewardDecoder``, ``StateDecoder``) written out with the module's own
layers; the tokens against their docstrings.
"""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from agentrl.models.world_model import (
    Tokens,
    WorldModel,
    WorldPass,
    episode_tokens,
    features,
    join,
    prompt_tokens,
    world_model_loss,
    world_pass,
)

relu = jax.nn.relu


def _world():
    return WorldModel(obs_dim=3, act_dim=2, context_dim=4, hidden=8, rngs=nnx.Rngs(0))


def test_the_encoder_runs_its_gru_from_the_oldest_step_to_the_newest():
    wm = _world()
    enc = wm.encoder
    rng = np.random.default_rng(0)
    obs = jnp.asarray(rng.normal(size=(2, 3, 3)), jnp.float32)  # [B, h, F]
    act = jnp.asarray(rng.normal(size=(2, 3, 2)), jnp.float32)
    rew = jnp.asarray([[0.0, 1.0, 2.0], [3.0, 0.0, -1.0]], jnp.float32)
    x = jnp.concatenate(
        [relu(enc.obs(obs)), relu(enc.act(act)), relu(enc.rew(rew[..., None]))], -1
    )
    carry = jnp.zeros((2, 8))
    for i in range(3):  # oldest first; z reads the newest step's output
        carry, _ = enc.gru(carry, x[:, i])
    np.testing.assert_allclose(enc(obs, act, rew), enc.out(carry), rtol=1e-5, atol=1e-6)
    # and the rewards count: other rewards, another z
    assert not np.allclose(enc(obs, act, rew), enc(obs, act, rew + 1.0))


def test_the_decoders_read_s_a_s_next_z_and_s_a_z():
    wm = _world()
    rng = np.random.default_rng(1)
    s, s2 = (jnp.asarray(rng.normal(size=(5, 3)), jnp.float32) for _ in range(2))
    a = jnp.asarray(rng.normal(size=(5, 2)), jnp.float32)
    z = jnp.asarray(rng.normal(size=(5, 4)), jnp.float32)

    def mlp(m, x):
        return m.fc3(relu(m.fc2(relu(m.fc1(x)))))

    # the reward decoder's state map is shared by s and s'
    hs, hn = relu(wm.reward_obs(s)), relu(wm.reward_obs(s2))
    reward = mlp(wm.reward, jnp.concatenate([hs, relu(wm.reward_act(a)), hn, z], -1))
    ts, ta = relu(wm.state_obs(s)), relu(wm.state_act(a))
    state = mlp(wm.next_state, jnp.concatenate([ts, ta, z], -1))
    got_r, got_s = wm.predict(s, a, s2, z)
    np.testing.assert_allclose(got_r, reward[:, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_s, state, rtol=1e-5, atol=1e-6)


class _Echo:
    """A stand-in world model: z = 0, predictions 0."""

    def contexts(self, obs, act, rew, valid):
        return jnp.zeros(obs.shape[:2] + (1,))

    def predict(self, obs, act, next_obs, z):
        return jnp.zeros(obs.shape[:2]), jnp.zeros_like(obs)


def test_world_pass_pairs_each_step_with_its_successor_in_the_episode():
    obs = features(jnp.array([[0, 1, 2, 3]]), 4, 2)
    act = features(jnp.array([[1, 0, 1, 0]]), 2, 2)
    valid = jnp.array([[True, True, True, False]])  # 3 steps, then padding
    wp = world_pass(_Echo(), obs, act, jnp.array([[1.0, 2.0, 3.0, 9.0]]), valid)
    np.testing.assert_array_equal(np.argmax(wp.next_obs[0, :3], -1), [1, 2, 3])
    np.testing.assert_array_equal(wp.next_obs[0, 3], 0.0)
    # the last step of the episode has no successor in it: not in the mask
    np.testing.assert_array_equal(wp.mask[0], [True, True, False, False])
    np.testing.assert_array_equal(wp.reward[0], [1.0, 2.0, 3.0, 0.0])


def test_the_world_loss_of_no_step_is_zero_not_nan():
    loss, metrics = world_model_loss(
        jnp.ones((2, 3)),
        jnp.zeros((2, 3)),
        jnp.ones((2, 3, 2)),
        jnp.zeros((2, 3, 2)),
        jnp.zeros((2, 3), bool),
        1.0,
    )
    assert float(loss) == 0.0 and float(metrics["reward_mse"]) == 0.0


def _pass(obs_f, reward, z):
    b, h, _ = obs_f.shape
    zeros = jnp.zeros((b, h))
    return WorldPass(obs_f, obs_f, reward, obs_f, zeros > 0, z, zeros, obs_f)


def _prompt(length, has_prompt, z_value=0.0):
    obs_f = features(jnp.arange(5)[None], 5, 2)
    reward = jnp.array([[1.0, 2.0, 4.0, 8.0, 16.0]])
    z = jnp.full((1, 5, 2), z_value)
    return prompt_tokens(
        _pass(obs_f, reward, z),
        jnp.array([[1, 2, 3, 4, 1]]),
        jnp.array([length]),
        jnp.array([has_prompt]),
        jnp.zeros((1, 5)),
        prompt_length=3,
        context_horizon=0,
        scale=1.0,
    )


def test_a_short_sources_prompt_has_no_steps_past_its_end():
    # 2 steps, k = 3: steps 0, 1 then an empty token (flag only)
    p = _prompt(2, True)
    np.testing.assert_array_equal(np.argmax(p.obs[0, :2, :5], -1), [0, 1])
    np.testing.assert_allclose(p.obs[0, :2, 5], [3.0, 2.0])  # rtg inside the 2
    np.testing.assert_array_equal(p.obs[0, 2, :-1], 0.0)
    np.testing.assert_array_equal(p.obs[0, 2, -1], 1.0)
    np.testing.assert_array_equal(p.action[0], [1, 2, 0])
    np.testing.assert_array_equal(p.reward[0], [1.0, 2.0, 0.0])


def test_prompt_tokens_carry_no_task_representation():
    # [obs, rtg, 0, 1] whatever the source's z
    p = _prompt(5, True, z_value=3.0)
    np.testing.assert_array_equal(p.obs[0, :, 6:8], 0.0)
    np.testing.assert_array_equal(p.obs[0, :, 8], 1.0)


def test_the_empty_prompt_has_zero_actions_and_rewards():
    p = _prompt(5, False)
    np.testing.assert_array_equal(p.obs[0, :, :-1], 0.0)
    np.testing.assert_array_equal(p.action, 0)
    np.testing.assert_array_equal(p.reward, 0.0)


def _episode(z):
    obs_f = features(jnp.array([[0, 1, 2]]), 3, 2)
    wp = _pass(obs_f, jnp.array([[1.0, 0.0, 1.0]]), z)
    valid = jnp.array([[True, True, True]])
    return episode_tokens(
        wp, jnp.array([[0, 1, 0]]), jnp.array([[2.0, 1.0, 1.0]]), valid, 2.0
    )


def test_episode_tokens_are_obs_rtg_z_and_flag_zero():
    z = jnp.array([[[0.5, -1.0], [1.0, 2.0], [3.0, 4.0]]])
    obs = _episode(z).obs[0]
    np.testing.assert_array_equal(np.argmax(obs[:, :3], -1), [0, 1, 2])
    np.testing.assert_allclose(obs[:, 3], [1.0, 0.5, 0.5])
    np.testing.assert_allclose(obs[:, 4:6], z[0])
    np.testing.assert_array_equal(obs[:, 6], 0.0)


def test_the_policy_reads_z_without_gradient():
    z = jnp.ones((1, 3, 2))
    grad = jax.grad(lambda z: jnp.sum(_episode(z).obs ** 2))(z)
    np.testing.assert_array_equal(grad, 0.0)


def test_join_puts_the_prompt_first():
    prompt = Tokens(jnp.zeros((1, 2, 1)), jnp.array([[7, 8]]), jnp.array([[0.0, 1.0]]))
    episode = Tokens(jnp.ones((1, 3, 1)), jnp.array([[1, 2, 3]]), jnp.zeros((1, 3)))
    joined = join(prompt, episode)
    np.testing.assert_array_equal(joined.action[0], [7, 8, 1, 2, 3])
    np.testing.assert_array_equal(joined.obs[0, :, 0], [0, 0, 1, 1, 1])
