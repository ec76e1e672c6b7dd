"""XLand-MiniGrid adapter (skipped only when `xminigrid` is not installed)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl.envs import make

xminigrid = pytest.importorskip("xminigrid")


@pytest.mark.long
def test_xland_rulesets_are_tasks():
    env = make("xland", num_rulesets=64, ruleset_seed=3)
    assert env.num_tasks == 64 and env.horizon == 243
    split = env.task_split(0.75, seed=0)
    assert (len(split.train), len(split.test)) == (48, 16)
    params = jax.vmap(env.params_for_task)(jnp.arange(64))
    goals = np.asarray(params.ruleset.goal)
    assert set(goals[:, 0]) == {1, 3}  # pick-up and stand-next-to goals
    tiles = np.asarray(params.ruleset.init_tiles)  # [task, object, 2]
    np.testing.assert_array_equal(tiles[:, 0], goals[:, 1:3])
    assert not (tiles[:, 1:] == tiles[:, :1]).all(-1).any()  # distractors differ
    again = make("xland", num_rulesets=64, ruleset_seed=3)
    np.testing.assert_array_equal(
        again.params_for_task(5).ruleset.goal, params.ruleset.goal[5]
    )


@pytest.fixture(scope="module")
def env():
    """One instance, so every test reuses its compiled ``step``."""
    return make("xland", num_rulesets=16, horizon=30)


@pytest.mark.long
def test_xland_matches_xminigrid_and_auto_resets(env):
    params = env.params_for_task(jnp.int32(2))
    ref, ref_params = xminigrid.make("XLand-MiniGrid-R1-9x9", max_steps=30)
    ref_params = ref_params.replace(ruleset=params.ruleset)
    obs, state = env.reset(jax.random.key(0), params)
    timestep = jax.jit(ref.reset)(ref_params, jax.random.key(0))
    np.testing.assert_array_equal(obs, timestep.observation)
    assert obs.shape == env.observation_space(params).shape == (5, 5, 2)
    actions = jax.random.randint(jax.random.key(1), (40,), 0, 6)
    ref_step = jax.jit(ref.step)
    for t, a in enumerate(actions):
        obs, state, reward, term, trunc, info = env.step(
            jax.random.key(t), state, a, params
        )
        timestep = ref_step(ref_params, timestep, a)
        np.testing.assert_array_equal(info["final_observation"], timestep.observation)
        assert float(reward) == float(timestep.reward)
        assert bool(term) == bool(timestep.discount == 0.0)
        if bool(term | trunc):
            assert int(state.time) == 0
            break
    assert bool(term | trunc)  # 30-step episodes end within 40 steps


@pytest.mark.long
def test_xland_goal_reached_pays_and_terminates(env):
    # Random play over the rulesets reaches some goals: the reward
    # 1 - 0.9 t / horizon is paid exactly on the terminating step.
    rng = np.random.default_rng(0)
    successes = 0
    for task in range(env.num_tasks):
        params = env.params_for_task(jnp.int32(task))
        _, state = env.reset(jax.random.key(task), params)
        for t in range(3 * env.horizon):
            _, state, reward, term, trunc, _ = env.step(
                jax.random.key(t), state, int(rng.integers(6)), params
            )
            assert (float(reward) > 0) == bool(term)
            successes += bool(term)
            if term:
                assert 0.1 <= float(reward) <= 1.0
    assert successes >= 1


@pytest.mark.long
def test_xland_rollout_passes_the_key_reuse_checker():
    """xminigrid's state carries a (typed) key; a scan of auto-resetting
    steps over it used to raise under ``jax_debug_key_reuse`` (the reset's
    select)."""
    env = make("xland", num_rulesets=4, horizon=5)
    params = env.params_for_task(jnp.int32(1))

    def run(key):
        k_reset, k_steps = jax.random.split(key)
        _, state = env.reset(k_reset, params)

        def body(state, k):
            k_act, k_step = jax.random.split(k)
            action = jax.random.randint(k_act, (), 0, 6)
            _, state, reward, *_ = env.step(k_step, state, action, params)
            return state, reward

        return jax.lax.scan(body, state, jax.random.split(k_steps, 12))

    with jax.debug_key_reuse(True):
        state, rewards = jax.jit(run)(jax.random.key(0))
    assert rewards.shape == (12,) and jax.dtypes.issubdtype(
        state.inner.key.dtype, jax.dtypes.prng_key
    )


def test_minigrid_env_and_bad_arguments():
    env = make("xland", env_id="MiniGrid-Empty-5x5")
    assert env.num_tasks == 1 and env.params_for_task(0).ruleset is None
    obs, _ = env.reset(jax.random.key(0), env.sample_params(jax.random.key(1)))
    assert obs.shape == (7, 7, 2) and obs.dtype == jnp.uint8
    with pytest.raises(ValueError, match="env_id"):
        make("xland", env_id="XLand-MiniGrid-R1-8x8")
    with pytest.raises(ValueError, match="rulesets"):
        make("xland", rulesets="trivial-2m")
    with pytest.raises(ValueError, match="rulesets"):
        make("xland", env_id="MiniGrid-Empty-5x5", rulesets="trivial-1m")
    with pytest.raises(ValueError, match="num_rulesets"):
        make("xland", num_rulesets=0)


def _table(seed=4, n=8):
    """Arrays of a ruleset table of ``n`` of agentrl's generated rulesets."""
    from agentrl.envs.xland import generate_rulesets

    arrays = generate_rulesets(jax.random.key(seed), n, num_distractors=3)
    return {k: np.asarray(v) for k, v in arrays.items()}


def test_rulesets_may_be_the_path_of_a_table_file(tmp_path):
    """xminigrid's bz2-pickle table file (``save_bz2_pickle``, as the
    published ``trivial_1m_v2`` ...), named by a string or a Path."""
    from xminigrid.benchmarks import save_bz2_pickle

    arrays, path = _table(), tmp_path / "tiny_8_v2"
    save_bz2_pickle(arrays, str(path))
    for given in (str(path), path):
        env = make("xland", rulesets=given, horizon=5)
        assert env.num_tasks == 8
        ruleset = jax.vmap(env.params_for_task)(jnp.arange(8)).ruleset
        np.testing.assert_array_equal(ruleset.goal, arrays["goals"])
        np.testing.assert_array_equal(ruleset.rules, arrays["rules"])
        np.testing.assert_array_equal(ruleset.init_tiles, arrays["init_tiles"])


def _bad_tables():
    """``(name, what to write, the error)`` of files that hold no table."""
    arrays = _table()
    shape = r"a ruleset table holds goals \[n, 5\], rules \[n, r, 7\]"
    return [
        ("garbage", b"not bz2", r"is not a ruleset table file .*OSError"),
        ("no_goals", {k: v for k, v in arrays.items() if k != "goals"}, "KeyError"),
        ("narrow", {**arrays, "goals": arrays["goals"][:, :4]}, shape),
        ("short", {**arrays, "num_rules": arrays["num_rules"][:3]}, shape),
    ]


@pytest.mark.parametrize(("name", "content", "match"), _bad_tables())
def test_a_rulesets_path_that_holds_no_table_is_refused(tmp_path, name, content, match):
    from xminigrid.benchmarks import save_bz2_pickle

    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        save_bz2_pickle(content, str(path))
    with pytest.raises(ValueError, match=match) as err:
        make("xland", rulesets=str(path))
    assert str(err.value).startswith(f"XLandMiniGrid: `rulesets` {str(path)!r}")


def test_a_rulesets_path_that_does_not_exist_is_refused(tmp_path):
    missing = str(tmp_path / "medium_1m_v2")
    with pytest.raises(ValueError) as err:
        make("xland", rulesets=missing)
    message = str(err.value)
    assert message.startswith(f"XLandMiniGrid: `rulesets` {missing!r}: no such file")
    assert "'medium-1m'" in message and "xminigrid's bz2 pickle" in message


def test_the_cli_refuses_a_rulesets_file_in_one_line_with_exit_code_2(tmp_path, capsys):
    """A file that holds no table is bad input, from the command line too."""
    from agentrl.cli import main

    garbage = tmp_path / "medium_1m_v2"
    garbage.write_bytes(b"not bz2")
    argv = ["train", "xland_ad", "--data.env_args", f"rulesets={garbage}"]
    assert main([*argv, "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        f"agentrl train: error: XLandMiniGrid: `rulesets` '{garbage}'"
    )
    assert "not a ruleset table file" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()
