"""Evaluation under shift (issue 35, item 10): a trained learner on a changed
family, the baselines on the same shifted tasks, a space change refused."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs

# ------------------------------------------------ the families' new arguments


@pytest.mark.long
def test_bandit_means_from_a_beta_and_uniform_by_default():
    key = jax.random.key(3)
    plain = envs.make("gaussian_bandit", noise_std=0.3)
    np.testing.assert_array_equal(
        plain.sample_params(jax.random.clone(key)).means,
        jax.random.uniform(jax.random.clone(key), (5,)),
    )  # the default draw is today's, bit for bit
    keys = jax.random.split(key, 4000)
    beta = envs.make("bernoulli_bandit", means_beta=(0.5, 0.5))
    means = np.asarray(jax.vmap(beta.sample_params)(keys).means)
    uniform = np.asarray(jax.vmap(plain.sample_params)(jax.random.clone(keys)).means)
    # Beta(0.5, 0.5) puts 59% of its mass in [0.1, 0.9], the uniform 80%
    inner = lambda m: np.mean((m > 0.1) & (m < 0.9))  # noqa: E731
    assert abs(inner(means) - 0.59) < 0.02 and abs(inner(uniform) - 0.8) < 0.02
    assert abs(means.mean() - 0.5) < 0.01
    with pytest.raises(ValueError, match="means_beta"):
        envs.make("gaussian_bandit", means_beta=(0.5, 0))


def test_darkroom_goal_region_splits_the_grid_by_distance():
    plain = envs.make("darkroom")
    ids = jnp.arange(81)
    goals = np.asarray(jax.vmap(plain.params_for_task)(ids).goal)
    assert plain.num_tasks == 81
    np.testing.assert_array_equal(goals[:, 0] + 9 * goals[:, 1], np.arange(81))
    near = envs.make("darkroom", max_goal_distance=4)
    far = envs.make("darkroom", min_goal_distance=5)

    def cells(env):
        g = jax.vmap(env.params_for_task)(jnp.arange(env.num_tasks)).goal
        g = np.asarray(g)
        return g, np.abs(g - 4).sum(-1)  # distance from the centre start

    (gn, dn), (gf, df) = cells(near), cells(far)
    assert dn.max() <= 4 and df.min() >= 5 and near.num_tasks + far.num_tasks == 81
    assert not {tuple(g) for g in gn} & {tuple(g) for g in gf}
    sampled = jax.vmap(far.sample_params)(jax.random.split(jax.random.key(0), 64))
    assert np.abs(np.asarray(sampled.goal) - 4).sum(-1).min() >= 5
    with pytest.raises(ValueError, match="no goal cell"):
        envs.make("darkroom", min_goal_distance=9)


def test_shifted_validation_tasks_are_never_test_tasks():
    """A shift that changes the task set: validation and test tasks are two
    halves of the unseen tasks, whatever either count (the validation tasks
    were once cut after the *validation* count, inside the test tasks)."""
    from types import SimpleNamespace

    from agentrl.evaluate.shift import shifted_env, shifted_tasks

    env = envs.make("darkroom")
    far = shifted_env("darkroom", {}, {"min_goal_distance": 3})  # 68 goals
    run = SimpleNamespace(env=env, split=env.task_split(0.3, 0, 0.5).to_json())
    # 47 goals no training goal: 24 test, 23 validation
    for val, test in ((8, 16), (16, 8), (23, 24), (1, 1), (12, 12)):
        v = shifted_tasks(run, far, val, 0, "validation")[1]
        t = shifted_tasks(run, far, test, 0, "test")[1]
        assert (len(v), len(t)) == (val, test) and not set(v) & set(t), (val, test)
    # the test tasks reported before validation tasks were kept apart
    assert shifted_tasks(run, far, 16, 0, "test")[1] == [
        1, 2, 3, 6, 10, 17, 18, 28, 29, 31, 32, 33, 42, 45, 50, 61
    ]  # fmt: skip
    params, ids = shifted_tasks(run, far, 4, 1, "test")
    assert ids == [15, 31, 34, 46]
    np.testing.assert_array_equal(
        params.goal, jax.vmap(far.params_for_task)(jnp.asarray(ids)).goal
    )
    for which, count, most in (("test", 25, 24), ("validation", 24, 23)):
        with pytest.raises(
            ValueError, match=f"24 of them test tasks and 23 .* at most {most}"
        ):
            shifted_tasks(run, far, count, 0, which)


# ------------------------------------------------ a trained run under shift


@pytest.fixture(scope="module")
def ad_run(tmp_path_factory, tiny_ad_config):
    from agentrl.train.loop import fit

    return fit(
        tiny_ad_config(2), tmp_path_factory.mktemp("runs") / "ad", progress=False
    )


@pytest.fixture(scope="module")
def bandit_run(tmp_path_factory):
    from agentrl import configtools
    from agentrl.train.experiments import load_experiment
    from agentrl.train.loop import fit

    config = configtools.override(
        load_experiment("dpt_bandit", "smoke"),
        {
            "data.num_tasks": 8,
            "train.steps": 2,
            "train.batch_size": 4,
            "train.warmup_steps": 1,
            "model.num_layers": 1,
            "eval.num_tasks": 4,
        },
    )
    return fit(config, tmp_path_factory.mktemp("runs") / "dpt", progress=False)


@pytest.mark.long
def test_a_longer_darkroom_horizon_keeps_the_test_goals(ad_run):
    from agentrl.evaluate.run import run_results
    from agentrl.train.rundir import load_run

    results, title = run_results(
        ad_run, baselines=["random", "oracle"], num_episodes=1, env_args={"horizon": 30}
    )
    assert "under shift (horizon=30)" in title
    model = results["ad"]
    assert model.metadata["num_steps"] == 30 and model.metadata["shift"] == {
        "horizon": 30
    }
    # the test goals the run is evaluated on without the shift
    assert model.metadata["task_ids"] == load_run(ad_run).held_out()[1]
    # the baselines ran on the same shifted tasks: the oracle's 30-step return
    np.testing.assert_array_equal(results["oracle"].returns[:, 0], model.oracle_return)
    assert results["random"].metadata["shift"] == {"horizon": 30}
    assert (model.oracle_return > 30 - 9).all()


@pytest.mark.long
def test_darkroom_goals_outside_the_training_goals(ad_run):
    from agentrl.evaluate.run import run_results
    from agentrl.train.rundir import load_run

    shift = {"min_goal_distance": 3}
    results, _ = run_results(ad_run, baselines=[], num_episodes=1, env_args=shift)
    ids = results["ad"].metadata["task_ids"]
    far = envs.make("darkroom", **shift)
    goals = np.asarray(jax.vmap(far.params_for_task)(jnp.asarray(ids)).goal)
    assert len(ids) == 3 and (np.abs(goals - 4).sum(-1) >= 3).all()
    train = load_run(ad_run).split["train"]
    trained = {(i % 9, i // 9) for i in train}
    assert not {tuple(g) for g in goals} & trained


@pytest.mark.long
def test_a_shift_of_a_space_is_refused_naming_it(ad_run, bandit_run, capsys):
    from agentrl.cli import main
    from agentrl.evaluate.run import run_results

    with pytest.raises(ValueError, match="observation space of darkroom"):
        run_results(ad_run, baselines=[], env_args={"size": 7})
    with pytest.raises(ValueError, match="action space of gaussian_bandit"):
        run_results(bandit_run, baselines=[], env_args={"num_arms": 3})
    assert main(["eval", str(ad_run), "--env-arg", "size=7"]) == 2
    err = capsys.readouterr().err
    assert "agentrl eval: error:" in err and "observation space" in err
    assert main(["eval", str(ad_run), "--env-arg", "nope=1"]) == 2
    assert "nope" in capsys.readouterr().err


@pytest.mark.long
@pytest.mark.parametrize(
    "shift",
    [{"means_beta": (0.5, 0.5)}, {"noise_std": 0.6}, {"horizon": 100}],
    ids=["means_beta", "noise", "horizon"],
)
def test_bandit_shifts_reach_the_model_and_the_baselines(bandit_run, shift):
    from agentrl.evaluate.run import run_results

    plain, _ = run_results(bandit_run, baselines=["random", "thompson"])
    results, title = run_results(
        bandit_run, baselines=["random", "thompson"], env_args=shift
    )
    assert "under shift" in title
    model, thompson = results["dpt"], results["thompson"]
    assert model.metadata["env_args"]["num_arms"] == 5
    for name, value in shift.items():
        assert model.metadata["env_args"][name] == value
    # every method saw the same shifted tasks (the random reference's means)
    np.testing.assert_array_equal(model.random_return, thompson.random_return)
    if "horizon" in shift:
        assert model.metadata["num_steps"] == 100
    else:
        assert model.metadata["num_steps"] == plain["dpt"].metadata["num_steps"]
    if "means_beta" in shift:
        assert not np.array_equal(model.oracle_return, plain["dpt"].oracle_return)
    if "noise_std" in shift:  # same means, other rewards
        np.testing.assert_array_equal(model.oracle_return, plain["dpt"].oracle_return)
        assert not np.array_equal(model.returns, plain["dpt"].returns)


@pytest.mark.long
def test_agentrl_eval_env_arg_writes_the_shift(bandit_run, tmp_path, capsys):
    from agentrl.cli import main

    out = tmp_path / "shifted"
    argv = ["eval", str(bandit_run), "--env-arg", "means_beta=(0.5,0.5)",
            "--env-arg", "horizon=60", "--baselines", "random", "--no-progress",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    payload = json.loads((out / "results.json").read_text())
    assert payload["shift"] == {"means_beta": [0.5, 0.5], "horizon": 60}
    assert "under shift" in payload["title"]
    assert (
        "**Under shift**: means_beta=(0.5, 0.5), horizon=60"
        in (out / "results.md").read_text()
    )
    assert "info,shift horizon" in (out / "results.csv").read_text()
    assert "under shift" in capsys.readouterr().out
