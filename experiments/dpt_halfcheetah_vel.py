"""DPT on HalfCheetah-Vel (50 target velocities, 45/5) from SAC learning histories.

The Decision-Pretrained Transformer on MuJoCo locomotion (T2MIR's
HalfCheetahVel-v0; the reward ``-|v - v_target| - 0.05 |a|^2``, the target
in ``[0, 3]`` hidden): given a context of one episode's transitions
``(s, a, r, s')`` of a task, it predicts the action for a query state.
The data are ``ad_halfcheetah_vel``'s SAC learning histories (the same
runs: same settings, same seed) with DPT's labels added
(``source_args labels="final_policy"``, :mod:`agentrl.sources.sac`): after
each task's SAC run, its *final* policy acting deterministically (the
squashed Gaussian mean, rescaled to the box) is evaluated at every recorded
state and stored as ``optimal_action``. A training example is a window of
``context_size`` consecutive transitions of one history (early, exploring
SAC episodes as often as late ones) and a query step drawn uniformly from
the same history, labelled by that final policy. The head is Gaussian
(``complete_model_config``'s default for Box actions). Online on the 5
held-out velocities the model's context is its own previous episode
(``context_update="auto"``: after every episode on MDPs); the first
episode has an empty context. Evaluation runs SAC learning from scratch on
the same velocities beside it (its converged return is the normalized
score's oracle: HalfCheetah has none) and random play, and plots the final
episode's return against the target velocity. Needs ``agentrl[mujoco]``.

How the DPT reference labels its tasks (jon--lee/decision-pretrained-
transformer, ``collect_data.py``): every task there is discrete (bandits,
linear bandits, Dark Room, Miniworld), labelled by the environment's own
optimal action (``env.opt_a``, ``env.opt_action(query_state)``) with a
cross-entropy loss; it has no continuous task and no learned labeller.
T2MIR-DPT (HalfCheetahVel-v0) trains with MSE against a per-task query set
whose actions' origin its published code does not show
(docs/references.md). HalfCheetah-Vel has no oracle, so the label here is
the nearest thing the data has: **deviation** -- a learned, imperfect
expert (SAC's final policy after the data's budget: at the ``cpu`` preset
60,000 steps, where SAC's return has risen but not converged), not an
optimal action. Other deviations: the contexts are consecutive transitions of a
learning run, not DPT's independent uniform roll-in nor T2MIR-DPT's
"mixed" data; query states are the history's own states, not uniform
draws; Gaussian negative log-likelihood, not T2MIR-DPT's MSE
(``--set model.head=mse`` gives that); one token per transition (DPT's
layout; T2MIR-DPT's too); no state normalisation; ``cpu`` halves the
references' 200-step horizon (``experiments/_locomotion.py``).

Presets (2-core CPU of the development machine; ``gpu`` for one H100):

- ``smoke``: ``agentrl train dpt_halfcheetah_vel --preset smoke`` — 4 SAC
  histories of 4 episodes of 20 steps, context 20, 2 layers width 16, 40
  updates; minutes of compiling MJX and SAC. Plumbing only.
- ``cpu``: ``agentrl reproduce dpt_halfcheetah_vel --preset cpu --seeds 1
  --controls`` — AD's ``cpu`` data (8 SAC histories of 600 episodes of
  100 steps since session 42; 16 of 120 before) with the labels, context
  100 (one episode), 4 layers width 64, 3,000 updates of batch 32, 30
  evaluation episodes on the held-out velocities. Measured (session 43,
  ``reproduce --seeds 1 --controls``, 83 min with two to four other jobs
  on the cores: SAC's histories 43, training 10, evaluation with SAC
  beside for 600 episodes and the expert-distillation run the rest;
  record ``repro_dpt_halfcheetah_vel_cpu``), 1 seed x 3 test velocities,
  validation chose ``sample``: return -113.2 -> -107.3, rise +5.9 [-2.9,
  14.7], score 0.59 [0.27, 1.00] (SAC's converged level after 600
  episodes 1; SAC learning beside it 0.26); minus rewards zeroed +17.5
  [14.2, 22.7], shuffled +0.03 [-4.9, 3.0], empty context -0.9 [-8.2,
  8.0], expert distillation -0.4 [-6.5, 5.9]: it reads the rewards
  (zeroing them hurts) but plays as well with an empty context, **no
  in-context learning**. On the 16 x 120 data before session 42 (``--set
  data.num_tasks=16 --set data.num_episodes=120``; record
  ``repro_dpt_halfcheetah_vel_cpu_num_tasks16_num_episodes120``, AMD
  CPU): -116.0 -> -117.0, the same verdict. Not feasible within 30 min
  on 2 cores: the SAC data alone (480k steps, one SAC update each) is
  35-45 min, and fewer SAC steps would weaken the labels (SAC's final
  policy) further. What it can show: the rise from episode 1 (empty
  context) to episode 2 (one episode in context: reward and velocity
  identify the target), and the context controls. Its ceiling is SAC's
  final policy after the data's SAC steps.
- ``gpu``: the references' horizon (200), AD's ``gpu`` data (45 histories
  of 100 SAC episodes) with the labels, context 200 (T2MIR-DPT's one-
  episode prompt), T2MIR-DPT's model (4 layers, 4 heads, width 128, FFN
  512, dropout 0.05), lr 3e-4, 5,000 updates of batch 32 in bfloat16; sized for about 3
  min on one H100 (estimated, not measured: no GPU was lent; SAC's
  20,000 sequential steps are most of it, as ``ad_halfcheetah_vel``'s).
- ``full``: T2MIR-DPT's training (batch 32, AdamW lr 3e-4, wd 1e-4, clip
  1, 10k warm-up then a cosine to 0, 100k updates, dropout 0.05) on 45
  histories of 1,000 SAC episodes.
"""

from _dpt import dpt_base, width_fields
from _locomotion import HALFCHEETAH_DATA_CHANGES, sac_histories

from agentrl.train.experiments import make_presets, steps_fields

EVAL_EPISODES = 30  # T2MIR's HalfCheetah-Vel evaluation

BASE = dpt_base(
    "dpt_halfcheetah_vel",
    sac_histories("halfcheetah_vel", labels="final_policy"),
    layers=4,
    width=64,
    heads=4,
    context=100,  # one 100-step episode
    steps=3000,
    batch=32,
    lr=1e-3,
    eval_tasks=5,
    eval_episodes=EVAL_EPISODES,
)
# T2MIR-DPT's HalfCheetahVel-v0 model: 4 layers, 4 heads, width 128, FFN 512,
# dropout 0.05 (T2MIR-DPT/configs/args_cheetah_vel_v0.yaml)
T2MIR_DPT = {
    "model.num_heads": 4,
    **width_fields(128),
    "model.dropout": 0.05,
    "train.lr": 3e-4,
}
CHANGES = dict(
    smoke={
        **HALFCHEETAH_DATA_CHANGES["smoke"],
        "context_size": 20,  # one 20-step episode
        "model.num_layers": 2,
        "model.num_heads": 2,
        **width_fields(16),
        "train.batch_size": 8,
        **steps_fields(40, logs=4, checkpoints=2),
        "eval.num_tasks": 2,
        "eval.num_episodes": 3,
    },
    cpu=HALFCHEETAH_DATA_CHANGES["cpu"],
    gpu={
        **HALFCHEETAH_DATA_CHANGES["gpu"],
        "context_size": 200,  # one 200-step episode, T2MIR-DPT's prompt
        **T2MIR_DPT,
        **steps_fields(5000),
        "model.compute_dtype": "bfloat16",
    },
    full={
        **HALFCHEETAH_DATA_CHANGES["full"],
        "context_size": 200,
        **T2MIR_DPT,
        **steps_fields(100_000),
        "train.warmup_steps": 10_000,
        "train.cosine_end": 0.0,
    },
)
PRESETS = make_presets(BASE, **CHANGES)
