"""Meta-DT on Dark Room 9x9 (H=20) from the Q-learning histories of ``ad_darkroom``.

Meta-DT (Wang et al., NeurIPS 2024; ``agentrl.algos.meta_dt``): a world
model's task representation ``z_t`` (a GRU over the episode's last 4
transitions, trained to predict the reward) and a 5-step prompt cut from an
earlier episode of the task where the world model errs most condition a
return-conditioned transformer over one episode. Trained on the same data as
``ad_darkroom`` and ``dt_darkroom`` (260 Q-learning histories of 60 episodes,
65 training goals, 16 held out) with the same model and update budget in
``cpu``, so the three compare at equal data. On a held-out goal the first
episode has no prompt; every later one is prompted by the best episode the
agent has played there, so it should improve after its first success, and
needs no expert demonstration.

A cell is observed as its one-hot and its ``(x, y) / 9`` (``algo.grid_coordinates``,
the geometry ``ad_darkroom``'s factorised grid embedding gives AD; a
one-hot alone left DT near random on held-out goals). Acting is
``ad_darkroom``'s ``sample_then_greedy`` (sample until the first
reward on a goal, then greedy); the target return is the data's best episode
return (20, a goal on the start cell), as DT's.

- ``smoke``: ``agentrl train meta_dt_darkroom --preset smoke`` — 16
  histories of 40 episodes, a 2-layer width-32 policy, 60 updates; training
  and evaluating it took 4.4 min at load ~14 on 2 cores (mostly
  compiling). Checks plumbing.
- ``cpu``: ``agentrl reproduce meta_dt_darkroom --preset cpu`` (then
  ``python benchmarks/paired_repro.py repro_meta_dt_darkroom_cpu:meta_dt
  repro_dt_darkroom_vs_ad_darkroom_cpu:ad
  repro_dt_darkroom_vs_ad_darkroom_cpu:dt``), or ``--compare ad_darkroom``
  to train AD beside it — ``ad_darkroom``'s cpu data, model (3 layers, 4 heads,
  width 64), batch 32, lr 1e-3 and 2,000 updates, 50 evaluation episodes.
  A window is 25 steps (5 prompt + 20), against AD's 80. Measured (the
  protocol's 5 seeds, 8 test goals each, the same data seeds, splits and
  evaluation keys as the committed ``repro_dt_darkroom_vs_ad_darkroom_cpu``;
  2-core CPU, two seeds at a time beside other jobs, ~7-12 min a seed):
  return 1.2 -> 6.00 [3.49, 8.84] over the last 10 of 50 episodes, score
  0.357 [0.204, 0.523] (seeds 0.52, 0.21, 0.42, 0.43, 0.21; validation
  chose ``sample`` in four seeds, ``sample_then_greedy`` in seed 3;
  ``repro_meta_dt_darkroom_cpu``). Paired with the same seeds' AD (10.76):
  **-4.77 [-8.63, -0.47]**; with their DT (2.23): **+3.77 [0.69, 6.56]**
  (``paired_meta_dt_vs_ad_dt``; AD's and DT's runs are older, from before
  training drew its batches on the device: same data, splits and keys,
  another batch stream). So Meta-DT is ahead of DT and behind AD here:
  the paper's "ahead of both" holds for DT only. Only Meta-DT observes the
  cells' coordinates; without them (``--set algo.grid_coordinates=false``,
  session 55, same seeds): 5.53 [2.91, 8.39], minus DT +3.30 [0.02, 6.12],
  minus itself with them -0.47 [-2.89, 2.02]
  (``paired_meta_dt_darkroom_no_coordinates_session55``): the coordinates
  do not carry the gap. Controls
  (``--controls``): minus rewards zeroed +5.80 [3.30, 8.60], shuffled
  +5.75 [3.31, 8.53], an empty context +5.77 [3.22, 8.64]; minus expert
  distillation -2.08 [-4.73, 0.39] (8.08 return on expert episodes only):
  it learns in context, and the histories add nothing over expert data.
- ``gpu``: ``ad_darkroom``'s gpu data (2,600 histories of 100 episodes) and
  the reference's Meta-DT transformer (3 layers, 1 head, width 128, FFN 512,
  dropout 0.1 on residuals, embeddings and attention weights, ReLU as
  the reference, ``model.ffn_activation="relu"`` since session 69, GELU's
  tanh form before) at batch 128, lr 1e-4 with weight decay 1e-4,
  5,000 updates, 100 evaluation episodes; sized, not measured (no GPU was lent to the
  session that wrote it), for a few minutes on one H100: ~0.6M parameters x
  128 x 25 tokens a step.
- ``full``: the reference's Point-Robot settings (docs/references.md,
  "Meta-DT"): batch 128, lr 1e-4, weight decay 1e-4, warm-up 10,000 then
  a constant rate, gradient clip 0.25, 100,000 updates, dropout 0.1, width
  128, 3 layers (the ``gpu`` preset too, at 5,000 updates; until session
  44 both decayed by a cosine and clipped at 1; until session 55 neither
  dropped attention weights).

Deviations (see ``agentrl.algos.meta_dt``): world model trained jointly with
the policy (``stop_gradient`` on ``z``) rather than pretrained; the prompt's
source in training is the previous episode of the same history; 20% of each
batch trains with the empty prompt instead of 20,000 prompt-free updates;
cells carry their coordinates; one target return for every goal (the
data's best, as DT's) where the reference gives each task its own data's
best (found in session 50, not changed: the numbers above are with it);
the paper evaluates on MuJoCo / Meta-World /
Point-Robot, not Dark Room, and on expert/medium SAC data, not Q-learning
learning histories.
"""

import dataclasses

import ad_darkroom

from agentrl.algos import MetaDT
from agentrl.train.experiments import make_presets, steps_fields

BASE = dataclasses.replace(
    ad_darkroom.BASE,
    name="meta_dt_darkroom",
    algo=MetaDT(),
    model=dataclasses.replace(ad_darkroom.BASE.model, obs_encoding="table"),
)

# the reference's Meta-DT transformer (NJU-RL/Meta-DT configs/args_point_robot.py)
REFERENCE_MODEL = {
    "model.num_layers": 3,
    "model.num_heads": 1,
    "model.d_model": 128,
    "model.d_ff": 512,
    "model.ffn_activation": "relu",  # dt_activation_function (DT's default too)
    "model.dropout": 0.1,
    "model.attention_dropout": 0.1,  # train_meta_dt.py: attn_pdrop too
    "train.batch_size": 128,
    "train.lr": 1e-4,
    "train.weight_decay": 1e-4,
    # train_meta_dt.py: linear warm-up, then constant (LambdaLR); trainer.py
    # clips the gradient norm at 0.25
    "train.schedule": "constant",
    "train.grad_clip": 0.25,
}
# ad_darkroom's smoke data and model, without AD's window field
SMOKE = {
    k: v for k, v in ad_darkroom.CHANGES["smoke"].items() if k != "context_episodes"
}
PRESETS = make_presets(
    BASE,
    smoke=SMOKE,
    cpu={},
    gpu={
        **REFERENCE_MODEL,
        "data.num_tasks": 2600,
        "data.num_episodes": 100,
        **steps_fields(5000),
        "eval.num_episodes": 100,
    },
    full={
        **REFERENCE_MODEL,
        "data.num_tasks": 2600,
        "data.num_episodes": 100,
        "train.steps": 100_000,
        "train.max_warmup_steps": 10_000,
        "train.log_every": 2500,
        "train.checkpoint_every": 25_000,
        "eval.num_episodes": 100,
    },
)
