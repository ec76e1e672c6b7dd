"""PRNG key hygiene: the whole smoke path under JAX's key-reuse checker.

``jax_debug_key_reuse`` makes JAX raise ``KeyReuseError`` wherever a typed
key is consumed twice, inside a traced program or across eager calls
(issue 35, item 6: ``JAX_DEBUG_KEY_REUSE=1 agentrl train ad_darkroom
--preset smoke`` failed at once). Under it, at tiny sizes, the issue's
command (data generation and training) and the pieces below run; the rest
of the smoke path is in the ``long`` tests (minutes on 2 cores):

- every registered source generates a dataset through the writer;
- every algorithm (one experiment each in ``make test-long``, every other
  experiment's smoke preset in ``make test-heavy``) trains, and its run is
  evaluated with the default baselines and every context control;
- a sweep trains and evaluates (a distilled and an online learner);
- an online learner's run acts as the ``learned_learner`` source.

Reuses the checker cannot see (``fold_in`` does not consume a key, and
``split(key, n)[i] == fold_in(key, i)``): the normalisation references
draw from a key no task's key tree holds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.errors import KeyReuseError
from tiny_runs import by_experiment, tiny_overrides

import agentrl
import agentrl.evaluate.evaluate as evaluate_module
from agentrl import configtools, envs
from agentrl.agents.agent import RandomAgent
from agentrl.data.writer import write_dataset
from agentrl.envs.report import family_returns
from agentrl.evaluate.agents import OracleAgent
from agentrl.evaluate.controls import CONTEXT_CONTROLS, expert_dataset
from agentrl.evaluate.run import run_results
from agentrl.prng import key_map, key_scan
from agentrl.sources.registry import SOURCES, applicable_sources, source_histories
from agentrl.sweep.run import run_sweep
from agentrl.train.experiments import known_experiments, load_experiment
from agentrl.train.loop import fit

#: One experiment per algorithm (the ``long`` test trains every experiment).
#: Families the sources run on (each source on every one it applies to).
SOURCE_ENVS = {
    "bernoulli_bandit": {"num_arms": 3, "horizon": 4},
    "darkroom": {"size": 3, "horizon": 4},
    "point_robot": {"horizon": 4},
}


#: A model of one small layer (experiments whose model is not already small).
TINY_MODEL = {
    "model.num_layers": 1,
    "model.num_heads": 2,
    "model.d_model": 16,
    "model.d_ff": 32,
}


@pytest.fixture(autouse=True)
def key_reuse_checked():
    """Every test here runs under the checker (it is part of jit's cache key)."""
    with jax.debug_key_reuse(True):
        yield


def test_the_checker_is_on():
    key = jax.random.key(0)
    jax.random.split(key)
    with pytest.raises(KeyReuseError):
        jax.random.split(key)


def _draws(key_scan_or_scan):
    """Per task ``[task, step]`` uniforms, one key per step, scanned under vmap."""

    def one(key):
        def body(total, k):
            u = jax.random.uniform(k)
            return total + u, u

        return key_scan_or_scan(body, 0.0, jax.random.split(key, 4))[1]

    return jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(0), 3))


def test_key_scan_is_scan_and_reads_right_under_vmap():
    with jax.debug_key_reuse(False):
        expected = _draws(jax.lax.scan)
    # vmap transposes the scan's keys, which the checker takes for consumed
    with pytest.raises(KeyReuseError, match="In scan"):
        _draws(jax.lax.scan)
    np.testing.assert_array_equal(_draws(key_scan), expected)

    def reused(key):  # a real reuse inside the body is still caught
        def body(total, k):
            return total + jax.random.uniform(k) + jax.random.normal(k), None

        return key_scan(body, 0.0, jax.random.split(key, 4))[0]

    with pytest.raises(KeyReuseError):
        jax.jit(jax.vmap(reused))(jax.random.split(jax.random.key(1), 3))
    keys = jax.random.split(jax.random.key(2), 3)
    mapped = key_map(lambda k: jax.random.uniform(k), keys)
    with jax.debug_key_reuse(False):
        np.testing.assert_array_equal(mapped, jax.lax.map(jax.random.uniform, keys))


@pytest.mark.long
def test_references_draw_from_no_task_key(monkeypatch):
    """The random reference's key is none of the tasks' keys (nor theirs inside)."""
    env = envs.make("darkroom", size=3, horizon=4)
    params = jax.vmap(env.params_for_task)(jnp.arange(4))
    seen = []
    real = evaluate_module.reference_returns

    def spy(env, params, key, *args, **kwargs):
        seen.append(np.asarray(jax.random.key_data(key)))
        return real(env, params, key, *args, **kwargs)

    monkeypatch.setattr(evaluate_module, "reference_returns", spy)
    key = jax.random.key(0)
    methods = {"random": RandomAgent(env), "oracle": OracleAgent(env)}
    results = evaluate_module.evaluate_methods(env, methods, params, key, 1)
    task_keys = jax.random.split(jax.random.clone(key), 4)
    inner = jax.vmap(lambda k: jax.random.split(k, 3))(jax.random.clone(task_keys))
    taken = np.concatenate(
        [jax.random.key_data(task_keys), jax.random.key_data(inner).reshape(-1, 2)]
    )
    (used,) = seen
    assert not (taken == used).all(axis=1).any()
    assert set(results) == set(methods)


@pytest.mark.long
def test_envs_report():
    for name in ("bernoulli_bandit", "darkroom", "point_robot"):
        row = family_returns(name, num_tasks=4)
        assert np.isfinite(row["random"])


def tiny_experiment(name: str):
    config = load_experiment(name, "smoke")
    # (T2MIR's mixture-of-experts layers name layer indices: kept)
    small = config.model.num_layers > 1 and not config.model.moe_layers
    model = TINY_MODEL if small else {}
    return configtools.override(config, {**tiny_overrides(config), **model})


@pytest.mark.long
def test_the_issue_command(tmp_path):
    """``JAX_DEBUG_KEY_REUSE=1 agentrl train ad_darkroom --preset smoke``, shrunk:
    the dataset is written and the model trained under the checker."""
    config = load_experiment("ad_darkroom", "smoke")
    sizes = {**tiny_overrides(config), **TINY_MODEL}
    argv = ["train", "ad_darkroom", "--preset", "smoke", "--no-progress"]
    argv += ["--run-dir", str(tmp_path / "run")]
    argv += [f"--{field}={value}" for field, value in sizes.items()]
    env = {**os.environ, "JAX_DEBUG_KEY_REUSE": "1"}
    root = str(Path(agentrl.__file__).parent.parent)  # this checkout's agentrl
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "agentrl.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "run" / "metrics.jsonl").read_text().count('"loss"') == 2


@pytest.mark.long
def test_every_source_writes_a_dataset(tmp_path):
    ran = set()
    for env_name, args in SOURCE_ENVS.items():
        env = envs.make(env_name, **args)
        for source in applicable_sources(env):
            if source == "learned_learner":  # needs a run: see below
                continue
            settings = {"rollin": "uniform"} if source == "dpt_rollin" else {}
            for extra in [{}, settings] if settings else [{}]:
                if source == "dpt_rollin" and extra and env_name != "darkroom":
                    continue
                histories = source_histories(source, env, **extra)
                out = tmp_path / f"{env_name}-{source}-{len(extra)}"
                write_dataset(out, env, histories, 3, 4, seed=1, chunk_size=2)
                ran.add(source)
    assert ran == set(SOURCES) - {"learned_learner"}, sorted(ran)


def train_and_evaluate(name: str, run_dir) -> None:
    run = fit(tiny_experiment(name), run_dir, progress=False)
    # the model, the default baselines and every context control, one key
    results, _ = run_results(run, control=list(CONTEXT_CONTROLS))
    assert {f"{next(iter(results))}/{c}" for c in CONTEXT_CONTROLS} <= set(results)
    for result in results.values():
        assert np.isfinite(result.returns).all()


#: One experiment per algorithm in CI, the others in `make test-heavy`
#: (XLand's are left out: minutes of compiling, and no key path of their own)
EXPERIMENTS = by_experiment([n for n in known_experiments() if "xland" not in n])


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_trains_and_evaluates(name, tmp_path):
    train_and_evaluate(name, tmp_path / name)


@pytest.mark.long
def test_expert_distillation_data(tmp_path):
    run = fit(tiny_experiment("ad_darkroom"), tmp_path / "run", progress=False)
    (source,) = {p.parent for p in run.glob("**/agentrl.json")}
    expert_dataset(source, tmp_path / "expert", 1)


@pytest.mark.long
def test_online_learner_as_a_source(tmp_path):
    config = tiny_experiment("rl2_darkroom")
    run = fit(config, tmp_path / "run", progress=False)
    env = envs.make(config.data.env, **dict(config.data.env_args))
    split = env.task_split(config.data.split_fraction, config.data.seed)
    ids = jnp.asarray(split.train[:3], jnp.int32)  # the learner's training tasks
    params = jax.vmap(env.params_for_task)(ids)
    histories = source_histories("learned_learner", env, run_dir=str(run))
    history = histories(params, jax.random.key(3), 1, ids)
    assert history.action.shape == (3, env.horizon)


@pytest.mark.long
@pytest.mark.parametrize("name", ["ad_darkroom", "rl2_bandit"])
def test_sweep(name, tmp_path):
    outcome = run_sweep(
        tiny_experiment(name),
        seeds=[0, 1],
        grid={"lr": [1e-3, 3e-4]},
        out_dir=tmp_path / "sweep",
        steps_per_call=1,
        progress=False,
    )
    assert len(outcome.rows) == 2
