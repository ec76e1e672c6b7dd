"""AD on Dark Room 9x9 (H=20) from Q-learning histories, held-out goals.

Algorithm Distillation (Laskin et al., 2023): a causal transformer imitates
the across-episode learning histories of tabular Q-learning on the training
goals (65 of 81; 16 held out); on held-out goals it should improve episode
after episode in context, with frozen weights.

Cells are embedded by row, column and coordinates (``obs_encoding="grid"``):
with one learned vector per cell the model memorises the 65 training goals
and stays at random level on held-out ones (measured: score 0.01 -> 0.00
over 20 episodes with a 3-layer width-64 model); with the factorised
embedding a held-out goal shares its row and column with trained ones.
Evaluation samples until the first reward on a goal and then acts
greedily (``eval.acting="sample_then_greedy"``). The rule was chosen on
validation goals, never on test goals: in the 3-seed cpu reproduction the
validation score of the last 10 episodes was, per seed, 0.99 / 0.57 / 0.61
for it, 0.56 / 0.44 / 0.41 for greedy and 0.14 / 0.01 / 0.13 for sampling
(``benchmarks/results/repro_ad_darkroom_cpu.json``, ``protocol``). Sampling
reproduces the exploration noise of Q-learning's early episodes; greedy
never leaves a wrong first guess.

Training windows start at any step (``algo.window_start="any"``, as the
AD-ε reference code; ``docs/fidelity.md``), the shape of the rolling context
the model acts on; the rule choices quoted above and the data-size and
stride measurements below were taken with windows that started at episode
boundaries only, before that change.

Presets (times measured on the 2-core CPU of the development machine):

- ``smoke``: ``agentrl train ad_darkroom --preset smoke`` — 16 histories of
  40 episodes, a 2-layer width-32 model, 60 steps; seconds. Checks plumbing.
- ``demo``: what ``make demo`` runs — 260 histories (4 per training goal) of
  60 Q-learning episodes, 3 layers width 64, 1,200 steps, 20 evaluation
  episodes; 1 to 2.5 minutes (57-59 s and 136 s of pipeline measured on
  two days' machines, README). Expected: the held-out return rises over
  the first few episodes.
- ``cpu``: ``agentrl reproduce ad_darkroom --preset cpu`` — as
  ``demo`` with 2,000 steps and 50 evaluation episodes; about 4 minutes a
  seed (219 s for seed 0, data, validation choice and test included, no
  controls: 2-core AMD EPYC, quiet, session 67). Target (issue): mean
  normalized score of the last 10 of 50 episodes >= 0.75, first episode
  clearly lower. With any-step windows and the
  validation protocol (each seed its own data and split), re-run in
  session 45 with batches drawn on the device (Intel Xeon), 8 seeds x 8
  test goals: score 0.61 [0.47, 0.74], return 1.4 -> 10.3 [7.9, 12.5];
  Q-learning online on the same goals 0.70; AUC minus Q-learning's +0.04
  [-0.09, 0.17] (``repro_ad_darkroom_cpu``): not met. Controls
  (``--controls``): AD beats rewards zeroed, shuffled and an empty context
  by ~10 return and expert distillation by +4.2 [1.3, 7.1] over 8 seeds,
  but seeds 5-7 were added after the first 5 left that margin unresolved
  (+3.7 [-0.2, 7.5]): a CI after a look at the data is not a 95% one. The
  first run (session 21, host sampler, 5 seeds) gave 0.63 [0.48, 0.76],
  +4.8 [1.6, 8.2]. A confirmation on fresh seeds 8-12, its size fixed
  before the run (session 51, AMD EPYC, ``--seeds 5 --first-seed 8
  --controls``; ``repro_ad_darkroom_cpu_fresh_seeds``): score 0.52 [0.28,
  0.75], return 1.15 -> 8.66 [4.77, 12.4] (per seed 10.75, 2.00, 12.00,
  8.53, 10.00); beats rewards zeroed / shuffled / an empty context by
  +8.5 / +8.5 / +8.1 (CIs above 0), expert distillation by +2.9 [-3.6,
  8.4]: not resolved. AD improves in context; that it learns beyond its
  expert data is not shown on clean seeds. Acting on
  the reference's reading, the last 80 steps re-encoded every step
  (``--set algo.eval_context=window``, the same weights; 21x the rolling
  cache's time a step here, ``window_eval_throughput_darkroom``): 0.63
  [0.49, 0.76], +0.4 [-1.1, 2.0] return over the rolling cache
  (``paired_ad_darkroom_eval_context_window``), +3.6 [0.4, 6.6] over
  expert distillation read the same way. Expert distillation is not flat
  under the chosen ``sample_then_greedy`` rule (validation score 0.57, vs 0.33 greedy):
  sampling explores for it and it returns to a goal its context shows
  (docs/results.md). Data-size scan (``--set data.num_tasks=130|1040``,
  same updates and seeds): 0.63 at 130 histories, 0.61 / 0.68 at 260,
  0.66 / 0.62 at 1,040 (seeds 0 / 1): the number of histories is not the
  lever. Older measurement, episode-start windows (3 seeds):
  0.09 -> 0.48,
  not met; the source itself, Q-learning on this schedule, is at 0.67 over
  episodes 41-50 and the best of 64 Q-learning settings at 0.75
  (``agentrl bench q_learning_ceiling``), so the target asks AD to beat its
  data by a wide margin. Asking AD to learn faster than its source by
  training on every third episode (``agentrl reproduce ad_darkroom --set
  algo.episode_stride=3``) gave 0.51 [0.38, 0.64] (3 seeds), a paired
  difference of +0.03 [-0.10, 0.18] against stride 1: no gain. Its scores
  are bimodal: of 16 held-out goals, 6, 6 and 9 (per seed) stay at ~0 over
  the last 10 episodes while the rest sit at 0.86-1.0 (one at ~0.5 in
  each): the greedy model finds a goal and keeps it, or never finds it.
  With 120 episodes a history and stride 2, most windows come from the
  converged phase and the greedy model never finds a held-out goal (return
  1.19 flat, one seed).
- ``gpu``: a paper-scale model (4 layers, 8 heads, width 512, batch 512,
  lr 3e-4: AD-ε's code has 4 heads) on 2,600 Q-learning histories (40 per
  training goal) of 100 episodes, 3,000 updates, 100 evaluation
  episodes; sized to finish in under 8 minutes on one H100. Sizing
  (estimated, not measured: no GPU was lent to the session that wrote
  it): a step is 6 x 12.6M parameters x
  40,960 tokens = 3.1 TFLOP, ~0.1 s at an assumed 30 TFLOP/s sustained in
  float32/TF32, so 3,000 updates take ~5 minutes, leaving ~3 for the data
  (0.26M Q-learning steps), compiling and evaluating. The first run on a GPU
  should check the time and scale ``train.steps`` to fill the budget.
- ``t2mir_setup`` / ``t2mir_setup_gpu``: T2MIR's own AD setup (docs/references.md), to
  compare with ``t2mir_ad_darkroom`` there: 10x10 Dark Room, start in the
  corner, H=100, 100 goals split 80/20, context 4 episodes (400 steps).
  ``t2mir_setup``: 320 Q-learning histories (4 per training goal) of 60 episodes,
  the cpu model, 2,000 updates of batch 16, 20 held-out goals x 30 episodes
  (estimated ~15-25 minutes a seed on 2 cores). ``t2mir_setup_gpu``: 4
  layers, 8 heads, width 256, batch 64, lr 3e-4 on 800 histories of 100
  episodes, 10,000 updates, 50 evaluation episodes (same sizing rule: ~0.6
  TFLOP a step). Not T2MIR's own Dark Room AD model, which is width 64
  (FFN 256, the MoE layer's 384), batch 128, no dropout
  (``T2MIR-AD/configs/args_darkroom_v0.yaml``); this docstring said it was
  until session 44. ``t2mir_setup_full``: that config at its scale (width
  64, FFN 256, no dropout, batch 128, 300k updates, 10k warm-up, a cosine
  to 0, clip 1) on ``t2mir_setup_gpu``'s data (T2MIR trains on its
  downloaded "mixed" data, not published as code); for a GPU, not run.
  Both GPU setups take T2MIR-AD's block, leaky ReLU and NormFormer's norms
  and head scales (``_t2mir.T2MIR_AD_BLOCK``, session 69); ``t2mir_setup``
  keeps the plain pre-LN block with GPT-2's tanh GELU, as its records.
- ``full``: the paper's scale (docs/references.md, AD-ε Dark Room settings):
  4 layers, width 512, batch 512, lr 3e-4, 300k updates; for a GPU. The AD
  paper published no code; against AD-ε's code this preset differs in
  heads (8; 4), weight decay (1e-4; 0), the cosine's end (0.1; 0), warm-up
  (10,000; 5,078), dropout (0.1; 0.5/0.1/0.3) and Adam's b2 (0.999;
  0.99): ``ad_eps_darkroom``'s full preset takes the code's.
"""

from _t2mir import T2MIR_AD_BLOCK

from agentrl.algos import AD
from agentrl.models import ModelConfig
from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig, TrainConfig
from agentrl.train.experiments import make_presets, steps_fields

# Q-learning that explores for the first 30% of each history's episodes.
Q_LEARNING_FAST = (("explore_fraction", 0.3),)

BASE = ExperimentConfig(
    name="ad_darkroom",
    algo=AD(context_episodes=4),
    data=DataConfig(
        env="darkroom",
        source="q_learning",
        source_args=Q_LEARNING_FAST,
        num_tasks=260,
        num_episodes=60,
    ),
    model=ModelConfig(
        num_layers=3,
        num_heads=4,
        d_model=64,
        d_ff=256,
        dropout=0.1,
        obs_encoding="grid",
    ),
    train=TrainConfig(
        steps=2000,
        batch_size=32,
        lr=1e-3,
        max_warmup_steps=10_000,
        log_every=50,
        checkpoint_every=500,
    ),
    eval=EvalConfig(num_tasks=16, num_episodes=50, acting="sample_then_greedy"),
)

# What each preset changes in BASE (the cpu preset is BASE itself).
CHANGES = dict(
    smoke={
        "context_episodes": 2,
        "data.num_tasks": 16,
        "data.num_episodes": 40,
        "data.source_args": (),
        "model.num_layers": 2,
        "model.num_heads": 2,
        "model.d_model": 32,
        "model.d_ff": 128,
        "model.dropout": 0.0,
        "train.steps": 60,
        "train.batch_size": 8,
        "train.log_every": 1,
        "train.checkpoint_every": 15,
        "eval.num_tasks": 8,
        "eval.num_episodes": 6,
    },
    demo={
        "train.steps": 1200,
        "train.log_every": 30,
        "train.checkpoint_every": 300,
        "eval.num_episodes": 20,
    },
    cpu={},
    full={
        "data.num_tasks": 6500,
        "data.num_episodes": 1000,
        "data.source_args": (),
        "model.num_layers": 4,
        "model.num_heads": 8,
        "model.d_model": 512,
        "model.d_ff": 2048,
        "train.steps": 300_000,
        "train.batch_size": 512,
        "train.lr": 3e-4,
        "train.log_every": 7500,
        "train.checkpoint_every": 75_000,
        "eval.num_episodes": 100,
    },
)
# the paper-scale model: AD-eps Dark Room's layers, width, batch and rate; 8
# heads (AD-eps's code: 4, as its full presets; this one's gpu runs are on
# record with 8)
PAPER_MODEL = {
    "model.num_layers": 4,
    "model.num_heads": 8,
    "model.d_model": 512,
    "model.d_ff": 2048,
    "train.batch_size": 512,
    "train.lr": 3e-4,
}
# T2MIR's AD Dark Room: 10x10, corner start, H=100, 100 goals 80/20
T2MIR_ENV = (("size", 10), ("horizon", 100), ("start", "corner"))
CHANGES["gpu"] = {
    **PAPER_MODEL,
    "model.compute_dtype": "bfloat16",
    "data.num_tasks": 2600,
    "data.num_episodes": 100,
    **steps_fields(3000),
    "eval.num_episodes": 100,
}
CHANGES["t2mir_setup"] = {
    "data.env_args": T2MIR_ENV,
    "data.num_tasks": 320,
    "data.num_episodes": 60,
    **steps_fields(2000),
    "train.batch_size": 16,
    "eval.num_tasks": 20,
    "eval.num_episodes": 30,
}
CHANGES["t2mir_setup_gpu"] = {
    **T2MIR_AD_BLOCK,
    "data.env_args": T2MIR_ENV,
    "data.num_tasks": 800,
    "data.num_episodes": 100,
    "model.num_layers": 4,
    "model.num_heads": 8,
    "model.d_model": 256,
    "model.d_ff": 1024,
    "model.compute_dtype": "bfloat16",
    **steps_fields(10_000),
    "train.batch_size": 64,
    "train.lr": 3e-4,
    "eval.num_tasks": 20,
    "eval.num_episodes": 50,
}
# T2MIR-AD's Dark Room config (T2MIR-AD/configs/args_darkroom_v0.yaml) at its
# scale: 4 layers, 8 heads, width 64, FFN 256, no dropout, batch 128, lr 3e-4,
# wd 1e-4, 10k warm-up, a cosine to 0, clip 1, 300k updates
CHANGES["t2mir_setup_full"] = {
    **CHANGES["t2mir_setup_gpu"],
    "model.d_model": 64,
    "model.d_ff": 256,
    "model.dropout": 0.0,
    "model.compute_dtype": "float32",
    **steps_fields(300_000),
    "train.batch_size": 128,
    "train.warmup_steps": 10_000,
    "train.cosine_end": 0.0,
}
PRESETS = make_presets(BASE, **CHANGES)

# the targets `agentrl reproduce` judges it by (agentrl.evaluate.targets)
TARGET = "ad_darkroom"
