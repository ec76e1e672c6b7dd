"""AD on XLand-MiniGrid from PPO learning histories in the XLand-100B schema.

Algorithm Distillation (Laskin et al., 2023) on XLand-MiniGrid rulesets, with
its data taking the route XLand-100B's does (Nikulin et al., 2024): learning
histories written as an HDF5 file in the published schema (one group per
ruleset; ``states`` compressed to ``tile * 12 + colour``; ``actions``,
``rewards`` float16, ``dones``), then imported as an agentrl dataset
(:mod:`agentrl.data.xland100b`) and trained on with the unchanged AD. The
file is ``data.path``: when it does not exist, ``fit`` first generates it
with agentrl's PPO source on the rulesets of ``data.env_args`` (each
history one PPO learner on one ruleset, learning from scratch); pointing
``data.path`` at a downloaded ``xland-trivial-20b.hdf5`` /
``xland-100b.hdf5`` trains on the published data instead, with
``data.env_args`` naming its env and the file of the ruleset table it was
collected with (e.g. ``env_id=XLand-MiniGrid-R1-13x13
rulesets=/path/to/medium_1m_v2``; the import refuses xminigrid's benchmark
names, which load other tables since xminigrid 0.9.2: docs/datasets.md).

Tasks: single-goal rulesets generated locally by agentrl
(:func:`agentrl.envs.xland.generate_rulesets`: pick up or stand next to an
object among two distractors, ``R1-9x9``), split 80/20 into training and
held-out rulesets; evaluation runs the frozen model in context on held-out
rulesets. Horizon: xminigrid's ``3 * 9 * 9 = 243`` steps in ``cpu`` and
``gpu``, 20 in ``smoke``.

Deviations from the XLand-100B AD baseline (``baselines/ad/configs/xland.yaml``:
8 layers, width 512, 8 heads, 4,096-step windows, lr 1e-3, batch 64 per GPU,
embedding dropout 0.1):

- Optimiser and regularisation: the baseline's Adam without weight decay,
  500 warm-up steps and a cosine to ~0 at ``gpu``/``full`` (since session
  44), and its betas (0.9, 0.99) and dropout on the embedding only (0.1;
  none on the residuals or the attention weights) there too
  (``train.adam_b2``, ``model.embedding_dropout``/``residual_dropout``;
  until then b2 0.999 and 0.1 on the embedding and residuals). The
  ``cpu`` preset keeps 0.1 on both and b2 0.999. Its fp16 (ours bfloat16
  matmuls) stays.
- Positions and the trunk: the baseline's attention adds ALiBi's per-head
  distance biases (``baselines/ad/src/nn.py``,
  ``FlashAliBiCausalSelfAttention``) and embeds no position; agentrl's
  rotary positions (both relative, so both read a rolling window the
  same at every step). Its blocks' MLP is torch's exact GELU (matched at
  ``gpu``/``full``, ``model.ffn_activation="gelu"``, session 69); its
  action head reads the last block's output with no final LayerNorm
  (agentrl's model has one).
- Observations enter the transformer as the flattened ``[5, 5, 2]`` (tile,
  colour) ids through one linear layer (agentrl's encoder for multi-axis
  Box observations); the baseline embeds each id. Training windows are
  whole episodes (``context_episodes``), not a fixed 4,096 steps.
- The data: one agentrl PPO learner per history for ``data.num_episodes *
  243`` steps (~49k in ``gpu``) instead of 32 of the 8,192 parallel
  environments of one PPO learner over 500M steps; and no expert relabel
  (agentrl's PPO has no relabelling pass, so the file has no
  ``expert_actions`` and trains AD, not DPT).
- The PPO learner that writes the histories (the teacher). The datasets'
  collector (dunnolab/xland-minigrid-datasets ``collection/training/``) is a
  recurrent actor-critic: ``nn.py`` lines 170-232, each cell's tile and
  colour embedded (16 units each, lines 100-120) under three 2x2
  convolutions of 16, 32 and 64 channels (lines 123-160), the previous
  action's embedding (line 190; 0 on the first step, ``train.py`` line 448),
  a GRU of 256 units for ``trivial`` (``configs/trivial_base.yaml`` line 14;
  1,024 for ``medium``, ``medium_base.yaml`` line 13) and 256-unit tanh
  heads (``head_hidden_dim``, line 13 and line 12), its hidden state zero at
  the start and never reset after (nn.py line 18; the rollout, train.py
  lines 227-267, carries it over episode ends), its update replaying the GRU
  over whole env streams from the rollout's first state (train.py lines 269,
  333-353). What matches: ``gpu`` and ``full`` use agentrl's PPO source with
  ``core="gru"``, ``core_hidden=256``, ``obs_encoder="cells"``
  (:mod:`agentrl.sources.ppo_gru`): the same cell embeddings and
  convolutions, GRU width and head width, the previous action as input
  (one-hot through the core's input layer, a learned linear map like
  ``nn.Embed``), the same never-reset memory. What still differs: (a)
  agentrl's core has one ReLU layer of 256 units between the encoder (with
  the previous action) and the GRU (the collector feeds the concatenation to
  the GRU directly), and its GRU has a hidden bias on every gate (the
  collector's on the candidate only), and the initial scales differ (the
  GRU's input weights LeCun- not Glorot-normal, nn.py line 29; the heads'
  first layers gain sqrt(2) not 2, lines 198, 205); (b) the task context: in
  ``trivial`` the collector also embeds the ruleset's goal and rules (nn.py
  lines 75-97, 214-223; ``context_dropout`` 0.0 there, 1.0, i.e. dropped, in
  ``medium``), so its teacher is told the task, and its heads see that
  context again (nn.py line 223); agentrl's is not; (c) one learner per
  ruleset with one env stream, whose minibatches are contiguous chunks of
  the rollout replayed from the state the actor had there (the collector:
  8,192 streams of one ruleset, 8 minibatches of whole 512-step streams, one
  epoch, lr 5e-4, gamma and lambda 0.999, entropy 0.001,
  ``trivial_base.yaml`` lines 6-16; agentrl's PPO settings, lr 3e-3, gamma
  0.99, lambda 0.95, 4 epochs over rollouts of 4 episodes cut into 4 chunks,
  are its own, and the collector decays its lr linearly, train.py lines
  100-102, and weighs the squared value error without agentrl's 1/2,
  utils.py line 82); (d) a truncated episode bootstraps from its final
  observation (the collector's GAE stops at every episode end, ``utils.py``
  line 36). ``smoke`` and ``cpu`` keep the memoryless MLP teacher over the
  flattened ids (two 64-unit tanh layers; committed records depend on them).
  The env's ``observation="onehot"`` (``rl2_xland``'s) cannot be used here:
  the schema's ``states`` hold ids only, without the one-hot vector's agent
  direction (``generate_hdf5`` refuses other observations). Whether the
  memoryless teacher's histories improve less within their steps, measured
  (``agentrl bench ppo_teacher_memory``,
  ``benchmarks/results/ppo_teacher_memory.md``, 2-core CPU, 2026-12-01): on
  16 rulesets of the ``cpu`` preset's table, 9,720 steps a history (about 71
  episodes), the source's default PPO settings, the mean return of the last
  5 episodes minus the first 5 rose by 0.222 [95% CI 0.129, 0.320] for the
  MLP, 0.156 [-0.008, 0.332] for the GRU (flat ids) and 0.131 [0.001, 0.272]
  for the GRU with the cell encoder; GRU minus MLP, paired by ruleset,
  -0.066 [-0.219, 0.096] and -0.092 [-0.192, 0.013]. Not less, then, at this
  size: no difference resolved, the MLP's point estimate the highest. The
  GRU teachers were not tuned (the collector's own PPO settings differ,
  (c)).
- Acting: evaluation samples from the model's action distribution
  (``eval.acting="sample"``, every preset); the baseline acts greedily
  (``action = dist.mode``, ``baselines/ad/evaluate_in_context.py`` and the
  evaluation in ``train_xland.py``).
- Evaluation length: 20 episodes (``cpu``), 50 (``gpu``/``full``) on 32 or
  64 held-out rulesets; the baseline evaluates 200 episodes during training
  (``configs/xland.yaml`` ``eval_episodes``) and its README runs
  ``evaluate_in_context.py`` with 500 episodes on 1,024 rulesets.
- Published data: by default (``data.held_out="file"``) importing a
  published file holds out 20% of the file's rulesets
  (``data.split_fraction`` 0.8; validation and test) and trains on the
  other 80%'s histories only. The baseline trains on every ruleset of the
  file and evaluates on benchmark rulesets outside it
  (``np.setdiff1d(all_rulesets, train_rulesets)`` in
  ``evaluate_in_context.py``): ``--data.held_out table`` does that, the
  validation and test rulesets drawn with ``data.seed`` from the table's
  outside the file (as many as "file" holds out: 1,000 each for
  XLand-Trivial-20B), where the baseline draws its ``eval_rulesets`` with
  replacement from NumPy's unseeded generator (docs/datasets.md).

Presets:

- ``smoke``: 8 rulesets, horizon 20, 8 PPO histories of 10 episodes, a
  1-layer width-16 model, 4 steps; about 30 s on 2 CPU cores, mostly
  compiling. Checks the HDF5 round trip and plumbing (run by
  tests/test_data_xland100b.py).
- ``cpu``: 256 rulesets, 204 histories of 40 episodes (9,720 steps each), a
  4-layer width-128 model, 4 episodes a window, 3,000 steps (not timed yet;
  generating the PPO data is the larger part).
- ``gpu``: 4,096 rulesets, 3,276 histories of 200 episodes (48,600 steps)
  by the GRU teacher (above), 8 layers, width 512, 8 heads, the baseline's
  exact GELU (``model.ffn_activation="gelu"``, session 69), 16 episodes a
  window, batch 64, 50,000 steps; for one accelerator. The GRU teacher with
  the cell encoder generated 17x slower than the MLP on 2 CPU cores (410 s
  against 24 s for 16 histories, the record above); not timed on a GPU.
- ``full``: the ``gpu`` settings (its own file, ``data/xland_ad-full.hdf5``):
  the baseline's model on the largest data generated here; for the published
  XLand-100B data set ``data.path`` to the downloaded file.

No result is claimed yet: none of the presets above smoke has been run.
"""

from agentrl.algos import AD
from agentrl.models import ModelConfig
from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig, TrainConfig
from agentrl.train.experiments import make_presets

BASE = ExperimentConfig(
    name="xland_ad",
    algo=AD(context_episodes=4),
    data=DataConfig(
        env="xland",
        env_args=(("num_rulesets", 256), ("ruleset_seed", 0)),
        source="ppo",
        num_tasks=204,
        num_episodes=40,
        path="data/xland_ad-cpu.hdf5",
    ),
    model=ModelConfig(
        num_layers=4,
        num_heads=4,
        d_model=128,
        d_ff=512,
        dropout=0.1,
    ),
    train=TrainConfig(
        steps=3000,
        batch_size=16,
        lr=1e-3,
        log_every=50,
        checkpoint_every=500,
    ),
    eval=EvalConfig(num_tasks=32, num_episodes=20, acting="sample"),
)

CHANGES = dict(
    smoke={
        "context_episodes": 2,
        "data.env_args": (("num_rulesets", 8), ("ruleset_seed", 0), ("horizon", 20)),
        "data.num_tasks": 8,
        "data.num_episodes": 10,
        "data.path": "data/xland_ad-smoke.hdf5",
        "model.num_layers": 1,
        "model.num_heads": 2,
        "model.d_model": 16,
        "model.d_ff": 32,
        "model.dropout": 0.0,
        "train.steps": 4,
        "train.batch_size": 4,
        "train.warmup_steps": 1,
        "train.log_every": 2,
        "train.checkpoint_every": 2,
        "eval.num_tasks": 2,
        "eval.num_episodes": 2,
    },
    cpu={},
    gpu={
        "context_episodes": 16,
        "data.env_args": (("num_rulesets", 4096), ("ruleset_seed", 0)),
        "data.num_tasks": 3276,
        "data.num_episodes": 200,
        "data.path": "data/xland_ad-gpu.hdf5",
        # the collector's recurrent teacher at its trivial width
        # (collection/configs/trivial_base.yaml line 14, nn.py line 18)
        # and its observation encoder (nn.py lines 100-160)
        "data.source_args": (
            ("core", "gru"),
            ("core_hidden", 256),
            ("obs_encoder", "cells"),
        ),
        "model.num_layers": 8,
        "model.num_heads": 8,
        "model.d_model": 512,
        "model.d_ff": 2048,
        # baselines/ad/src/nn.py, TransformerBlock's MLP: torch's exact nn.GELU()
        "model.ffn_activation": "gelu",
        "model.compute_dtype": "bfloat16",
        "model.remat": True,  # 8 layers of 3,888-token windows: memory-bound
        "train.steps": 50_000,
        "train.batch_size": 64,
        # the baseline's DeepSpeed Adam: no weight decay, 500 warm-up steps
        # (the derived default here), a cosine to ~0
        "train.weight_decay": 0.0,
        "train.cosine_end": 0.0,
        # baselines/ad/configs/xland.yaml line 10: betas (0.9, 0.99); lines
        # 24-26: attention_dropout 0.0, residual_dropout 0.0,
        # embedding_dropout 0.1 (train_xland.py's defaults 0.5 / 0.1 / 0.3,
        # lines 40-42, are overridden by the yaml its README runs)
        "train.adam_b2": 0.99,
        "model.embedding_dropout": 0.1,
        "model.residual_dropout": 0.0,
        "train.log_every": 500,
        "train.checkpoint_every": 5000,
        "eval.num_tasks": 64,
        "eval.num_episodes": 50,
    },
)
# ``full`` is the gpu preset: the baseline's model on the largest data this
# experiment generates; the published data is a ``data.path`` away (above).
CHANGES["full"] = {**CHANGES["gpu"], "data.path": "data/xland_ad-full.hdf5"}
PRESETS = make_presets(BASE, **CHANGES)
