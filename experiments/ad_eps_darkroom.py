"""AD-ε on Dark Room 9x9 from the noise curriculum (noise distillation).

The histories are made by the oracle acting ε-greedily with ε annealed from
1.0 down to a floor across each history's episodes (``noisy_oracle``
source): no RL training. Same model and loss as AD (``ad_darkroom``). The
AD-ε paper's claim: the in-context learner beats the best policy in its own
data.

The AD-ε paper anneals ε from 1 to ``1 - target performance``, so the data's
best policy is itself noisy: every preset anneals to ``ε = 0.3`` (a target
performance of 0.7), over 90% of each history, decayed per step as the
reference code does (``schedule="step"``). Training windows start at any
step (``algo.window_start="any"``, the reference's).

Acting (``eval.acting``) is an evaluation setting, chosen on validation
goals in reproductions: the ``gpu`` and ``full`` presets act greedily, as
the reference code does, the ``cpu`` preset by ``sample_then_greedy``, the
rule its validation goals chose (below); ``sample`` reproduces the data's
noise (and so its ceiling), ``sample_then_greedy`` explores by sampling
until the first reward on a goal, then exploits. With the reference
settings greedy acting never finds most validation goals at this budget
(validation score -0.02 / -0.02 / 0.11 in the three seeds): the reference's
greedy rule needs its 300k updates; the reproduction chose
``sample_then_greedy`` (seeds 0 and 2) and ``sample`` (seed 1, a tie with
``sample_then_greedy`` at 0.495, broken to the first listed).

- ``smoke``: ``agentrl train ad_eps_darkroom --preset smoke``; seconds.
- ``cpu``: ``agentrl reproduce ad_eps_darkroom --preset cpu`` —
  ``ad_darkroom``'s cpu model on 1,040 noise-curriculum histories (16 per
  training goal), 6,000 updates on windows of every second episode
  (``algo.episode_stride=2``: the curriculum the model sees is twice as
  steep), evaluated for 100 episodes as in the paper; about 13 minutes a
  seed alone on the 2-core CPU. Target: held-out return in the last 10 of
  100 episodes above the mean return of the data's best (last 10%)
  episodes. Measured with the reference settings and the validation
  protocol (3 seeds x 8 test goals, each seed its own data and split):
  return 1.92 in episode 1, 12.83 [7.26, 17.06] over the last 10, 1.195x
  the data's best [0.68, 1.59] (noisy oracle at the floor 11.24, oracle
  16.92): the point estimate is above 1, the CI is not, so not met. Per
  seed: 16.98 (seed 0, sample_then_greedy: at the oracle, 1.54x its data),
  14.25 (seed 2, sample_then_greedy; one of 8 goals never found) and 7.26
  (seed 1, sampling: the data's noise, two goals never found). Over 5
  seeds (seeds 3 and 4 added): 11.77 [7.68, 15.6], **1.09x [0.71, 1.45]**
  (per seed 1.59, 0.68, 1.31, 1.29, 0.58; seed 4 never finds 5 of its 8
  test goals): not met. Re-run in session 45 with today's code (batches
  drawn on the device; Intel Xeon; ``repro_ad_eps_darkroom_cpu``):
  ``sample_then_greedy`` chosen in every seed (resolved in 2 of 5), last-10
  return 1.48 -> 14.43 [12.0, 16.4], **1.34x [1.11, 1.53]** the data's
  best (noisy oracle 10.99): met; per seed 17.00, 14.53, 14.25, 13.88,
  12.50. With the reference's reading, the last 80 steps re-encoded every
  step (``--set algo.eval_context=window``, the same weights): 1.32x
  [1.11, 1.52], -0.14 [-1.66, 1.93] return against the rolling cache
  (``paired_ad_eps_darkroom_eval_context_window``). Before the
  reference settings (episode-aligned windows, ε decayed per episode,
  sampling) the same preset gave 0.955x (10.19 [9.20, 11.1]) and no seed
  passed 0.958x; with consecutive episodes 0.90
  (``repro_ad_eps_darkroom_cpu_episode_stride1.md``, the old settings).
  **That stride was chosen on test goals**: the comparison of 3 seeds that
  picked it (+0.58 [-0.11, 1.39] for stride 2) read goals that are, under
  today's three-way split, the validation and test goals of seeds 0-2, so
  the 1.34x above is not a clean test number. On fresh seeds 5-9, run
  once with the preset fixed beforehand (session 51, AMD EPYC;
  ``agentrl reproduce ad_eps_darkroom --preset cpu --seeds 5 --first-seed
  5``; ``repro_ad_eps_darkroom_cpu_fresh_seeds``): ``sample_then_greedy``
  chosen and resolved in every seed, last-10 return 2.18 -> 12.44 [9.18,
  15.3] (noisy oracle 10.59), **1.16x [0.85, 1.43]** the data's best: not
  met (per seed 8.25, 13.84, 15.25, 10.38, 14.50).
- ``gpu``: ``ad_darkroom``'s gpu model (4 layers, 8 heads, width 512,
  batch 512, lr 3e-4, AdamW wd 1e-4, a cosine to 0.1) on the reference's
  data layout cut to 2,000 episodes: one history
  per training goal (65), ε decayed per step over 90% of it, 3,000 updates,
  100 evaluation episodes; sized for under 8 minutes on one H100 as
  ``ad_darkroom``'s gpu preset (estimated, not measured).
- ``full``: the AD-ε reference's Dark Room: one history of 20,000 episodes
  per training goal (65; 26M steps), ε from 1 to 0.3 decayed per step over
  the first 90%, context 4 episodes (80 steps) starting at any step, 4
  layers width 512, batch 512, lr 3e-4, 300k updates, 100 greedy
  evaluation episodes; for a GPU. Its training is the reference code's
  (``REFERENCE_TRAINING``, since session 44): 4 heads, no weight decay, a
  5,078-step warm-up (a tenth of one pass over its windows) and a cosine to
  0; and its Adam and dropout (``REFERENCE_ADAM_AND_DROPOUT``): betas (0.9,
  0.99) (``train.adam_b2=0.99``), dropout 0.5 on the attention weights, 0.1
  on the residual branches, 0.3 on the embeddings (``model.attention_dropout``,
  ``residual_dropout``, ``embedding_dropout``; until then one rate, 0.1,
  and b2 0.999); and since session 69 its three tokens per step
  (``REFERENCE_TOKENS``: ``model.token_layout="sar"``, ``(s_t, a_t,
  r_t)``, the action read at the state token; until then one token a
  step, so its attention dropout acted on a third as many weights a
  window; ``gpu`` keeps one). Named deviations left: its tokens embedded
  at 64 then projected to 512 (ours embedded at 512), its sinusoidal
  absolute positions (ours rotary), its action head on the last block's
  output with no final LayerNorm (ours has one), its N(0, 0.02)
  initialisation and its fp16 autocast (ours float32);
  its loop also runs to the end of the epoch that passes 300k (304,692
  updates). Its FFN's exact GELU
  (torch's ``nn.GELU()``) is matched in ``gpu`` and ``full`` since session
  69 (``REFERENCE_ACTIVATION``: ``model.ffn_activation="gelu"``); ``cpu``
  keeps GPT-2's tanh form (the DPT reference's, within 0.0005 of it at
  every input), with which its records were made.
"""

import dataclasses

import ad_darkroom

from agentrl.algos import ADEps
from agentrl.train.experiments import make_presets, steps_fields

# AD-eps: epsilon 1 -> 1 - target performance (0.7), per step, over 90%
CURRICULUM = (("epsilon_end", 0.3), ("decay_fraction", 0.9), ("schedule", "step"))

#: The AD-eps reference's training beside the paper's model
#: (``dark_room/ad_darkroom.py``'s TrainConfig, ``utils/schedule.py``): 4 heads,
#: Adam without weight decay (AdamW at 0 is Adam), a cosine to 0.
REFERENCE_TRAINING = {
    "model.num_heads": 4,
    "train.weight_decay": 0.0,
    "train.cosine_end": 0.0,
}

#: The AD-eps reference's Adam betas and its three dropout rates (corl-team/
#: ad-eps ``dark_room/ad_darkroom.py``, TrainConfig: line 50 ``betas = (0.9,
#: 0.99)``, lines 43-45 ``attention_dropout = 0.5``, ``residual_dropout =
#: 0.1``, ``embedding_dropout = 0.3``, passed to ``ADTransformer`` at lines
#: 397-399 and ``torch.optim.Adam`` at line 407; ``ADTransformer``'s own
#: defaults 0.5 / 0.0 / 0.1, lines 168-170, are overridden;
#: ``configs/ad.yaml`` sets none of them). ``key_to_door/ad_dark_key2door.py``
#: has the same values (lines 44-46, 51; passed at 439-441, 449).
REFERENCE_ADAM_AND_DROPOUT = {
    "train.adam_b2": 0.99,
    "model.attention_dropout": 0.5,  # nn.MultiheadAttention's, on the weights
    "model.residual_dropout": 0.1,
    "model.embedding_dropout": 0.3,
}

#: The AD-eps reference's feed-forward nonlinearity, torch's exact
#: ``nn.GELU()`` (``dark_room/ad_darkroom.py`` line 127,
#: ``key_to_door/ad_dark_key2door.py`` line 132), where agentrl's default is
#: GPT-2's tanh form.
REFERENCE_ACTIVATION = {"model.ffn_activation": "gelu"}

#: The AD-eps reference's tokens: three per step, ``(s_0, a_0, r_0, s_1,
#: ...)``, the action read at the state token (``ADTransformer.forward``,
#: ``out[:, 0::3]``; the same in ``key_to_door/ad_dark_key2door.py``):
#: agentrl's ``"sar"`` layout. In ``full`` only: ``gpu``, sized for minutes,
#: keeps one token per step (a third of the tokens).
REFERENCE_TOKENS = {"model.token_layout": "sar"}

BASE = dataclasses.replace(
    ad_darkroom.BASE,
    name="ad_eps_darkroom",
    algo=ADEps(context_episodes=ad_darkroom.BASE.algo.context_episodes),
    data=dataclasses.replace(
        ad_darkroom.BASE.data, source="noisy_oracle", source_args=CURRICULUM
    ),
    # the AD-eps reference acts greedily; the rule is chosen on validation
    # goals in reproductions (eval.acting: sample, greedy, sample_then_greedy)
    eval=dataclasses.replace(ad_darkroom.BASE.eval, acting="greedy"),
)
CHANGES = dict(
    smoke=ad_darkroom.CHANGES["smoke"],
    # measured: 2,000 steps on 260 histories plateau at 0.79 of the data's
    # best; 6,000 on 1,040 (16 per training goal) at 0.90 (3 seeds); every
    # second episode (a curriculum twice as steep) 0.955 (3 seeds). Those
    # runs warmed up for 200 steps (kept explicit: the derived default
    # would be 600). The AD-eps paper evaluates 100 episodes: its learner
    # improves at the pace of the data's curriculum and passes the data's
    # best after it.
    cpu={
        "data.num_tasks": 1040,
        "data.num_episodes": 40,
        "episode_stride": 2,
        "train.steps": 6000,
        "train.warmup_steps": 200,
        "train.log_every": 150,
        "train.checkpoint_every": 1500,
        "eval.num_episodes": 100,
        # chosen on validation goals (seeds 0 and 2; a tie in seed 1)
        "eval.acting": "sample_then_greedy",
    },
    gpu={
        **ad_darkroom.PAPER_MODEL,
        **REFERENCE_ACTIVATION,
        "model.compute_dtype": "bfloat16",
        "data.num_tasks": 65,  # one history per training goal
        "data.num_episodes": 2000,
        **steps_fields(3000),
        "eval.num_episodes": 100,
    },
    full={
        **ad_darkroom.CHANGES["full"],
        **REFERENCE_TRAINING,
        **REFERENCE_ADAM_AND_DROPOUT,
        **REFERENCE_ACTIVATION,
        **REFERENCE_TOKENS,
        "data.num_tasks": 65,
        "data.num_episodes": 20_000,
        "data.source_args": CURRICULUM,
        # the reference warms up over a tenth of one pass over its windows:
        # ceil((65 x 20,000 x 20 - 80) / 512) = 50,782 batches
        "train.warmup_steps": 5_078,
        "eval.num_episodes": 100,
    },
)
PRESETS = make_presets(BASE, **CHANGES)

# the targets `agentrl reproduce` judges it by (agentrl.evaluate.targets)
TARGET = "beats_its_data"
