"""What the experiments on the MuJoCo families share: SAC learning
histories, AD's model and the budgets of each preset.

:func:`sac_histories` and :data:`DATA_CHANGES` are the data of every
preset (horizon, histories, SAC episodes), shared by AD, DPT (which adds
SAC's final-policy labels) and the online learners (RL², transformer PPO:
no dataset, but SAC learning from scratch with these settings is their
evaluation's baseline and its converged return their normalized score's
oracle, as for AD).

The data are SAC learning histories (``source="sac"``, Meta-DT's and
T2MIR's collector, docs/references.md), one SAC run per training task
learning from scratch; AD reads a context of 4 whole episodes (T2MIR's).
The presets differ in horizon, data and model size:

- ``smoke``: 4 histories of 4 episodes of 20 steps, a 2-layer width-32
  model, 40 updates; plumbing only (most of its minutes are compiling MJX).
- ``cpu``: 100-step episodes (the references': 200; halved so that the SAC
  data, the 400-step context and the evaluation fit a 2-core CPU), 16
  histories on 16 of the 45 training tasks, 120 SAC episodes each (12,000
  steps: SAC learns part of the task in that time, not all of it), a
  3-layer width-64 model, 1,500 updates of batch 16, 30 evaluation episodes.
  HalfCheetah-Vel (:data:`HALFCHEETAH_DATA_CHANGES`) has 8 histories of 600
  episodes instead: over 120 its SAC barely improves, and AD then has no
  learning to distil; its AD reads them with T2MIR's loader
  (:data:`T2MIR_LOADER`).
- ``gpu``: the references' horizon (200), one history per training task
  (45), 100 SAC episodes (20,000 steps), T2MIR's AD width (3 layers, 8
  heads, width 256, bfloat16 matmuls), 3,000 updates of T2MIR's batch (24
  on HalfCheetah-Vel, 32 on Walker-Params).
- ``full``: T2MIR's AD settings (3 layers, 8 heads, width 256, FFN 1024,
  dropout 0.05, batch 24 / 32 (Walker), AdamW lr 3e-4, wd 1e-4, clip 1,
  10k warm-up then a cosine to 0 (``train.cosine_end``), 100k
  updates) on 45 histories of 1,000 SAC episodes (200,000 steps; T2MIR's
  collector runs 250k steps for HalfCheetah-Vel, 1M for Walker).

SAC's replay buffer is T2MIR's collector's: 10,000 transitions for
HalfCheetah-Vel (SAC's default, ``min(steps, 10_000)``), 100,000 for
Walker-Params at ``gpu`` and ``full`` (:data:`WALKER_DATA_CHANGES`; its
``cpu`` preset keeps the default its records used, 10,000 of 12,000
steps). SAC's random warm-up, ``min(2000, steps // 20)`` steps, is T2MIR's
2,000 at HalfCheetah-Vel's ``cpu`` and at ``full``, but 1,000 at ``gpu``
(20,000 steps) and 600 at Walker-Params' ``cpu``; the source baseline of
every evaluation runs with the same settings, so its first episodes are
that warm-up (docs/mujoco.md).

Deviations from T2MIR's AD (docs/references.md): one token per step
(``obs_t``, ``a_{t-1}``, ``r_{t-1}``; T2MIR: three tokens per step through
MLP embeddings), a Gaussian action head (T2MIR: MSE through a tanh; ``--set
model.head=mse`` gives that), no state normalisation, and the histories are
SAC's learning runs in their learning order (T2MIR's "mixed" data sorted by
return). T2MIR's loader and evaluation are options of AD (docs/references.md):
``--set algo.window_start=episode --set algo.episode_window=subset_by_return
--set algo.eval_context=sorted_episodes`` trains on 4 distinct episodes of a
history in ascending return and acts on its 3 best past episodes sorted by
return plus the current one (docs/mujoco.md has the measured runs).
Every HalfCheetah-Vel preset uses it (the ``cpu`` one since session 42,
measured there; the others since session 43, as T2MIR's reference does at
every size, unmeasured); Walker-Params' presets keep AD's own windows and
rolling context.
"""

from typing import Any

from _t2mir import T2MIR_AD_BLOCK

from agentrl.algos import AD
from agentrl.models import ModelConfig
from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig, TrainConfig
from agentrl.train.experiments import DRAWN_VALIDATION, steps_fields

#: Each preset's changes to :func:`sac_histories` (module docstring); at
#: ``gpu`` and ``full`` the split's 2 validation tasks become 32 drawn ones
#: (``DRAWN_VALIDATION``; ``cpu`` keeps its records' 2).
DATA_CHANGES: dict[str, dict[str, Any]] = dict(
    smoke={
        "data.env_args": (("horizon", 20),),
        "data.num_tasks": 4,
        "data.num_episodes": 4,
    },
    cpu={},
    gpu={
        "data.env_args": (("horizon", 200),),
        "data.num_tasks": 45,
        "data.num_episodes": 100,
        **DRAWN_VALIDATION,
    },
    full={
        "data.env_args": (("horizon", 200),),
        "data.num_tasks": 45,
        "data.num_episodes": 1000,
        **DRAWN_VALIDATION,
    },
)


#: HalfCheetah-Vel's changes: at ``cpu``, 8 histories of 600 SAC episodes
#: (60,000 steps a task), long enough for SAC's return to rise in them; at
#: 120 episodes it barely does (docs/mujoco.md, sessions 41-42).
HALFCHEETAH_DATA_CHANGES: dict[str, dict[str, Any]] = {
    **DATA_CHANGES,
    "cpu": {"data.num_tasks": 8, "data.num_episodes": 600},
}

#: T2MIR's Walker collector's SAC replay buffer (T2MIR-DPT
#: ``configs/args_walker_v0.yaml``, ``capacity``): 10x SAC's default.
WALKER_BUFFER = 100_000

#: Walker-Params' changes: at ``gpu`` and ``full``, SAC keeps
#: :data:`WALKER_BUFFER` transitions; ``cpu`` keeps the default (10,000 of
#: its 12,000 steps), as its records were made.
WALKER_DATA_CHANGES: dict[str, dict[str, Any]] = {
    **DATA_CHANGES,
    **{
        preset: {
            **DATA_CHANGES[preset],
            "data.source_args": (("buffer_size", WALKER_BUFFER),),
        }
        for preset in ("gpu", "full")
    },
}

#: T2MIR's loader and evaluation context, options of AD (docs/references.md):
#: 4 distinct episodes of a history in ascending return; acting on the 3 best
#: past episodes sorted by return plus the current one.
T2MIR_LOADER: dict[str, str] = {
    "window_start": "episode",
    "episode_window": "subset_by_return",
    "eval_context": "sorted_episodes",
}


def sac_histories(env: str, **source_args: Any) -> DataConfig:
    """The ``cpu`` preset's SAC histories on the MuJoCo family ``env``:
    16 of the 45 training tasks, 120 episodes of 100 steps each.
    ``source_args``: :class:`agentrl.sources.sac.SACConfig` fields (DPT's
    ``labels="final_policy"``)."""
    return DataConfig(
        env=env,
        env_args=(("horizon", 100),),
        source="sac",
        source_args=tuple(source_args.items()),
        num_tasks=16,
        num_episodes=120,
        split_fraction=0.9,  # the references' 45 training / 5 test tasks
    )


def ad_base(name: str, env: str, eval_episodes: int) -> ExperimentConfig:
    """The ``cpu``-sized AD experiment ``name`` on the MuJoCo family ``env``."""
    return ExperimentConfig(
        name=name,
        algo=AD(context_episodes=4),
        data=sac_histories(env),
        model=ModelConfig(
            num_layers=3, num_heads=4, d_model=64, d_ff=256, dropout=0.05
        ),
        train=TrainConfig(
            steps=1500,
            batch_size=16,
            lr=1e-3,
            warmup_steps=150,
            log_every=50,
            checkpoint_every=500,
        ),
        eval=EvalConfig(num_tasks=5, num_episodes=eval_episodes),
    )


def ad_changes(
    eval_episodes: int,
    data_changes: dict[str, dict[str, Any]] = DATA_CHANGES,
    loader: dict[str, str] | None = None,
    batch: int = 24,
) -> dict[str, dict[str, Any]]:
    """Each preset's changes to :func:`ad_base` (module docstring), on the
    family's ``data_changes``; ``loader``: AD's loader and evaluation
    context in every preset (:data:`T2MIR_LOADER`), else AD's own;
    ``batch``: T2MIR's batch for the family at ``gpu`` and ``full`` (24
    HalfCheetah-Vel, 32 Walker-Params)."""
    changes = _ad_preset_changes(eval_episodes, data_changes, batch)
    return {preset: {**c, **(loader or {})} for preset, c in changes.items()}


def _ad_preset_changes(
    eval_episodes: int, data_changes: dict[str, dict[str, Any]], batch: int
) -> dict[str, dict[str, Any]]:
    t2mir_model = {
        **T2MIR_AD_BLOCK,
        "model.num_heads": 8,
        "model.d_model": 256,
        "model.d_ff": 1024,
    }
    return dict(
        smoke={
            **data_changes["smoke"],
            "context_episodes": 2,
            "model.num_layers": 2,
            "model.num_heads": 2,
            "model.d_model": 32,
            "model.d_ff": 64,
            "model.dropout": 0.0,
            "train.batch_size": 4,
            "train.warmup_steps": 4,
            **steps_fields(40, logs=4, checkpoints=2),
            "eval.num_tasks": 2,
            "eval.num_episodes": 3,
        },
        cpu=data_changes["cpu"],
        gpu={
            **data_changes["gpu"],
            **t2mir_model,
            "model.compute_dtype": "bfloat16",
            "train.batch_size": batch,
            "train.lr": 3e-4,
            "train.warmup_steps": 300,
            **steps_fields(3000),
            "eval.num_episodes": eval_episodes,
        },
        full={
            **data_changes["full"],
            **t2mir_model,
            "train.batch_size": batch,
            "train.lr": 3e-4,
            "train.warmup_steps": 10_000,
            "train.cosine_end": 0.0,
            **steps_fields(100_000),
            "eval.num_episodes": eval_episodes,
        },
    )
