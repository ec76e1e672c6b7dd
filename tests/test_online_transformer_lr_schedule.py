"""ReLIC's learning-rate clock in transformer PPO (``algo.lr_clock="env_steps"``).

ReLIC (aielawady/relic 1c3b7a1) builds PyTorch's ``LinearLR`` (from
``warmup_start_factor`` 1e-3 of the rate to all of it over
``warmup_total_iters``, 10,000 in its Dark Room config) then
``CosineAnnealingLR`` (to ``lrsched_eta_min`` 1e-5 over ``lrsched_T_max``,
the run's 5M env steps), joined at the warm-up's end
(``relic/trainer/transformers_agent_access_mgr.py``), and steps them to
``num_steps_done`` after every update (``_update_agent`` in
``relic/trainer/transformers_trainer.py``), before that update's chunk is
counted (habitat-baselines' ``_coalesce_post_step``). Checked here: the
shape against those closed forms, the rate each update of a tiny run uses
(recorded where the trainer builds its chain) against the shape at the env
steps counted before it, the default clock's one rate a trial, the rates
of a run vmapped over the traced ``lr``, and the fields' checks and path to
the trainer.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from test_online_rl2 import hp
from test_online_transformer import make_trainer

import agentrl.online.ppo as online_ppo
from agentrl.schedule import schedule_shape, warmup_cosine_shape
from agentrl.train.config import TrainConfig

LR = 2e-4  # ReLIC's Dark Room rate


def relic_rate(steps, base, warmup, start, t_max, eta_min):
    """ReLIC's rate after its scheduler is stepped to ``steps`` env steps:
    PyTorch's closed forms of ``LinearLR`` (end factor 1) before the
    milestone ``warmup``, ``CosineAnnealingLR`` stepped to ``steps - warmup``
    from it (``CustomSequentialLR.step``)."""
    if steps < warmup:
        return base * (start + (1.0 - start) * steps / warmup)
    phase = math.pi * (steps - warmup) / t_max
    return eta_min + (base - eta_min) * (1.0 + math.cos(phase)) / 2.0


def test_the_shape_is_relics_warmup_then_cosine():
    """ReLIC's Dark Room schedule: 2e-4 x 1e-3 at step 0, the full rate at
    10,000, half-way down the cosine 2.5M steps later, 1e-5 at its end."""
    warmup, t_max, eta_min = 10_000, 5_000_000, 1e-5
    shape = warmup_cosine_shape(warmup, 1e-3, t_max, "cosine", eta_min / LR)
    points = (0, 2_500, warmup - 1, warmup, warmup + t_max // 2, warmup + t_max)
    for steps in points:
        want = relic_rate(steps, LR, warmup, 1e-3, t_max, eta_min)
        np.testing.assert_allclose(LR * float(shape(steps)), want, rtol=1e-5)
    assert LR * float(shape(0)) == pytest.approx(2e-7, rel=1e-5)
    assert LR * float(shape(warmup + t_max)) == pytest.approx(1e-5, rel=1e-5)
    flat = warmup_cosine_shape(warmup, 1e-3, t_max, "constant", 0.05)
    assert float(flat(warmup + t_max // 2)) == 1.0
    assert float(flat(warmup // 2)) == pytest.approx(1e-3 + 0.999 / 2, rel=1e-6)


def _recorded_rates(monkeypatch, trainer, params, runs: int = 1):
    """``[updates, runs]``: the rate of every chain ``trainer`` builds in a
    jitted run of ``params`` (``runs`` values of the traced ``lr`` vmapped
    over, or 1 run), in the order the updates ran."""
    rates = []
    make = online_ppo.optimizer

    def recording(lr, *args, **kwargs):
        jax.debug.callback(lambda v: rates.append(np.asarray(v)), lr, ordered=True)
        return make(lr, *args, **kwargs)

    monkeypatch.setattr(online_ppo, "optimizer", recording)

    def run(p):
        return trainer(jax.random.key(1), p)[0].update

    jax.block_until_ready(jax.jit(jax.vmap(run) if runs > 1 else run)(params))
    # the first: the chain init builds (lr 1, not vmapped); a vmapped
    # callback then runs once per run
    return np.stack(rates[1:]).reshape(-1, runs)


# a tiny run: 8 envs, trials of 8 steps in chunks of 2 (16 env steps a
# chunk, 4 updates a trial with the full one), 3 trials (192 env steps);
# a warm-up of 3 chunks and the cosine over the run's env steps after it
ENVS, CHUNK, TRIALS, WARMUP, START, END = 8, 2, 3, 48, 1e-3, 0.05
RUN = TRIALS * 8 * ENVS


def _env_step_trainer():
    shape = warmup_cosine_shape(WARMUP, START, RUN, "cosine", END)
    return make_trainer(
        CHUNK,
        num_updates=TRIALS,
        full_update=True,
        lr_clock="env_steps",
        lr_shape=shape,
    )


def _relic_rates(lrs):
    """``[updates, len(lrs)]``: ReLIC's rate of every update of the tiny run:
    its counter before update ``j`` holds the chunks before ``j - 1``."""
    counted = [max(j - 1, 0) * CHUNK * ENVS for j in range(TRIALS * 4)]
    rows = [
        [relic_rate(s, lr, WARMUP, START, RUN, END * lr) for lr in lrs] for s in counted
    ]
    return np.array(rows)


def test_each_update_uses_relics_rate_at_the_env_steps_counted_before_it(monkeypatch):
    """Updates 0 and 1 at 1e-3 of the rate, update 4 (48 env steps counted)
    at the whole rate, the cosine down from there: every partial and full
    update's rate is ReLIC's at its env-step counter."""
    trainer = _env_step_trainer()
    got = _recorded_rates(monkeypatch, trainer, hp(lr=LR))[:, 0]
    want = _relic_rates([LR])[:, 0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert got[0] == got[1] == pytest.approx(LR * START, rel=1e-5)
    assert got[4] == pytest.approx(LR, rel=1e-6)  # the warm-up's end
    assert len(set(got[4:].tolist())) == len(got) - 4  # a rate per update


def test_the_rates_follow_each_traced_lr_of_a_vmapped_run(monkeypatch):
    """Sweeps vmap over ``hp["lr"]``: each run's updates take its own rate."""
    trainer = _env_step_trainer()
    lrs = [LR, 3e-3]
    params = jax.tree.map(lambda *v: np.stack(v), hp(lr=lrs[0]), hp(lr=lrs[1]))
    got = _recorded_rates(monkeypatch, trainer, params, runs=2)
    np.testing.assert_allclose(got, _relic_rates(lrs), rtol=1e-5)


def test_the_default_clock_gives_every_update_of_a_trial_its_trials_rate(monkeypatch):
    """``lr_clock="trial"`` (the default): the chain of every update of
    trial ``u`` has ``lr x train``'s shape at ``u`` (today's rate)."""
    train = TrainConfig(steps=TRIALS, lr=LR, schedule="cosine", warmup_steps=1)
    shape = schedule_shape(train)
    trainer = make_trainer(CHUNK, num_updates=TRIALS, full_update=True, lr_shape=shape)
    assert trainer.shape.lr_clock == "trial"
    got = _recorded_rates(monkeypatch, trainer, hp(lr=LR))[:, 0]
    want = np.repeat([LR * float(shape(u)) for u in range(TRIALS)], 4)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def _config(**changes):
    from agentrl.configtools import override
    from agentrl.train.experiments import load_experiment

    config = load_experiment("transformer_ppo_darkroom", "smoke")
    return override(config, changes)


def test_the_fields_reach_the_trainer_over_the_runs_env_steps():
    from agentrl.envs import make as make_env
    from agentrl.online.program import transformer_program
    from agentrl.train.config import complete_config

    assert _config().algo.lr_clock == "trial"
    config = _config(
        **{
            "algo.lr_clock": "env_steps",
            "algo.lr_warmup_env_steps": 10,
            "algo.lr_warmup_start": 0.01,
            "train.schedule": "cosine",
            "train.cosine_end": 0.05,
        }
    )
    env = make_env(config.data.env, **dict(config.data.env_args))
    shape = transformer_program(complete_config(config, env), env).trainer.shape
    algo = config.algo
    run = config.train.steps * algo.num_envs * algo.trial_episodes * env.horizon
    assert shape.lr_clock == "env_steps"
    for steps in (0, 5, 10, 10 + run // 2, 10 + run):
        want = relic_rate(steps, 1.0, 10, 0.01, run, 0.05)
        assert float(shape.lr_shape(steps)) == pytest.approx(want, rel=1e-5)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"algo.lr_clock": "steps"}, "algo.lr_clock must be one of"),
        ({"algo.lr_warmup_env_steps": -1}, "algo.lr_warmup_env_steps must be an int"),
        ({"algo.lr_warmup_env_steps": 10}, "it needs algo.lr_clock='env_steps'"),
        ({"algo.lr_warmup_start": 0.0}, "algo.lr_warmup_start must be a number"),
        ({"algo.lr_warmup_start": 1.5}, "algo.lr_warmup_start must be a number"),
        (
            {"algo.lr_clock": "env_steps", "train.warmup_steps": 1},
            "train.warmup_steps must be 0",
        ),
    ],
)
def test_bad_values_name_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        _config(**changes)


def test_a_bool_is_no_warmup_start():
    from agentrl.algos import TransformerPPO

    with pytest.raises(ValueError, match="algo.lr_warmup_start must be a number"):
        TransformerPPO(lr_warmup_start=True)
